import type { ScheduleConfig } from '@tickwarden/config';
import { parseTickJob, type TickJobData } from '@tickwarden/contracts';
import { AcquireAbortedError, LockTakenError, type Lease, type Redlock } from '@tickwarden/redlock';
import { UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { runHandler } from './handlers/index.ts';
import type { OutputLimits } from './handlers/output.ts';
import type { RunDetails } from './handlers/types.ts';
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

/**
 * Runs tick jobs: takes the schedule's lease over from the scheduler (first
 * start) or waits for the previous attempt's lease to lapse (later starts),
 * then runs the handler under the lease watchdog. `processJob` is BullMQ's
 * processor; `abortAll` stops every run (worker shutdown past its grace).
 */
export class JobRunner {
  readonly #options: JobRunnerOptions;
  readonly #active = new Set<AbortController>();
  readonly #shutdown = new AbortController();

  constructor(options: JobRunnerOptions) {
    this.#options = options;
  }

  /** Runs holding a lease now. */
  get activeRuns(): number {
    return this.#active.size;
  }

  /** Aborts every run (its handler's signal fires with a `shutdown` RunAbortedError) and every lease wait; no new run starts. */
  abortAll(): void {
    const reason = new RunAbortedError('shutdown', 'the worker is shutting down');
    if (!this.#shutdown.signal.aborted) this.#shutdown.abort(reason);
    for (const controller of this.#active) controller.abort(reason);
  }

  /** BullMQ's processor: three parameters, so BullMQ passes its AbortSignal (job cancellation). */
  async processJob(job: Job, _token: string | undefined, signal: AbortSignal | undefined): Promise<RunResult> {
    const { logger, redlock } = this.#options;
    const started = performance.now();
    const jobId = job.id ?? '(no id)';
    const attempt = Math.max(1, job.attemptsStarted);
    let data: TickJobData;
    try {
      data = parseTickJob(job.data);
    } catch (error) {
      this.#record('failed', undefined, job, logger.child({ jobId, attempt }), started, { err: error }, 'invalid tick job data: not retried');
      throw new UnrecoverableError(`invalid tick job data: ${(error as Error).message}`);
    }
    const tick = new Date(data.tickMs).toISOString();
    const firstStart = job.attemptsStarted <= 1 && job.stalledCounter === 0;
    const jobLog = logger.child({ schedule: data.schedule, tick, jobId, attempt });
    const scheduledLease = data.lease;

    const now = (this.#options.now ?? Date.now)();
    if (firstStart && data.startDeadlineMs !== null && now - data.dueMs > data.startDeadlineMs) {
      await redlock.release(scheduledLease);
      this.#record('missed-deadline', data, job, jobLog, started, { fence: data.lease.fence, lateMs: now - data.dueMs, startDeadlineMs: data.startDeadlineMs }, 'run missed its start deadline: not run');
      return { outcome: 'missed-deadline' };
    }
    const schedule = this.#options.schedule(data.schedule);
    if (!schedule) {
      if (firstStart) await redlock.release(scheduledLease);
      this.#record('failed', data, job, jobLog, started, { fence: data.lease.fence }, 'schedule not in this worker\'s configuration: not retried');
      throw new UnrecoverableError(`schedule "${data.schedule}" is not in this worker's configuration`);
    }

    let lease: Lease;
    try {
      lease = firstStart ? await redlock.acquire(data.lease.resource, data.lease.ttlMs, { value: data.lease.value, retryCount: 0 }) : await this.#acquireAfterPrevious(data);
    } catch (error) {
      if (error instanceof LockTakenError) {
        this.#record('skipped-overlap', data, job, jobLog, started, { fence: data.lease.fence, takenOn: error.takenOn }, 'another run holds the schedule\'s lease: skipped');
        return { outcome: 'skipped-overlap' };
      }
      const why = error instanceof AcquireAbortedError ? new Error('the worker is shutting down: the run did not start', { cause: error }) : (error as Error);
      this.#record('failed', data, job, jobLog, started, { fence: data.lease.fence, err: why }, 'could not take the lease: the job is retried if attempts remain');
      throw why;
    }

    const runLog = jobLog.child({ fence: lease.fence });
    const controller = new AbortController();
    const abort = (reason: RunAbortedError): void => {
      if (!controller.signal.aborted) controller.abort(reason);
    };
    const onCancel = (): void => abort(new RunAbortedError('cancelled', `the job was cancelled: ${String(signal?.reason)}`));
    signal?.addEventListener('abort', onCancel, { once: true });
    if (this.#shutdown.signal.aborted) abort(this.#shutdown.signal.reason as RunAbortedError);
    this.#active.add(controller);
    this.#options.metrics?.activeRuns.inc();
    let runtimeTimer: NodeJS.Timeout | undefined;
    let details: RunDetails | undefined;
    let failure: unknown;
    runLog.info({ firstStart, leaseTtlMs: lease.ttlMs, handler: schedule.handler.kind }, 'run started');
    runLog.debug({ payload: data.payload }, 'run payload');
    try {
      details = await redlock.hold(lease, (leaseSignal) => {
        const onLeaseLost = (): void => {
          const cause = leaseSignal.reason as Error;
          abort(new RunAbortedError('lease-lost', `lease lost: ${cause.message}`, { cause }));
        };
        leaseSignal.addEventListener('abort', onLeaseLost, { once: true });
        if (data.maxRuntimeMs !== null) {
          const maxRuntimeMs = data.maxRuntimeMs;
          runtimeTimer = setTimeout(() => abort(new RunAbortedError('timeout', `timed out after ${maxRuntimeMs} ms (maxRuntime)`)), maxRuntimeMs);
        }
        return runHandler(
          schedule,
          { schedule: data.schedule, tickMs: data.tickMs, fence: lease.fence, jobId, attempt, payload: data.payload, signal: controller.signal, logger: runLog },
          this.#options.outputLimits,
        ).finally(() => leaseSignal.removeEventListener('abort', onLeaseLost));
      });
    } catch (error) {
      failure = error;
    } finally {
      clearTimeout(runtimeTimer);
      signal?.removeEventListener('abort', onCancel);
      this.#active.delete(controller);
      this.#options.metrics?.activeRuns.dec();
    }

    // An abort decides the outcome even if the handler then ended well: its work may have raced another holder.
    const aborted = controller.signal.aborted ? (controller.signal.reason as RunAbortedError) : undefined;
    if (aborted?.kind === 'lease-lost') {
      this.#record('aborted-lease-lost', data, job, runLog, started, { reason: aborted.message }, 'run aborted: lease lost; not retried (another holder may be running)');
      throw new UnrecoverableError(aborted.message);
    }
    if (aborted?.kind === 'timeout') {
      this.#record('aborted-timeout', data, job, runLog, started, { reason: aborted.message }, 'run aborted: max runtime reached; retried if attempts remain');
      throw new Error(aborted.message);
    }
    if (aborted) {
      this.#record('failed', data, job, runLog, started, { reason: aborted.message, abort: aborted.kind }, `run aborted (${aborted.kind}); retried if attempts remain`);
      throw new Error(`aborted: ${aborted.message}`);
    }
    if (failure !== undefined) {
      const error = failure instanceof Error ? failure : new Error(String(failure));
      const handlerDetails = 'details' in error && typeof error.details === 'object' ? (error.details as RunDetails) : {};
      this.#record('failed', data, job, runLog, started, { ...handlerDetails, err: error }, 'run failed; retried if attempts remain');
      throw error;
    }
    this.#record('succeeded', data, job, runLog, started, { ...details }, 'run succeeded');
    return { outcome: 'succeeded', fence: lease.fence, details: details ?? {} };
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
