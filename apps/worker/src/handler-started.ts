import type { Job } from 'bullmq';

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

/** Sets the mark, unless an earlier attempt did: it must be written before the handler starts. */
export async function markHandlerStarted(job: Job, attempt: number, fence: number): Promise<void> {
  if (handlerStarted(job)) return;
  await job.updateProgress({ handlerStarted: true, attempt, fence } satisfies HandlerStartedMark);
}

/** Whether a handler started for this job in an earlier attempt (as read when this attempt began). */
export function handlerStarted(job: Pick<Job, 'progress'>): boolean {
  const { progress } = job;
  return typeof progress === 'object' && progress !== null && (progress as Partial<HandlerStartedMark>).handlerStarted === true;
}
