import { MAX_TICK_WINDOW_MS } from '@tickwarden/config';
import { LATE_TICK_WINDOW_MS } from '@tickwarden/contracts';
import type { Schedule } from './schedule.ts';

export { LATE_TICK_WINDOW_MS };

/**
 * A tick no replica decided this long after it was taken up (and not before its due time) is
 * recovered: its winner died or stalled between claim and enqueue, or no quorum was there.
 * The winner needs milliseconds; a recovery racing a slow winner is harmless (claim and publish
 * marker keep one job), so this is short.
 */
export const RECOVERY_DELAY_MS = 1000;

/** Added to what a tick's state must cover: clock differences between replicas, and the lease a publisher may still hold. */
const RETENTION_MARGIN_MS = 60_000;

/** When each part of the system may still act on a tick. */
export interface TickWindow {
  /** How late after its due time the tick's run may start (the job's `startDeadlineMs`). */
  startDeadlineMs: number;
  /**
   * How long the tick's claim (lock nodes) and publish marker (queue Redis) are kept: every
   * replica that may contest, recover or catch up the tick must find them. Nothing publishes a
   * tick after its deadline (checked right before the add, under a valid lease), and catch-up
   * reaches back `catchUp` at most.
   */
  retentionMs: number;
}

/**
 * A tick's window: `startDeadline` as configured, else the later of the next tick's due time
 * and `leaseTtl` plus the late window (a per-second tick still starts when a fault delayed it a
 * few seconds), at most MAX_TICK_WINDOW_MS (also for a pattern with no next tick).
 */
export function tickWindow(
  schedule: Pick<Schedule, 'startDeadlineMs' | 'leaseTtlMs' | 'catchUpMs'>,
  dueMs: number,
  nextDueMs: number | undefined,
): TickWindow {
  const untilNext = nextDueMs === undefined ? MAX_TICK_WINDOW_MS : nextDueMs - dueMs;
  const startDeadlineMs =
    schedule.startDeadlineMs ??
    Math.min(MAX_TICK_WINDOW_MS, Math.max(untilNext, schedule.leaseTtlMs + LATE_TICK_WINDOW_MS));
  const retentionMs = Math.max(schedule.catchUpMs, startDeadlineMs) + schedule.leaseTtlMs + RETENTION_MARGIN_MS;
  return { startDeadlineMs, retentionMs };
}

/**
 * How long from `nowMs` a tick's claim or publish marker must be kept: its retention counts from
 * its due time, so a tick contested or enqueued ahead adds the time left until it is due.
 */
export function retentionFrom(tick: { dueMs: number; retentionMs: number }, nowMs: number): number {
  return tick.retentionMs + Math.max(0, tick.dueMs - nowMs);
}
