import type { Job } from 'bullmq';
import type { RunDetails } from './handlers/types.ts';

/**
 * What a job's BullMQ `progress` holds once a handler started for it. BullMQ
 * counts processor calls (`attemptsStarted`), ended attempts (`attemptsMade`)
 * and stalls (`stalledCounter`), but a processor call may have died before its
 * handler (waiting for the lease, say): only this mark tells the two apart.
 */
export interface HandlerStartedMark {
  handlerStarted: true;
  /** The attempt whose handler started first. */
  attempt: number;
  fence: number;
}

/** The last time a worker put the job back because it could not take the lease. */
export interface LastDeferral {
  /** Why (the lease error's message). */
  reason: string;
  /** Wall clock, ms. */
  atMs: number;
  /** The worker that deferred it. */
  worker?: string | undefined;
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

/** The job's progress as the worker writes it: the deferrals, then the handler mark once a handler started, then the finished mark. */
export type RunProgress = Partial<DeferralMarks> & Partial<HandlerStartedMark> & { finished?: FinishedMark };

function progressObject(job: Pick<Job, 'progress'>): RunProgress {
  const { progress } = job;
  return typeof progress === 'object' && progress !== null && !Array.isArray(progress) ? (progress as RunProgress) : {};
}

/** The deferral fields of the job's progress, only when it was deferred (so an undeferred job's progress stays the bare mark). */
function deferralFields(job: Pick<Job, 'progress'>): Partial<DeferralMarks> {
  const { deferrals, lastDeferral } = progressObject(job);
  return typeof deferrals === 'number' && deferrals > 0 ? { deferrals, ...(lastDeferral ? { lastDeferral } : {}) } : {};
}

/** Sets the mark, unless an earlier attempt did: it must be written before the handler starts. Keeps the deferral fields. */
export async function markHandlerStarted(job: Job, attempt: number, fence: number): Promise<void> {
  if (handlerStarted(job)) return;
  await job.updateProgress({ ...deferralFields(job), handlerStarted: true, attempt, fence } satisfies RunProgress);
}

/** Drops, from the job as read here, the handler mark this attempt wrote (its `fence`) when its handler never started after all; markDeferred then writes the progress without it. */
export function unmarkHandlerStarted(job: Pick<Job, 'progress'>, fence: number): void {
  if (progressObject(job).fence === fence) job.progress = deferralFields(job);
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

/** How often the job was deferred, and the last deferral (as read when this attempt began). */
export function deferralsOf(job: Pick<Job, 'progress'>): { deferrals: number; lastDeferral: LastDeferral | undefined } {
  const { deferrals, lastDeferral } = progressObject(job);
  return { deferrals: typeof deferrals === 'number' && deferrals > 0 ? deferrals : 0, lastDeferral: typeof lastDeferral?.reason === 'string' ? lastDeferral : undefined };
}

/** Counts one more deferral in the job's progress (any handler mark is kept); returns the new count. */
export async function markDeferred(job: Job, deferral: LastDeferral): Promise<number> {
  const deferrals = deferralsOf(job).deferrals + 1;
  await job.updateProgress({ ...progressObject(job), deferrals, lastDeferral: deferral } satisfies RunProgress);
  return deferrals;
}
