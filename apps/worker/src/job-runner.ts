import type { ScheduleConfig } from '@tickwarden/config';
import { parseTickJob, type TickJobData } from '@tickwarden/contracts';
import { AcquireAbortedError, LockTakenError, type Lease, type Redlock } from '@tickwarden/redlock';
import { UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { CommandGuard } from './command-guard.ts';
import { handlerStarted, markHandlerStarted } from './handler-started.ts';
import { runHandler } from './handlers/index.ts';
import type { OutputLimits } from './handlers/output.ts';
import type { LeaseValidity, RunDetails } from './handlers/types.ts';
import { LeaseValidityTracker } from './lease-validity-tracker.ts';
import type { RunOutcome, WorkerMetrics } from './metrics.ts';

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

/** What a job attempt returns to BullMQ (the job's return value) when it does not fail. */
export interface RunResult {
  outcome: Extract<RunOutcome, 'succeeded' | 'skipped-overlap' | 'missed-deadline'>;
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
  /** The worker's command guard (started): command runs start only while it runs. */
  guard: CommandGuard;
  metrics?: WorkerMetrics | undefined;
  /** Told about every attempt's outcome (tests, metrics). */
  onOutcome?: ((outcome: RunOutcome, data: TickJobData | undefined, job: Job) => void) | undefined;
  /** Caps on logged handler output (default 1,000 lines of at most 4 KiB per run). */
  outputLimits?: OutputLimits | undefined;
  /** Wall clock, ms (default `Date.now`): for the start deadline. */
  now?: (() => number) | undefined;
}

/** A later start waits for the previous attempt's lease at most its TTL plus this, ms. */
export const TAKEOVER_SLACK_MS = 1000;

/** One attempt of one tick's job, as the runner follows it. */
interface Attempt {
  job: Job;
  data: TickJobData;
  jobId: string;
  attempt: number;
  /** The first processor call of the job: the scheduler's lease is ours to take over by value (or to release). */
  firstStart: boolean;
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
}

const abortOnce = (controller: AbortController, reason: RunAbortedError): void => {
  if (!controller.signal.aborted) controller.abort(reason);
};

/**
 * Runs tick jobs: takes the schedule's lease over from the scheduler (first
 * start) or waits for the previous attempt's lease to lapse (later starts),
 * then runs the handler under the lease watchdog. `processJob` is BullMQ's
 * processor; `abortAll` stops every run (worker shutdown past its grace).
 */
export class JobRunner {
  readonly #options: JobRunnerOptions;
  readonly #validities: LeaseValidityTracker;
  readonly #active = new Set<AbortController>();
  readonly #shutdown = new AbortController();

  constructor(options: JobRunnerOptions) {
    this.#options = options;
    this.#validities = new LeaseValidityTracker(options.redlock);
  }

  /** Runs holding a lease now. */
  get activeRuns(): number {
    return this.#active.size;
  }

  /** Aborts every run (its handler's signal fires with a `shutdown` RunAbortedError) and every lease wait; no new run starts. */
  abortAll(): void {
    const reason = new RunAbortedError('shutdown', 'the worker is shutting down');
    if (!this.#shutdown.signal.aborted) this.#shutdown.abort(reason);
    for (const controller of this.#active) abortOnce(controller, reason);
  }

  /** BullMQ's processor: three parameters, so BullMQ passes its AbortSignal (job cancellation). */
  async processJob(job: Job, _token: string | undefined, signal: AbortSignal | undefined): Promise<RunResult> {
    const run = this.#begin(job);
    const lateMs = this.#lateMs(run);
    if (lateMs !== undefined) return this.#missDeadline(run, lateMs);
    const schedule = await this.#scheduleOf(run);
    const lease = await this.#takeLease(run);
    if (!lease) return { outcome: 'skipped-overlap' };
    return this.#runUnderLease(run, schedule, lease, signal);
  }

  #begin(job: Job): Attempt {
    const started = performance.now();
    const jobId = job.id ?? '(no id)';
    const attempt = Math.max(1, job.attemptsStarted);
    let data: TickJobData;
    try {
      data = parseTickJob(job.data);
    } catch (error) {
      this.#record('failed', undefined, job, this.#options.logger.child({ jobId, attempt }), started, { err: error }, 'invalid tick job data: not retried');
      throw new UnrecoverableError(`invalid tick job data: ${(error as Error).message}`);
    }
    const tick = new Date(data.tickMs).toISOString();
    const log = this.#options.logger.child({ schedule: data.schedule, tick, jobId, attempt });
    return { job, data, jobId, attempt, firstStart: job.attemptsStarted <= 1 && job.stalledCounter === 0, log, started };
  }

  /**
   * How late past its start deadline the attempt starts, or undefined if it may
   * start. The deadline holds until a handler has started for the tick, on a
   * first start, a retry or a stalled re-run alike; after that, later attempts
   * continue a run that started in time.
   */
  #lateMs({ data, job }: Attempt): number | undefined {
    if (data.startDeadlineMs === null || handlerStarted(job)) return undefined;
    const lateMs = (this.#options.now ?? Date.now)() - data.dueMs;
    return lateMs > data.startDeadlineMs ? lateMs : undefined;
  }

  async #missDeadline(run: Attempt, lateMs: number): Promise<RunResult> {
    const { data } = run;
    // Only a first start surely holds the scheduler's lease; on a later start a stalled, maybe alive, first attempt may hold that value.
    if (run.firstStart) await this.#options.redlock.release(data.lease);
    this.#record('missed-deadline', data, run.job, run.log, run.started, { fence: data.lease.fence, lateMs, startDeadlineMs: data.startDeadlineMs, firstStart: run.firstStart }, 'run missed its start deadline: not run');
    return { outcome: 'missed-deadline' };
  }

  async #scheduleOf(run: Attempt): Promise<ScheduleConfig> {
    const { data } = run;
    const schedule = this.#options.schedule(data.schedule);
    if (schedule) return schedule;
    if (run.firstStart) await this.#options.redlock.release(data.lease);
    this.#record('failed', data, run.job, run.log, run.started, { fence: data.lease.fence }, 'schedule not in this worker\'s configuration: not retried');
    throw new UnrecoverableError(`schedule "${data.schedule}" is not in this worker's configuration`);
  }

  /** The attempt's lease; undefined when another run holds it (recorded as skipped). Throws, recorded, when it cannot be taken. */
  async #takeLease(run: Attempt): Promise<Lease | undefined> {
    const { data, job, log, started } = run;
    try {
      return run.firstStart ? await this.#options.redlock.acquire(data.lease.resource, data.lease.ttlMs, { value: data.lease.value, retryCount: 0 }) : await this.#acquireAfterPrevious(data);
    } catch (error) {
      if (error instanceof LockTakenError) {
        this.#record('skipped-overlap', data, job, log, started, { fence: data.lease.fence, takenOn: error.takenOn }, 'another run holds the schedule\'s lease: skipped');
        return undefined;
      }
      if (error instanceof AcquireAbortedError) {
        const why = new Error('aborted: the worker is shutting down: the run did not start', { cause: error });
        this.#record('aborted-shutdown', data, job, log, started, { fence: data.lease.fence, reason: why.message }, 'the worker is shutting down while the run waited for its lease: not started; retried if attempts remain');
        throw why;
      }
      this.#record('failed', data, job, log, started, { fence: data.lease.fence, err: error }, 'could not take the lease: the job is retried if attempts remain');
      throw error;
    }
  }

  /**
   * A retry or a stalled re-run: the previous attempt may still hold the lease
   * (a stalled worker may even be alive), so never take it over by value. A
   * fresh value, retried for the lease TTL plus a second: it is granted only
   * once the previous lease has lapsed or was released.
   */
  #acquireAfterPrevious(data: TickJobData): Promise<Lease> {
    const ttlMs = data.lease.ttlMs;
    const retryDelayMs = Math.min(250, Math.max(50, Math.round(ttlMs / 10)));
    const retryCount = Math.ceil((ttlMs + TAKEOVER_SLACK_MS) / retryDelayMs);
    return this.#options.redlock.acquire(data.lease.resource, ttlMs, { retryCount, retryDelayMs, retryJitterMs: Math.round(retryDelayMs / 2), signal: this.#shutdown.signal });
  }

  async #runUnderLease(run: Attempt, schedule: ScheduleConfig, lease: Lease, signal: AbortSignal | undefined): Promise<RunResult> {
    const log = run.log.child({ fence: lease.fence });
    const controller = new AbortController();
    const onCancel = (): void => abortOnce(controller, new RunAbortedError('cancelled', `the job was cancelled: ${String(signal?.reason)}`));
    signal?.addEventListener('abort', onCancel, { once: true });
    if (this.#shutdown.signal.aborted) abortOnce(controller, this.#shutdown.signal.reason as RunAbortedError);
    this.#active.add(controller);
    this.#options.metrics?.activeRuns.inc();
    log.info({ firstStart: run.firstStart, leaseTtlMs: lease.ttlMs, handler: schedule.handler.kind }, 'run started');
    log.debug({ payload: run.data.payload }, 'run payload');
    let details: RunDetails | undefined;
    let failure: unknown;
    try {
      details = await this.#validities.follow(lease, (validity) =>
        this.#options.redlock.hold(lease, (leaseSignal) => this.#handle(run, schedule, { lease, controller, leaseSignal, validity, log })),
      );
    } catch (error) {
      failure = error;
    } finally {
      signal?.removeEventListener('abort', onCancel);
      this.#active.delete(controller);
      this.#options.metrics?.activeRuns.dec();
    }
    // An abort decides the outcome even if the handler then ended well: its work may have raced another holder.
    if (controller.signal.aborted) throw this.#abortFailure(run, log, controller.signal.reason as RunAbortedError);
    if (failure !== undefined) throw this.#handlerFailure(run, log, failure);
    this.#record('succeeded', run.data, run.job, log, run.started, { ...details }, 'run succeeded');
    return { outcome: 'succeeded', fence: lease.fence, details: details ?? {} };
  }

  /** The routine under the watchdog: aborts on lease loss or `maxRuntime`, marks the job, runs the handler. */
  async #handle(run: Attempt, schedule: ScheduleConfig, held: Held): Promise<RunDetails> {
    const { lease, controller, leaseSignal, validity, log } = held;
    const onLeaseLost = (): void => {
      const cause = leaseSignal.reason as Error;
      abortOnce(controller, new RunAbortedError('lease-lost', `lease lost: ${cause.message}`, { cause }));
    };
    leaseSignal.addEventListener('abort', onLeaseLost, { once: true });
    let runtimeTimer: NodeJS.Timeout | undefined;
    try {
      // Before the handler: a later start that finds no mark knows no handler ran, so the start deadline still holds.
      await markHandlerStarted(run.job, run.attempt, lease.fence);
      controller.signal.throwIfAborted();
      const { maxRuntimeMs } = run.data;
      if (maxRuntimeMs !== null) runtimeTimer = setTimeout(() => abortOnce(controller, new RunAbortedError('timeout', `timed out after ${maxRuntimeMs} ms (maxRuntime)`)), maxRuntimeMs);
      const { data, jobId, attempt } = run;
      return await runHandler(
        schedule,
        { schedule: data.schedule, tickMs: data.tickMs, fence: lease.fence, jobId, attempt, payload: data.payload, signal: controller.signal, lease: validity, logger: log },
        { guard: this.#options.guard, limits: this.#options.outputLimits },
      );
    } finally {
      clearTimeout(runtimeTimer);
      leaseSignal.removeEventListener('abort', onLeaseLost);
    }
  }

  /** Records an aborted attempt; returns the error that fails it (retried unless the lease was lost). */
  #abortFailure(run: Attempt, log: Logger, aborted: RunAbortedError): Error {
    const record = (outcome: RunOutcome, message: string, fields: Record<string, unknown> = {}): void =>
      this.#record(outcome, run.data, run.job, log, run.started, { reason: aborted.message, ...fields }, message);
    switch (aborted.kind) {
      case 'lease-lost':
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
    this.#record('failed', run.data, run.job, log, run.started, { ...handlerDetails, err: error }, 'run failed; retried if attempts remain');
    return error;
  }

  #record(outcome: RunOutcome, data: TickJobData | undefined, job: Job, log: Logger, started: number, fields: Record<string, unknown>, message: string): void {
    const durationMs = Math.round(performance.now() - started);
    this.#options.metrics?.recordRun(outcome, durationMs);
    this.#options.onOutcome?.(outcome, data, job);
    const record = { ...fields, outcome, durationMs };
    if (outcome === 'succeeded' || outcome === 'skipped-overlap') log.info(record, message);
    else if (outcome === 'failed' || outcome === 'aborted-lease-lost') log.error(record, message);
    else log.warn(record, message);
  }
}
