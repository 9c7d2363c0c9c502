import { describe, expect, it } from 'vitest';
import { lostAttemptsOf, lostFinish, lostStart, type RunProgress } from '../src/index.ts';

/** A job as a processor call reads it: its progress and BullMQ's count of ended attempts. */
const job = (progress: RunProgress | number, attemptsMade: number) => ({ progress, attemptsMade });
const started = { handlerStarted: true, attempt: 1, fence: 7, attemptsMade: 0 } as const;

describe('what a processor call learns from the progress an earlier one left', () => {
  it('a start whose end nobody recorded: BullMQ counted no end since the mark, and no finished mark is there', () => {
    expect(lostStart(job(started, 0))).toEqual(started);
    // BullMQ recorded that attempt's end (a failure): this is a retry, which runs.
    expect(lostStart(job(started, 1))).toBeUndefined();
    // The handler's end is in the job: the call records it instead (finished-earlier).
    const finished = { ...started, finished: { attemptsMade: 0, attempt: 1, fence: 7, outcome: 'succeeded' as const } };
    expect(lostFinish(job(finished, 0))).toEqual(finished.finished);
    expect(lostStart(job(finished, 0))).toBeUndefined();
  });

  it('nothing is lost when no handler started (a deferral, a worker that died waiting for the lease), or from a mark of an older worker without attemptsMade', () => {
    expect(lostStart(job(0, 0))).toBeUndefined();
    expect(lostStart(job({ deferrals: 2, lastDeferral: { reason: 'no quorum', atMs: 1 } }, 0))).toBeUndefined();
    expect(lostStart(job({ handlerStarted: true, attempt: 1, fence: 7 }, 0))).toBeUndefined();
  });

  it('counts the attempts recorded worker-lost (0 when none, or when a late writer erased the count)', () => {
    expect(lostAttemptsOf(job({ ...started, lostAttempts: 2 }, 2))).toBe(2);
    expect(lostAttemptsOf(job(started, 0))).toBe(0);
    expect(lostAttemptsOf(job(5, 0))).toBe(0);
  });
});
