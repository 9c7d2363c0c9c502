import {
  DEFAULT_HISTORY,
  nextTickAfter,
  ticksAround,
  type HttpDestinations,
  type ScheduleConfig,
} from '@tickwarden/config';
import { jobClaim, parseTickJob, tickClaim, type RunOutcome, type TickJobData } from '@tickwarden/contracts';
import {
  AcquireAbortedError,
  ClaimStartedError,
  FencePassedError,
  LeaseLostError,
  LockTakenError,
  QuorumUnavailableError,
  RedlockError,
  type Lease,
  type Redlock,
} from '@tickwarden/redlock';
import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import type { RunHistory, RunRecord } from '@tickwarden/runtime';
import type { Logger } from 'pino';
import { COMMAND_GUARD_UNAVAILABLE, type CommandGuard } from './command-guard.ts';
import type { ProgramLauncher } from './handlers/program.ts';
import {
  deferralsOf,
  handlerStarted,
  lostAttemptsOf,
  lostFinish,
  lostStart,
  markDeferred,
  markFinished,
  markWorkerLost,
  unmarkHandlerStarted,
  type StartMark,
  type FinishedMark,
  type HandlerStartedMark,
  type LastDeferral,
} from './run-progress.ts';
import { LEASE_ENDING_BEFORE_START, runHandler } from './handlers/index.ts';
import { LAUNCHER_UNAVAILABLE } from './launcher-protocol.ts';
import type { OutputLimits } from './handlers/output.ts';
import { HandlerError, type LeaseValidity, type RunDetails } from './run-context.ts';
import { peersToMarkRevoked, predecessorsWaitUntil, unseenRevokedUntil, type ActivePeer } from './cancel-previous.ts';
import {
  firstStart,
  firstStartId,
  leaseNodeTimeoutMs,
  heldByRun,
  pause,
  runFences,
  START_RETRY_MS,
  startOrder,
  type TicksAround,
} from './first-start.ts';
import { LeaseValidityTracker } from './run-lease.ts';
import type { WorkerMetrics } from './metrics.ts';

/** Why a run's signal aborted. */
export type AbortKind = 'lease-lost' | 'timeout' | 'shutdown' | 'cancelled';

/** The reason of a run's AbortSignal: `kind` says who stopped it; `cause` is the lease library's error for `lease-lost`. */
export class RunAbortedError extends Error {
  readonly kind: AbortKind;
  constructor(kind: AbortKind, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RunAbortedError';
    this.kind = kind;
  }
}

/**
 * The processor call lost the job before its handler started: BullMQ's stalled check handed it
 * on while this worker could not reach the queue Redis. Nothing ran here; the attempt that holds
 * the job now decides the tick.
 */
class JobHandedOnError extends Error {
  constructor() {
    super(
      "the job's lock passed to another attempt before the handler started (this worker was cut from the queue Redis): not run here",
    );
    this.name = 'JobHandedOnError';
  }
}

/** What a job attempt returns to BullMQ (the job's return value) when it does not fail. */
export interface RunResult {
  outcome: Extract<
    RunOutcome,
    'succeeded' | 'skipped-overlap' | 'skipped-paused' | 'missed-deadline' | 'superseded' | 'already-started'
  >;
  /** The fencing token of this attempt's grant (absent when it did not run). */
  fence?: number;
  details?: RunDetails;
}

export interface JobRunnerOptions {
  redlock: Redlock;
  /** Carries `worker` (pino `base`); runs add schedule, tick, jobId, fence and attempt. */
  logger: Logger;
  /** The schedule as currently configured (hot reload changes it), or undefined. */
  schedule: (id: string) => ScheduleConfig | undefined;
  /** The worker's command guard (started unless `launcher` is set): command runs start only while it runs. */
  guard: CommandGuard;
  /** The launcher container: programs start there instead (see CommandRunOptions). */
  launcher?: ProgramLauncher | undefined;
  metrics?: WorkerMetrics | undefined;
  /** Where every attempt's end is kept for `status` and the console (not deferrals: nothing ended); undefined until the worker connected. */
  history?: (() => RunHistory | undefined) | undefined;
  /** Told about every attempt's outcome (tests, metrics). */
  onOutcome?: ((outcome: RunOutcome, data: TickJobData | undefined, job: Job) => void) | undefined;
  /** Caps on logged handler output (default 1,000 lines of at most 4 KiB per run). */
  outputLimits?: OutputLimits | undefined;
  /** Where the Secrets that schedules' `{ secret, key }` values name are mounted; default DEFAULT_SECRETS_DIR. */
  secretsDir?: string | undefined;
  /** Where http handlers may connect; default DEFAULT_HTTP_DESTINATIONS (link-local denied). */
  httpDestinations?: HttpDestinations | undefined;
  /** Wall clock, ms (default `Date.now`): for the start deadline. */
  now?: (() => number) | undefined;
  /** Names the worker in a job's last deferral (its `progress`). */
  workerId?: string | undefined;
  /**
   * Why the worker does not take jobs now (no lock quorum answers it), or
   * undefined while it does: a job BullMQ still hands over meanwhile is
   * deferred at once with this reason.
   */
  notTakingJobs?: (() => string | undefined) | undefined;
  /** Told when a lease could not be taken for want of a lock quorum (not a shutdown): the service then probes the lock nodes. */
  onQuorumUnavailable?: ((error: QuorumUnavailableError, nodeTimeoutMs: number) => void) | undefined;
  /**
   * The other jobs of the job's schedule active now in its BullMQ queue: a
   * `cancel-previous` run waits for those whose handler started before its own
   * handler starts. Without it, it does not wait.
   */
  activePeers?: ((job: Job) => Promise<readonly ActivePeer[]>) | undefined;
  /** Records on this run's own job until when it waits for a run no list shows (ActivePeer.waitsUntilMs), if the job is still there. */
  noteWaitsUntil?: ((job: Job, untilMs: number) => Promise<void>) | undefined;
  /** Records on a started peer's job that this run (granted at `atMs`) found it active: see predecessorsWaitUntil. */
  notePeerRevoked?: ((job: Job, peerJobId: string, atMs: number) => Promise<void>) | undefined;
  /** Whether the schedule is paused now (`tickwarden pause`); without it, only the config's `paused` counts. */
  paused?: ((scheduleId: string) => Promise<boolean>) | undefined;
  /** Writes a job's handler-started mark if the processor call (its lock `token`) still holds the job: see markHandlerStarted. */
  markStarted: (job: Job, token: string | undefined, mark: { attempt: number; fence: number }) => Promise<StartMark>;
}

/** A later start waits for the previous attempt's lease at most its TTL plus this, ms; a cancel-previous run waits for its predecessors at most until its lease's TTL plus this. */
export const TAKEOVER_SLACK_MS = 1000;
/** Why a job is deferred while its schedule is not in this worker's configuration. */
const UNKNOWN_SCHEDULE = "schedule not in this worker's configuration";
/** How long after its due time a job of an unknown schedule waits for the worker's config, when it has no start deadline, ms. */
const UNKNOWN_SCHEDULE_WAIT_MS = 120_000;

/** How long a backfilled tick's job waits for the schedule's lease held by another run before it is deferred (and waits again), ms. */
export const BACKFILL_WAIT_MS = 10_000;
/** A deferred job is due again after this plus up to {@link DEFER_JITTER_MS}, ms (sooner when its start deadline is closer). */
export const DEFER_DELAY_MS = 500;
export const DEFER_JITTER_MS = 500;
/** A cancel-previous run's watchdog extends at least this often, ms: a revoked run learns it within about this. */
export const CANCEL_PREVIOUS_EXTEND_MS = 500;
/**
 * A job ready more than this before its due time by the worker's `now` (the lock nodes' time) is
 * put back until then, ms: BullMQ makes a delayed job ready by the clock of whichever worker looks
 * (its host's), so a run must not start early because one host's clock is ahead.
 */
const EARLY_TOLERANCE_MS = 100;
/** A cancel-previous run stops confirming its lease (and aborts) with this little validity left, ms: the watchdog's own margin. */
const LEASE_CHECK_MARGIN_MS = 200;
/** How often a cancel-previous run reads the queue's active jobs while it waits for its predecessors, ms. */
export const PREDECESSOR_POLL_MS = 100;
/**
 * How long a run whose program ended waits for its finished mark to be written, ms. The lease is
 * held meanwhile: a queue Redis that does not answer must not keep it past the program's end,
 * where the schedule's next tick would find it taken and be skipped though nothing runs.
 */
export const FINISHED_MARK_WAIT_MS = 1000;

function tryParseTickJob(data: unknown): TickJobData | undefined {
  try {
    return parseTickJob(data);
  } catch {
    return undefined;
  }
}

/**
 * HandlerError codes of a program that never started: its lease could lapse first (this worker was
 * paused), or no guard or launcher could start it. The job goes back for any worker.
 */
const NOT_STARTED_CODES: readonly string[] = [
  LEASE_ENDING_BEFORE_START,
  COMMAND_GUARD_UNAVAILABLE,
  LAUNCHER_UNAVAILABLE,
];

/** Whether an abort is a cancel-previous revocation: the watchdog found another value holding the lease. */
function revoked(aborted: RunAbortedError): boolean {
  const { cause } = aborted;
  return (
    aborted.kind === 'lease-lost' && cause instanceof LeaseLostError && [...cause.nodeCauses.values()].includes('taken')
  );
}

/** One attempt of one tick's job, as the runner follows it. */
interface Attempt {
  job: Job;
  /** BullMQ's lock token of this processor call (to put the job back). */
  token: string | undefined;
  data: TickJobData;
  jobId: string;
  /** Attempts ended or stalled before this one, plus one (deferrals not counted). */
  attempt: number;
  /** The job's progress as this processor call found it (put back when a marked handler never started). */
  progressAtBegin: Job['progress'];
  /** No attempt of the job has ended or stalled yet (deferrals aside): the claim's value takes the lease. */
  firstStart: boolean;
  /** Deferrals before this processor call, and the last one's cause (from the job's progress). */
  deferrals: number;
  lastDeferral: LastDeferral | undefined;
  log: Logger;
  /** `performance.now()` when BullMQ called the processor. */
  started: number;
}

/** What the handler of one attempt runs with once the lease is held. */
interface Held {
  lease: Lease;
  controller: AbortController;
  leaseSignal: AbortSignal;
  validity: LeaseValidity;
  log: Logger;
  /** Set by the handler right before its work can begin (`RunContext.started`): from then on the attempt counts as run. */
  state: { handlerStarted: boolean };
  /** When (wall ms) the lease was granted: a cancel-previous grant revoked the run before it then. */
  grantedAtMs: number;
}

const abortOnce = (controller: AbortController, reason: RunAbortedError): void => {
  if (!controller.signal.aborted) controller.abort(reason);
};

/**
 * Runs tick jobs: takes the schedule's lease with the tick's claim at the due
 * time (first start; the lock nodes decide the order of the schedule's runs) or
 * waits for the previous attempt's lease to lapse (later starts), then runs the
 * handler under the lease watchdog. A lease it cannot take (another run holding
 * it aside) puts the job back without consuming an attempt (a deferral) until
 * the tick's start deadline. `processJob` is
 * BullMQ's processor; `stopStarting` ends every lease wait (shutdown) and
 * `abortAll` stops every run (shutdown past its grace).
 */
export class JobRunner {
  readonly #options: JobRunnerOptions;
  readonly #validities: LeaseValidityTracker;
  readonly #active = new Set<AbortController>();
  /** The run's log per lease held (`resource fence`), for what the lock library tells of its release. */
  readonly #holding = new Map<string, Logger>();
  /** Aborted once the worker stops: no lease wait goes on, no new run starts (jobs are deferred). */
  readonly #stopping = new AbortController();
  /** Aborted past the shutdown grace: every run is aborted. */
  readonly #shutdown = new AbortController();

  constructor(options: JobRunnerOptions) {
    this.#options = options;
    this.#validities = new LeaseValidityTracker(options.redlock);
    options.redlock.on('unreleased', ({ resource, fence, released, validityMs }) =>
      this.#holding
        .get(`${resource} ${fence}`)
        ?.warn(
          { releasedOn: released, heldUntilMs: this.#now() + Math.ceil(validityMs) },
          "lease not released on a quorum (lock nodes unreachable): the schedule's next ticks may find it held until it lapses",
        ),
    );
  }

  /** Runs holding a lease now. */
  get activeRuns(): number {
    return this.#active.size;
  }

  /** The worker is stopping: lease waits end and jobs not yet running go back to the queue (deferred); running handlers go on. */
  stopStarting(): void {
    if (!this.#stopping.signal.aborted)
      this.#stopping.abort(new RunAbortedError('shutdown', 'the worker is shutting down'));
  }

  /** Aborts every run (its handler's signal fires with a `shutdown` RunAbortedError) and every lease wait; no new run starts. */
  abortAll(): void {
    const reason = new RunAbortedError('shutdown', 'the worker is shutting down');
    this.stopStarting();
    if (!this.#shutdown.signal.aborted) this.#shutdown.abort(reason);
    for (const controller of this.#active) abortOnce(controller, reason);
  }

  /** BullMQ's processor: three parameters, so BullMQ passes its AbortSignal (job cancellation). */
  async processJob(job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<RunResult> {
    const run = this.#begin(job, token);
    const finished = lostFinish(job);
    if (finished) return this.#finishedEarlier(run, finished);
    const lost = lostStart(job);
    if (lost) return this.#workerLost(run, lost);
    const earlyMs = run.data.dueMs - this.#now();
    if (earlyMs > EARLY_TOLERANCE_MS)
      return this.#defer(
        run,
        `due in ${earlyMs} ms by the lock nodes' time`,
        {},
        {
          delayMs: earlyMs,
          message:
            'job ready before its due time (BullMQ promoted it by a clock that is ahead): delayed until then (no attempt consumed)',
        },
      );
    // One reading of the clock decides both: a deadline passing between two readings would fail the job of
    // a schedule not known yet as removed from the config, where it is a missed start deadline.
    const now = this.#now();
    const lateMs = this.#lateMs(run, now);
    if (lateMs !== undefined) return this.#missDeadline(run, lateMs, run.lastDeferral);
    const schedule = await this.#scheduleOf(run, now);
    if (schedule === undefined)
      return this.#defer(
        run,
        UNKNOWN_SCHEDULE,
        {},
        {
          message:
            "schedule not in this worker's configuration yet (its reload may lag the scheduler's): job deferred (no attempt consumed)",
        },
      );
    const successorDueMs = this.#successorDue(run, schedule);
    if (successorDueMs !== undefined) return this.#supersededLate(run, successorDueMs);
    const paused = await this.#pausedAtStart(run, schedule);
    if (paused !== undefined) return paused;
    if (this.#stopping.signal.aborted) return this.#defer(run, 'the worker is shutting down: the run did not start');
    const notTaking = this.#options.notTakingJobs?.();
    if (notTaking !== undefined) return this.#defer(run, notTaking);
    const lease = await this.#takeLease(run, schedule);
    if (!('value' in lease)) return lease;
    return this.#runUnderLease(run, schedule, lease, signal);
  }

  /** BullMQ failed the job for stalling more than MAX_STALLED_COUNT times, without calling the processor: records it. */
  stalledTooOften(job: Job, reason: string): void {
    const started = performance.now();
    const data = tryParseTickJob(job.data);
    const jobId = job.id ?? '(no id)';
    const log = this.#options.logger.child({
      ...(data ? { schedule: data.schedule, tick: new Date(data.tickMs).toISOString() } : {}),
      jobId,
      attempt: job.attemptsStarted,
    });
    this.#record(
      'failed',
      data,
      job,
      log,
      started,
      { reason, stalls: job.stalledCounter },
      'the job stalled too often (its worker died or paused past the job lock each time): failed by BullMQ, not retried',
    );
  }

  #now(): number {
    return (this.#options.now ?? Date.now)();
  }

  #begin(job: Job, token: string | undefined): Attempt {
    const started = performance.now();
    const jobId = job.id ?? '(no id)';
    const { deferrals, lastDeferral } = deferralsOf(job);
    // Ended and stalled processor calls count, deferred ones do not; a worker-lost attempt once, not as
    // its stall and its recorded failure. A late writer can only erase lostAttempts, which raises the
    // number: no two calls that ran the handler share one.
    const attempt = job.attemptsMade + job.stalledCounter - lostAttemptsOf(job) + 1;
    let data: TickJobData;
    try {
      data = parseTickJob(job.data);
    } catch (error) {
      this.#record(
        'failed',
        undefined,
        job,
        this.#options.logger.child({ jobId, attempt }),
        started,
        { err: error },
        'invalid tick job data: not retried',
      );
      throw new UnrecoverableError(`invalid tick job data: ${(error as Error).message}`);
    }
    const log = this.#runLog(data, jobId, attempt);
    // Deferrals leave attemptsMade as it was (BullMQ's moveToDelayed skips the attempt); a stall counts.
    const firstStart = job.attemptsMade === 0 && job.stalledCounter === 0;
    return {
      job,
      token,
      data,
      jobId,
      attempt,
      progressAtBegin: job.progress,
      firstStart,
      deferrals,
      lastDeferral,
      log,
      started,
    };
  }

  #runLog(data: TickJobData, jobId: string, attempt: number): Logger {
    return this.#options.logger.child({
      schedule: data.schedule,
      tick: new Date(data.tickMs).toISOString(),
      jobId,
      attempt,
    });
  }

  /**
   * A re-run after BullMQ lost the end of the attempt whose handler finished (its worker paused or
   * died before the end was recorded, and the stalled check moved the job back): records that end
   * as BullMQ would have, without running the handler again.
   */
  #finishedEarlier(run: Attempt, finished: FinishedMark): RunResult {
    const fields = { fence: finished.fence, finishedAttempt: finished.attempt, finishedOutcome: finished.outcome };
    if (finished.outcome === 'failed') {
      this.#record(
        'finished-earlier',
        run.data,
        run.job,
        run.log,
        run.started,
        { ...fields, error: finished.error },
        'an earlier attempt failed but BullMQ lost its end: recorded as failed, not run again (retried if attempts remain)',
      );
      throw new Error(finished.error ?? 'failed');
    }
    this.#record(
      'finished-earlier',
      run.data,
      run.job,
      run.log,
      run.started,
      fields,
      'an earlier attempt succeeded but BullMQ lost its completion: completed, not run again',
    );
    return { outcome: 'succeeded', fence: finished.fence, details: finished.details ?? {} };
  }

  /**
   * A re-run after the worker of an attempt whose handler started died or paused past the job lock
   * before anyone recorded its end: the handler may have finished, or have done half its work, so
   * it is not run again by this call. The lost attempt fails as `worker-lost` (retried, under a
   * fresh lease once the old one lapsed, only if attempts remain): `attempts` bounds how often a
   * tick's handler starts.
   */
  async #workerLost(run: Attempt, lost: HandlerStartedMark): Promise<never> {
    const fields = { fence: lost.fence };
    try {
      await markWorkerLost(run.job);
    } catch (error) {
      run.log.warn(
        { err: error },
        'could not count the worker-lost attempt in its job: later attempts are numbered one higher',
      );
    }
    this.#record(
      'worker-lost',
      run.data,
      run.job,
      this.#runLog(run.data, run.jobId, lost.attempt),
      run.started,
      fields,
      "the worker of a started run died or paused past its job lock, and the run's end is unknown: failed, not run again (retried if attempts remain)",
    );
    throw new Error(
      `worker lost: attempt ${lost.attempt} (fence ${lost.fence}) started its handler and its worker stopped before recording the end`,
    );
  }

  /**
   * cancel-previous: when the schedule's next tick is already due (wall ms; its jitter left out, so
   * a little early), a start of this tick - deferred, retried or re-run after a stall - would run
   * after, or during, the newer one's run: it is superseded instead. Undefined when it may start
   * (a backfilled tick's job always may: an operator asked for it after its successors).
   */
  #successorDue({ data }: Attempt, schedule: ScheduleConfig): number | undefined {
    if (data.overlap !== 'cancel-previous' || data.backfill) return undefined;
    const next = nextTickAfter(schedule.cron, schedule.timezone, data.tickMs);
    return next !== undefined && next <= this.#now() ? next : undefined;
  }

  #supersededLate(run: Attempt, successorDueMs: number): RunResult {
    const fields = {
      firstStart: run.firstStart,
      successorTick: new Date(successorDueMs).toISOString(),
    };
    return this.#notRun(
      run,
      'superseded',
      fields,
      "the schedule's next tick is due (cancel-previous): superseded, not run",
    );
  }

  /**
   * A tick's job enqueued before its schedule was paused (in the config, or by `tickwarden pause`)
   * does not run: `skipped-paused`, recorded once. An operator's own run (a trigger, a backfill)
   * runs whatever the pause. Undefined when it may run; deferred when the pause cannot be read.
   */
  async #pausedAtStart(run: Attempt, schedule: ScheduleConfig): Promise<RunResult | undefined> {
    const { data, jobId } = run;
    if (data.backfill || jobClaim(jobId, data.tickMs) !== tickClaim(data.tickMs)) return undefined;
    let paused = schedule.paused;
    try {
      paused ||= (await this.#options.paused?.(data.schedule)) ?? false;
    } catch (error) {
      return this.#defer(run, `could not read whether the schedule is paused: ${(error as Error).message}`);
    }
    if (!paused) return undefined;
    return this.#notRun(run, 'skipped-paused', {}, 'the schedule is paused: skipped, not run');
  }

  /** The tick's start deadline (wall ms), or undefined when none applies: none set (older jobs), or a handler already started for the tick. */
  #deadlineMs({ data, job }: Attempt): number | undefined {
    if (data.startDeadlineMs === null || handlerStarted(job)) return undefined;
    return data.dueMs + data.startDeadlineMs;
  }

  /**
   * How late past its start deadline the attempt starts, or undefined if it may
   * start. The deadline holds until a handler has started for the tick, on a
   * first start, a deferred one, a retry or a stalled re-run alike; after that,
   * later attempts continue a run that started in time.
   */
  #lateMs(run: Attempt, now: number): number | undefined {
    const deadlineMs = this.#deadlineMs(run);
    if (deadlineMs === undefined) return undefined;
    return now > deadlineMs ? now - run.data.dueMs : undefined;
  }

  /**
   * The start deadline passed: records the miss, with why the run could not start in time (the
   * last deferral's reason), and completes the job; superseded instead when that deferral found a
   * later tick's run granted on some node (`passed`) and too few others answered.
   */
  #missDeadline(
    run: Attempt,
    lateMs: number,
    deferral: Pick<LastDeferral, 'reason' | 'passed'> | undefined,
  ): RunResult {
    const { data } = run;
    const fields = {
      lateMs,
      startDeadlineMs: data.startDeadlineMs,
      firstStart: run.firstStart,
      ...(deferral === undefined ? {} : { reason: deferral.reason }),
      ...(run.deferrals > 0 ? { deferrals: run.deferrals } : {}),
    };
    if (deferral?.passed)
      return this.#notRun(
        run,
        'superseded',
        fields,
        'a run of a later tick of the schedule was granted the lease on nodes that answered, and too few others answered before the start deadline: superseded, not run',
      );
    return this.#notRun(run, 'missed-deadline', fields, 'run missed its start deadline: not run');
  }

  /**
   * The job's schedule as configured here. Unknown (this worker's config reload lags the replicas',
   * as ConfigMap updates reach pods a minute apart): undefined while the tick may still start (its
   * start deadline; without one, UNKNOWN_SCHEDULE_WAIT_MS after it was due), so the job is deferred;
   * after that the job fails without retry (a schedule removed from the config).
   */
  async #scheduleOf(run: Attempt, now: number): Promise<ScheduleConfig | undefined> {
    const { data } = run;
    const schedule = this.#options.schedule(data.schedule);
    if (schedule) return schedule;
    // With a start deadline the job waits until it is late (#lateMs at the same `now`): it is missed, never failed.
    if (this.#deadlineMs(run) !== undefined || now < data.dueMs + UNKNOWN_SCHEDULE_WAIT_MS) return undefined;
    this.#record(
      'failed',
      data,
      run.job,
      run.log,
      run.started,
      {},
      "schedule not in this worker's configuration: not retried",
    );
    throw new UnrecoverableError(`schedule "${data.schedule}" is not in this worker's configuration`);
  }

  /**
   * Puts the job back in the queue without consuming an attempt, due again in
   * about a second (any worker may take it), unless the tick's start deadline
   * has passed: then the tick is missed (recorded with `reason`) and the job
   * completes. Throws BullMQ's DelayedError once the job is back.
   */
  async #defer(
    run: Attempt,
    reason: string,
    fields: Record<string, unknown> = {},
    how: { delayMs?: number; message?: string; unstarted?: boolean; passed?: boolean } = {},
  ): Promise<RunResult> {
    const { data, job, log, started } = run;
    // This attempt marked the handler started, but it never did: the start deadline still holds, and the mark goes.
    if (how.unstarted) unmarkHandlerStarted(job, run.progressAtBegin);
    const now = this.#now();
    const deadlineMs = this.#deadlineMs(run);
    const passed = how.passed ? { passed: true as const } : {};
    if (deadlineMs !== undefined && now >= deadlineMs)
      return this.#missDeadline(run, now - data.dueMs, { reason, ...passed });
    const backoffMs = how.delayMs ?? DEFER_DELAY_MS + Math.round(Math.random() * DEFER_JITTER_MS);
    // Due again before the deadline when it is near, for a last try.
    const delayMs = deadlineMs === undefined ? backoffMs : Math.min(backoffMs, Math.max(100, deadlineMs - now - 100));
    let deferrals: number;
    try {
      deferrals = await markDeferred(job, {
        reason,
        atMs: now,
        ...passed,
        ...(this.#options.workerId === undefined ? {} : { worker: this.#options.workerId }),
      });
      await job.moveToDelayed(now + delayMs, run.token);
    } catch (error) {
      this.#record(
        'failed',
        data,
        job,
        log,
        started,
        { reason, err: error },
        'could not take the lease, and could not put the job back: the job fails (retried if attempts remain)',
      );
      throw error;
    }
    const startDeadline = deadlineMs === undefined ? null : new Date(deadlineMs).toISOString();
    this.#record(
      'deferred',
      data,
      job,
      log,
      started,
      { reason, deferrals, delayMs, startDeadline, ...fields },
      how.message ?? 'could not take the lease: job deferred (no attempt consumed)',
    );
    throw new DelayedError(`deferred: ${reason}`);
  }

  /**
   * The attempt's lease, or the result when it does not run: another job of the
   * tick started (already-started), a run of an earlier tick holds the lease
   * (skipped-overlap), a later tick's run started first (superseded), or it could
   * not be taken (deferred, or missed-deadline past the start deadline).
   */
  async #takeLease(run: Attempt, schedule: ScheduleConfig): Promise<Lease | RunResult> {
    const { data } = run;
    try {
      return run.firstStart
        ? await this.#firstStart(run, schedule)
        : await this.#acquireAfterPrevious(data, run.jobId, schedule);
    } catch (error) {
      if (error instanceof ClaimStartedError) {
        return this.#notRun(
          run,
          'already-started',
          { startedBy: error.holder },
          'another start of this tick came first (a job of it enqueued again after the queue Redis lost its data, or this job handed on while this worker was paused): not run',
        );
      }
      if (error instanceof FencePassedError)
        return this.#notRun(
          run,
          'superseded',
          { passedBy: error.fence },
          'a run of a later tick of the schedule took its lease first: superseded, not run',
        );
      if (error instanceof LockTakenError && heldByRun(error, this.#options.redlock)) {
        // A backfill runs each tick asked for: it waits for the run in its way (a deferral) instead of skipping.
        if (data.backfill)
          return this.#defer(run, "another run holds the schedule's lease: the backfilled tick waits for it", {
            takenOn: error.takenOn,
          });
        if (run.firstStart && !(await this.#startedRunBesides(run)))
          return this.#defer(
            run,
            "the schedule's lease is held, but no other run of it has started its handler (its worker may have stopped right after taking the lease): the tick waits for the lease",
            { takenOn: error.takenOn },
          );
        if (run.firstStart) await this.#startSkipped(run);
        return this.#notRun(
          run,
          'skipped-overlap',
          { takenOn: error.takenOn },
          "a run of an earlier tick holds the schedule's lease: skipped",
        );
      }
      if (error instanceof AcquireAbortedError)
        return this.#defer(run, 'the worker is shutting down while the run waited for its lease');
      if (error instanceof QuorumUnavailableError)
        this.#options.onQuorumUnavailable?.(error, leaseNodeTimeoutMs(data.lease.ttlMs));
      const message = error instanceof Error ? error.message : String(error);
      const passed = error instanceof RedlockError && [...error.nodeCauses.values()].includes('passed');
      return this.#defer(run, message, error instanceof RedlockError ? {} : { err: error }, { passed });
    }
  }

  /**
   * Whether another job of the schedule in the active list has started its handler: a skip must be
   * explained by a run in progress. A lease held by an attempt that never started its handler (its
   * worker stopped or died between the grant and the mark) lapses within its TTL, and the tick can
   * still run then. Without a view of the active list the skip stands; a failed look does not.
   */
  async #startedRunBesides({ job, log }: Attempt): Promise<boolean> {
    const activePeers = this.#options.activePeers;
    if (!activePeers) return true;
    try {
      return (await activePeers(job)).some((peer) => peer.jobId !== job.id && peer.started);
    } catch (error) {
      log.warn({ err: error }, 'could not read the runs in progress: the tick waits for the lease');
      return false;
    }
  }

  /**
   * Starts the claim of a tick skipped for an overlap (a start leaves it started only where it was
   * granted), so that the next tick does not wait behind it (see startOrder), and recovery never
   * publishes it again. A failure is logged: the next tick then waits its BEHIND_WAIT_MS at most.
   */
  async #startSkipped({ data, jobId, log }: Attempt): Promise<void> {
    const { resource, value, ttlMs } = data.lease;
    await this.#options.redlock
      .startClaim(
        { resource, claim: jobClaim(jobId, data.tickMs), value, start: firstStartId(data) },
        { nodeTimeoutMs: leaseNodeTimeoutMs(ttlMs) },
      )
      .catch((error: unknown) => log.warn({ err: error }, "could not mark the skipped tick's claim started"));
  }

  /** A first start: the claim's value takes the lease at the due time, in the schedule's order (see firstStart, startOrder). */
  #firstStart({ data, jobId }: Attempt, schedule: ScheduleConfig): Promise<Lease> {
    return firstStart(this.#options.redlock, data, {
      claim: jobClaim(jobId, data.tickMs),
      order: startOrder(data, this.#ticksAround(data, jobId, schedule), this.#now()),
      signal: this.#stopping.signal,
      onQuorumUnavailable: this.#options.onQuorumUnavailable,
      waitForLockMs: data.backfill ? BACKFILL_WAIT_MS : 0,
    });
  }

  /** The schedule's ticks around the job's (from this worker's config); none for a manual trigger, its own tick. */
  #ticksAround(data: TickJobData, jobId: string, schedule: ScheduleConfig): TicksAround {
    if (jobClaim(jobId, data.tickMs) !== tickClaim(data.tickMs)) return { previous: undefined, next: undefined };
    return ticksAround(schedule.cron, schedule.timezone, data.tickMs);
  }

  /**
   * A retry or a stalled re-run: the previous attempt may still hold the lease
   * (a stalled worker may even be alive), so never take it over by value. A
   * fresh value, retried for the lease TTL plus a second: it is granted only
   * once the previous lease has lapsed or was released. First it starts the
   * tick's claim as continuing the first start: a first start that comes later
   * still (its worker paused before it started, the job handed on meanwhile)
   * is then refused, and does not run beside or after this one. Its token is
   * from its tick's slot, as the first start's (see runFences).
   */
  async #acquireAfterPrevious(data: TickJobData, jobId: string, schedule: ScheduleConfig): Promise<Lease> {
    const ttlMs = data.lease.ttlMs;
    const first = firstStartId(data);
    await this.#options.redlock.startClaim(
      {
        resource: data.lease.resource,
        claim: jobClaim(jobId, data.tickMs),
        value: data.lease.value,
        start: `${first}:later`,
        prior: first,
      },
      { nodeTimeoutMs: leaseNodeTimeoutMs(ttlMs) },
    );
    const retryDelayMs = Math.min(250, Math.max(50, Math.round(ttlMs / 10)));
    const retryCount = Math.ceil((ttlMs + TAKEOVER_SLACK_MS) / retryDelayMs);
    return this.#options.redlock.acquire(data.lease.resource, ttlMs, {
      fence: runFences(data, this.#ticksAround(data, jobId, schedule)),
      retryCount,
      retryDelayMs,
      retryJitterMs: Math.round(retryDelayMs / 2),
      nodeTimeoutMs: leaseNodeTimeoutMs(ttlMs),
      signal: this.#stopping.signal,
    });
  }

  async #runUnderLease(
    run: Attempt,
    schedule: ScheduleConfig,
    lease: Lease,
    signal: AbortSignal | undefined,
  ): Promise<RunResult> {
    const grantedAtMs = this.#now();
    const log = run.log.child({ fence: lease.fence });
    const controller = new AbortController();
    const onCancel = (): void =>
      abortOnce(controller, new RunAbortedError('cancelled', `the job was cancelled: ${String(signal?.reason)}`));
    signal?.addEventListener('abort', onCancel, { once: true });
    if (this.#shutdown.signal.aborted) abortOnce(controller, this.#shutdown.signal.reason as RunAbortedError);
    this.#active.add(controller);
    this.#options.metrics?.activeRuns.inc();
    log.info(
      {
        firstStart: run.firstStart,
        leaseTtlMs: lease.ttlMs,
        handler: schedule.handler.kind,
        ...(run.deferrals > 0 ? { deferrals: run.deferrals } : {}),
      },
      'run started',
    );
    log.debug({ payload: run.data.payload }, 'run payload');
    // cancel-previous: the next tick's run revokes this lease; extending often, the watchdog learns it within CANCEL_PREVIOUS_EXTEND_MS.
    const holdSettings =
      run.data.overlap === 'cancel-previous'
        ? { extendRatio: Math.min(1 / 3, CANCEL_PREVIOUS_EXTEND_MS / lease.ttlMs) }
        : {};
    const state = { handlerStarted: false };
    let details: RunDetails | undefined;
    let failure: unknown;
    const holding = `${lease.resource} ${lease.fence}`;
    this.#holding.set(holding, log);
    try {
      details = await this.#validities.follow(lease, (validity) =>
        this.#options.redlock.hold(
          lease,
          (leaseSignal) =>
            this.#handle(run, schedule, { lease, controller, leaseSignal, validity, log, state, grantedAtMs }),
          holdSettings,
        ),
      );
    } catch (error) {
      failure = error;
    } finally {
      this.#holding.delete(holding);
      signal?.removeEventListener('abort', onCancel);
      this.#active.delete(controller);
      this.#options.metrics?.activeRuns.dec();
    }
    // An abort decides the outcome even if the handler then ended well: its work may have raced another holder.
    if (controller.signal.aborted) {
      const aborted = controller.signal.reason as RunAbortedError;
      // Stopped before its handler started (a shutdown, or a lease lost while waiting for predecessors or while this worker
      // was paused): nothing ran, the lease is released; the job goes back.
      if (!state.handlerStarted && !revoked(aborted) && (aborted.kind === 'shutdown' || aborted.kind === 'lease-lost'))
        return this.#defer(run, `${aborted.message} (before the handler started)`, {}, { unstarted: true });
      throw this.#abortFailure(run, log, aborted);
    }
    // A program not started because its lease could lapse first (this worker was paused): nothing ran either.
    if (
      !state.handlerStarted &&
      failure instanceof HandlerError &&
      NOT_STARTED_CODES.includes(failure.details['code'] as string)
    )
      return this.#defer(run, `${failure.message} (before the handler started)`, {}, { unstarted: true });
    if (failure instanceof JobHandedOnError) {
      this.#record('deferred', run.data, run.job, log, run.started, { reason: failure.message }, failure.message);
      throw failure;
    }
    if (failure !== undefined) throw this.#handlerFailure(run, log, failure);
    this.#record('succeeded', run.data, run.job, log, run.started, { ...details }, 'run succeeded');
    return { outcome: 'succeeded', fence: lease.fence, details: details ?? {} };
  }

  /** The routine under the watchdog: aborts on lease loss or `maxRuntime`, waits for predecessors (cancel-previous), marks the job, runs the handler. */
  async #handle(run: Attempt, schedule: ScheduleConfig, held: Held): Promise<RunDetails> {
    const { lease, controller, leaseSignal, validity, log, state, grantedAtMs } = held;
    const onLeaseLost = (): void => {
      const cause = leaseSignal.reason as Error;
      abortOnce(controller, new RunAbortedError('lease-lost', `lease lost: ${cause.message}`, { cause }));
    };
    leaseSignal.addEventListener('abort', onLeaseLost, { once: true });
    if (leaseSignal.aborted) onLeaseLost();
    let runtimeTimer: NodeJS.Timeout | undefined;
    try {
      if (run.data.overlap === 'cancel-previous')
        await this.#awaitPredecessors(run, { grantedAtMs, revokedMs: lease.revokedMs }, controller, log);
      controller.signal.throwIfAborted();
      // Right before the program's gate opens (the request is sent): a later start that finds no mark knows
      // nothing of the handler ran (the start deadline still holds, and it may run), and one that finds it
      // without an end does not run it again (worker-lost). Later would let a dead worker's program run twice.
      const started = async (): Promise<void> => {
        const mark = await this.#options.markStarted(run.job, run.token, { attempt: run.attempt, fence: lease.fence });
        if (mark === 'lock-lost') throw new JobHandedOnError();
        // No attempt of a vanished job can come; a new job of the tick ends already-started (this run started its claim).
        if (mark === 'job-gone')
          log.warn(
            'the job vanished from the queue Redis (it lost its data) before the handler started: the run goes on, as the only one of its tick',
          );
        controller.signal.throwIfAborted();
        // cancel-previous: a successor that read our progress before the mark did not wait for us. The lease,
        // checked after the mark, says whether one can exist: a revocation since makes this extension fail.
        if (run.data.overlap === 'cancel-previous') await this.#confirmLease(lease, controller, validity);
        state.handlerStarted = true;
      };
      const { maxRuntimeMs } = run.data;
      if (maxRuntimeMs !== null)
        runtimeTimer = setTimeout(
          () =>
            abortOnce(controller, new RunAbortedError('timeout', `timed out after ${maxRuntimeMs} ms (maxRuntime)`)),
          maxRuntimeMs,
        );
      const { data, jobId, attempt } = run;
      let details: RunDetails;
      try {
        details = await runHandler(
          schedule,
          {
            schedule: data.schedule,
            tickMs: data.tickMs,
            fence: lease.fence,
            jobId,
            attempt,
            payload: data.payload,
            signal: controller.signal,
            lease: validity,
            logger: log,
            started,
          },
          {
            guard: this.#options.guard,
            launcher: this.#options.launcher,
            limits: this.#options.outputLimits,
            secretsDir: this.#options.secretsDir,
            httpDestinations: this.#options.httpDestinations,
          },
        );
      } catch (error) {
        if (state.handlerStarted && !controller.signal.aborted)
          await this.#markFinished(run, lease, log, {
            outcome: 'failed',
            error: error instanceof Error ? error.message : String(error),
          });
        throw error;
      }
      if (!controller.signal.aborted) await this.#markFinished(run, lease, log, { outcome: 'succeeded', details });
      return details;
    } finally {
      clearTimeout(runtimeTimer);
      leaseSignal.removeEventListener('abort', onLeaseLost);
    }
  }

  /**
   * Writes the finished mark, still under the lease, waiting at most FINISHED_MARK_WAIT_MS (the
   * write may still land later); a failure to write it is logged, not the run's failure.
   */
  async #markFinished(
    run: Attempt,
    lease: Lease,
    log: Logger,
    end: Pick<FinishedMark, 'outcome' | 'details' | 'error'>,
  ): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the queue Redis did not answer within ${FINISHED_MARK_WAIT_MS} ms`)),
        FINISHED_MARK_WAIT_MS,
      );
    });
    const write = markFinished(run.job, {
      attemptsMade: run.job.attemptsMade,
      attempt: run.attempt,
      fence: lease.fence,
      ...end,
    });
    try {
      await Promise.race([write, timedOut]);
    } catch (error) {
      write.catch(() => undefined);
      log.warn(
        { err: error },
        'could not mark the run finished in its job (its lease is released all the same): if BullMQ loses its end too, the run is tried again',
      );
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * cancel-previous: the lease is ours (taken from the previous tick's run by this grant's
   * revocation, at `grantedAtMs`), but that run may still be stopping. Waits, holding the lease
   * under the watchdog (a later revocation ends this run too, before its handler), until no
   * started run of the schedule is active in the queue, at most until their revoked leases cannot
   * be valid any more (see predecessorsWaitUntil); and, when the grant revoked a holder the first
   * look did not show (its job vanished), until that holder's lock could have lasted
   * (unseenRevokedUntil).
   */
  async #awaitPredecessors(
    run: Attempt,
    grant: { grantedAtMs: number; revokedMs: number | undefined },
    controller: AbortController,
    log: Logger,
  ): Promise<void> {
    const activePeers = this.#options.activePeers;
    if (!activePeers) return;
    const { data, job, jobId } = run;
    const self = { tickMs: data.tickMs, ...grant, ttlMs: data.lease.ttlMs };
    const onStopping = (): void =>
      abortOnce(controller, new RunAbortedError('shutdown', 'the worker is shutting down'));
    this.#stopping.signal.addEventListener('abort', onStopping, { once: true });
    if (this.#stopping.signal.aborted) onStopping();
    const from = performance.now();
    let waitingFor: readonly string[] | undefined;
    let readFailed = false;
    let unseenUntilMs: number | undefined;
    let looked = false;
    try {
      for (;;) {
        controller.signal.throwIfAborted();
        let untilMs: number | undefined;
        let started: string[] = [];
        try {
          const peers = (await activePeers(job)).filter((peer) => peer.jobId !== jobId);
          if (!looked) {
            unseenUntilMs = unseenRevokedUntil(self, peers, TAKEOVER_SLACK_MS);
            if (unseenUntilMs !== undefined) await this.#noteWaitsUntil(job, unseenUntilMs, log);
          }
          looked = true;
          untilMs = predecessorsWaitUntil(self, peers, TAKEOVER_SLACK_MS);
          const startedPeers = peers.filter((peer) => peer.started);
          started = startedPeers.map((peer) => peer.jobId);
          for (const peer of peersToMarkRevoked(data, peers))
            await this.#options.notePeerRevoked?.(job, peer.jobId, self.grantedAtMs);
        } catch (error) {
          if (!readFailed)
            log.warn(
              { err: error },
              "cannot read the queue's active jobs: waiting for the previous run's lease to be surely over",
            );
          readFailed = true;
          untilMs = self.grantedAtMs + self.ttlMs + TAKEOVER_SLACK_MS;
        }
        controller.signal.throwIfAborted();
        const now = this.#now();
        const unseenOver = unseenUntilMs === undefined || now >= unseenUntilMs;
        if (untilMs === undefined && unseenOver) break;
        if (waitingFor === undefined)
          log.info(
            {
              waitingFor: started,
              untilMs: Math.max(untilMs ?? 0, unseenUntilMs ?? 0),
              ...(unseenUntilMs === undefined ? {} : { revokedUnseenUntilMs: unseenUntilMs }),
            },
            "waiting for the schedule's other runs to stop (cancel-previous)",
          );
        waitingFor = started;
        if (untilMs !== undefined && now >= untilMs && unseenOver) {
          log.warn(
            { stillActive: waitingFor },
            "the schedule's other runs are still active, but their revoked lease cannot be valid any more: starting",
          );
          return;
        }
        await pause(PREDECESSOR_POLL_MS, controller.signal);
      }
    } finally {
      this.#stopping.signal.removeEventListener('abort', onStopping);
    }
    if (waitingFor !== undefined)
      log.info({ waitedMs: Math.round(performance.now() - from) }, "the schedule's other runs have stopped: starting");
  }

  /** A later run that revokes this one while it waits must wait as long (ActivePeer.waitsUntilMs); a failed note is said, not fatal. */
  async #noteWaitsUntil(job: Job, untilMs: number, log: Logger): Promise<void> {
    await this.#options
      .noteWaitsUntil?.(job, untilMs)
      .catch((error: unknown) =>
        log.warn(
          { err: error },
          'could not note on the job how long this run waits for a run no list shows: a run revoking this one before it starts will not wait as long',
        ),
      );
  }

  /**
   * Extends the lease once it can: a majority reporting it taken or gone (a revocation) aborts the
   * run before its handler; no quorum is tried again (100-200 ms apart) while the lease is valid,
   * as the watchdog would, and then aborts it too (deferred: the handler never started).
   */
  async #confirmLease(lease: Lease, controller: AbortController, validity: LeaseValidity): Promise<void> {
    for (;;) {
      controller.signal.throwIfAborted();
      try {
        // The lease as the watchdog keeps it: after a wait longer than its TTL the grant's own validity has ended.
        const { redlock } = this.#options;
        const current = { ...lease, validUntil: redlock.settings.clock.now() + validity.msLeft() };
        await redlock.extend(current, lease.ttlMs, { nodeTimeoutMs: leaseNodeTimeoutMs(lease.ttlMs) });
        return;
      } catch (error) {
        const waitMs = START_RETRY_MS + Math.random() * START_RETRY_MS;
        if (error instanceof LeaseLostError || validity.msLeft() <= waitMs + LEASE_CHECK_MARGIN_MS) {
          abortOnce(
            controller,
            new RunAbortedError('lease-lost', `lease lost: ${(error as Error).message}`, { cause: error }),
          );
          controller.signal.throwIfAborted();
        }
        await pause(waitMs, controller.signal);
      }
    }
  }

  /** Records an aborted attempt; returns the error that fails it (retried unless the lease was lost). */
  #abortFailure(run: Attempt, log: Logger, aborted: RunAbortedError): Error {
    const record = (outcome: RunOutcome, message: string, fields: Record<string, unknown> = {}): void =>
      this.#record(outcome, run.data, run.job, log, run.started, { reason: aborted.message, ...fields }, message);
    switch (aborted.kind) {
      case 'lease-lost':
        if (run.data.overlap === 'cancel-previous' && revoked(aborted)) {
          record(
            'superseded',
            'run superseded: a later tick of the schedule took its lease (cancel-previous); not retried',
          );
          return new UnrecoverableError(`superseded: ${aborted.message}`);
        }
        record('aborted-lease-lost', 'run aborted: lease lost; not retried (another holder may be running)');
        return new UnrecoverableError(aborted.message);
      case 'timeout':
        record('aborted-timeout', 'run aborted: max runtime reached; retried if attempts remain');
        return new Error(aborted.message);
      case 'shutdown':
        record('aborted-shutdown', 'run aborted: the worker is shutting down; retried if attempts remain');
        return new Error(`aborted: ${aborted.message}`);
      case 'cancelled':
        record('failed', 'run aborted (cancelled); retried if attempts remain', { abort: aborted.kind });
        return new Error(`aborted: ${aborted.message}`);
    }
  }

  /** Records a handler's failure; returns it as the error that fails the attempt. */
  #handlerFailure(run: Attempt, log: Logger, failure: unknown): Error {
    const error = failure instanceof Error ? failure : new Error(String(failure));
    const handlerDetails = 'details' in error && typeof error.details === 'object' ? (error.details as RunDetails) : {};
    this.#record(
      'failed',
      run.data,
      run.job,
      log,
      run.started,
      { ...handlerDetails, err: error },
      'run failed; retried if attempts remain',
    );
    return error;
  }

  /** Records a run that does not start, with its outcome, and returns that outcome (the job completes). */
  #notRun(
    run: Attempt,
    outcome: Exclude<RunResult['outcome'], 'succeeded'>,
    fields: Record<string, unknown>,
    message: string,
  ): RunResult {
    this.#record(outcome, run.data, run.job, run.log, run.started, fields, message);
    return { outcome };
  }

  #record(
    outcome: RunOutcome,
    data: TickJobData | undefined,
    job: Job,
    log: Logger,
    started: number,
    fields: Record<string, unknown>,
    message: string,
  ): void {
    const durationMs = Math.round(performance.now() - started);
    this.#options.metrics?.recordRun(outcome, durationMs, data?.schedule);
    this.#options.onOutcome?.(outcome, data, job);
    if (data && outcome !== 'deferred') this.#remember(outcome, data, job, log, fields, durationMs);
    const record = { ...fields, outcome, durationMs };
    if (
      outcome === 'succeeded' ||
      outcome === 'skipped-overlap' ||
      outcome === 'skipped-paused' ||
      outcome === 'superseded'
    )
      log.info(record, message);
    else if (outcome === 'failed' || outcome === 'aborted-lease-lost' || outcome === 'worker-lost')
      log.error(record, message);
    else log.warn(record, message);
  }

  /** Adds an attempt's end to its schedule's run history, as its log line has it; a failed write is logged, never fails the run. */
  #remember(
    outcome: RunOutcome,
    data: TickJobData,
    job: Job,
    log: Logger,
    fields: Record<string, unknown>,
    durationMs: number,
  ): void {
    const history = this.#options.history?.();
    if (!history) return;
    const bound = log.bindings();
    const number = (value: unknown): number | undefined => (typeof value === 'number' ? value : undefined);
    const cause = fields['err'] ?? fields['error'] ?? fields['reason'];
    const endedAtMs = this.#now();
    const record: RunRecord = {
      tickMs: data.tickMs,
      jobId: job.id ?? '',
      outcome,
      attempt: number(bound['attempt']),
      worker: this.#options.workerId,
      fence: number(fields['fence']) ?? number(bound['fence']),
      startedAtMs: endedAtMs - durationMs,
      endedAtMs,
      exitCode: number(fields['exitCode']),
      status: number(fields['status']),
      error: cause instanceof Error ? cause.message : typeof cause === 'string' ? cause : undefined,
    };
    const { history: retention } = this.#options.schedule(data.schedule) ?? {
      history: { keep: DEFAULT_HISTORY.keep, maxAgeMs: DEFAULT_HISTORY.maxAge },
    };
    history
      .append(data.schedule, record, retention)
      .catch((error: unknown) => log.warn({ err: error }, 'could not write the run history'));
  }
}
