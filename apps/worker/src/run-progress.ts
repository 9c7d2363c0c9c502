import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { RunDetails } from './run-context.ts';

/**
 * What a job's BullMQ `progress` holds once a handler started for it. BullMQ
 * counts processor calls (`attemptsStarted`), ended attempts (`attemptsMade`)
 * and stalls (`stalledCounter`), but a processor call may have died before its
 * handler (waiting for the lease, say): only this mark tells the two apart.
 */
export interface HandlerStartedMark {
  handlerStarted: true;
  /** The latest attempt whose handler started, its fence, and BullMQ's `attemptsMade` when it began: a later processor call that finds the same count is a re-run after that attempt's end was lost. */
  attempt: number;
  fence: number;
  attemptsMade: number;
}

/** The last time a worker put the job back because it could not take the lease. */
export interface LastDeferral {
  /** Why (the lease error's message). */
  reason: string;
  /** Wall clock, ms. */
  atMs: number;
  /** The worker that deferred it. */
  worker?: string | undefined;
  /**
   * A node answered `passed`: a run of a later tick of the schedule was granted the lease there,
   * and too few others answered to decide. A tick still deferred so at its start deadline is
   * superseded, not missed.
   */
  passed?: true;
}

/**
 * Deferrals of a job, kept in its `progress` next to (before) the handler-started
 * mark: a deferral puts the job back without consuming an attempt, so BullMQ's
 * counters alone cannot tell a deferred processor call from a stalled one.
 */
export interface DeferralMarks {
  /** Processor calls that put the job back (BullMQ counted each in `attemptsStarted`). */
  deferrals: number;
  lastDeferral: LastDeferral;
}

/**
 * What a job's progress holds once its handler ended, written under the lease
 * before BullMQ records the attempt's end. A worker paused or killed between
 * the two loses the job to BullMQ's stalled check: the re-run finds this mark
 * and records the end it lost instead of running the handler again.
 */
export interface FinishedMark {
  /** BullMQ's `attemptsMade` when the attempt began: a later processor call that finds the same count is a re-run after that end was lost. */
  attemptsMade: number;
  attempt: number;
  fence: number;
  outcome: 'succeeded' | 'failed';
  /** succeeded: the run's details (the job's return value). */
  details?: RunDetails;
  /** failed: the error message. */
  error?: string;
}

/**
 * The job's progress as the worker writes it: the deferrals, then the handler mark once a handler
 * started, then the finished mark; `lostAttempts` counts the attempts recorded `worker-lost` (each
 * counted by BullMQ twice: as a stall, then as the failure that records it).
 */
export type RunProgress = Partial<DeferralMarks> &
  Partial<HandlerStartedMark> & { finished?: FinishedMark; lostAttempts?: number };

function progressObject(job: Pick<Job, 'progress'>): RunProgress {
  const { progress } = job;
  return typeof progress === 'object' && progress !== null && !Array.isArray(progress) ? (progress as RunProgress) : {};
}

/** A job's hash in the queue Redis, as BullMQ names it (`<prefix>:<queue>:<id>`). */
export function jobKey(job: Pick<Job, 'queueQualifiedName'>, jobId: string | undefined): string {
  return `${job.queueQualifiedName}:${jobId}`;
}

/** What came of writing the handler-started mark: written, or why not (see markHandlerStarted). */
export type StartMark = 'marked' | 'lock-lost' | 'job-gone';

/**
 * Sets a job's handler-started mark (its `progress`, as BullMQ's updateProgress writes it) only
 * while the processor call still holds the job's lock.
 * KEYS: 1 the job's hash, 2 its lock. ARGV: 1 the processor call's lock token, 2 the progress (JSON).
 * Returns 1 marked, 0 the job is gone, -1 its lock is another's or gone.
 */
const MARK_STARTED = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
redis.call('HSET', KEYS[1], 'progress', ARGV[2])
return 1`;

/**
 * Sets the mark for this attempt, before its handler starts (the other marks kept), if this
 * processor call (its lock `token`) still holds the job: a worker cut from the queue Redis may
 * send the mark after BullMQ's stalled check handed the job on, and a later attempt that read
 * the job unmarked would run its handler too. `lock-lost`: the job was handed on (the handler
 * must not start here); `job-gone`: the queue Redis lost the job (no later attempt of it can
 * exist). `redis` is a connection to the job's queue Redis.
 */
export async function markHandlerStarted(
  redis: Redis,
  job: Job,
  token: string | undefined,
  mark: Omit<HandlerStartedMark, 'handlerStarted' | 'attemptsMade'>,
): Promise<StartMark> {
  const progress: RunProgress = {
    ...progressObject(job),
    handlerStarted: true,
    ...mark,
    attemptsMade: job.attemptsMade,
  };
  const key = jobKey(job, job.id);
  const reply = await redis.eval(MARK_STARTED, 2, key, `${key}:lock`, token ?? '', JSON.stringify(progress));
  if (reply === 1) job.progress = progress;
  return reply === 1 ? 'marked' : reply === 0 ? 'job-gone' : 'lock-lost';
}

/** Puts back, in the job as read here, the progress the attempt began with, when its handler never started after all; markDeferred then writes it. */
export function unmarkHandlerStarted(job: Pick<Job, 'progress'>, progressAtBegin: Job['progress']): void {
  job.progress = progressAtBegin;
}

/** Whether a handler started for this job in an earlier attempt (as read when this attempt began). */
export function handlerStarted(job: Pick<Job, 'progress'>): boolean {
  return progressObject(job).handlerStarted === true;
}

/** Records the handler's end in the job's progress (the other marks kept). */
export async function markFinished(job: Job, mark: FinishedMark): Promise<void> {
  await job.updateProgress({ ...progressObject(job), finished: mark } satisfies RunProgress);
}

/** The end of this job's current attempt that BullMQ lost (the mark of an attempt it has not counted), or undefined. */
export function lostFinish(job: Pick<Job, 'progress' | 'attemptsMade'>): FinishedMark | undefined {
  const { finished } = progressObject(job);
  return finished?.attemptsMade === job.attemptsMade ? finished : undefined;
}

/**
 * The mark of an attempt whose handler started but whose end nobody recorded (neither BullMQ nor a
 * finished mark): its worker died or paused past the job lock, and the job came back through
 * BullMQ's stalled check. Undefined when the current processor call follows no such start.
 */
export function lostStart(job: Pick<Job, 'progress' | 'attemptsMade'>): HandlerStartedMark | undefined {
  const progress = progressObject(job);
  if (progress.handlerStarted !== true || progress.attemptsMade !== job.attemptsMade || lostFinish(job))
    return undefined;
  return progress as HandlerStartedMark;
}

/** Attempts recorded `worker-lost` so far. */
export function lostAttemptsOf(job: Pick<Job, 'progress'>): number {
  const { lostAttempts } = progressObject(job);
  return typeof lostAttempts === 'number' && lostAttempts > 0 ? lostAttempts : 0;
}

/** Counts one more attempt recorded `worker-lost` (the other marks kept). */
export async function markWorkerLost(job: Job): Promise<void> {
  await job.updateProgress({ ...progressObject(job), lostAttempts: lostAttemptsOf(job) + 1 } satisfies RunProgress);
}

/** How often the job was deferred, and the last deferral (as read when this attempt began). */
export function deferralsOf(job: Pick<Job, 'progress'>): { deferrals: number; lastDeferral: LastDeferral | undefined } {
  const { deferrals, lastDeferral } = progressObject(job);
  return {
    deferrals: typeof deferrals === 'number' && deferrals > 0 ? deferrals : 0,
    lastDeferral: typeof lastDeferral?.reason === 'string' ? lastDeferral : undefined,
  };
}

/** Counts one more deferral in the job's progress (any handler mark is kept); returns the new count. */
export async function markDeferred(job: Job, deferral: LastDeferral): Promise<number> {
  const deferrals = deferralsOf(job).deferrals + 1;
  await job.updateProgress({ ...progressObject(job), deferrals, lastDeferral: deferral } satisfies RunProgress);
  return deferrals;
}
