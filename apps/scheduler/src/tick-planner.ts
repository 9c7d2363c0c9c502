import { createHash } from 'node:crypto';
import { Cron } from 'croner';
import type { Schedule } from './schedule.ts';

/**
 * Schedule maths, apart from timers: croner as a pure calculator (created
 * paused, it never starts a timer). Ticks are epoch milliseconds.
 */
export class TickPlanner {
  readonly schedule: Schedule;
  readonly #cron: Cron;

  constructor(schedule: Schedule) {
    this.schedule = schedule;
    // croner mutates the options object it is given: always a fresh literal.
    this.#cron = new Cron(schedule.cron, { timezone: schedule.timezone, paused: true });
  }

  /** The first tick strictly after `afterMs`, or undefined when the pattern has no more. */
  next(afterMs: number): number | undefined {
    return this.#cron.nextRun(new Date(afterMs))?.getTime();
  }

  /** The latest tick at or before `atMs` within `windowMs`, or undefined. */
  latestWithin(atMs: number, windowMs: number): number | undefined {
    let latest: number | undefined;
    for (let tick = this.next(atMs - windowMs - 1); tick !== undefined && tick <= atMs; tick = this.next(tick)) latest = tick;
    return latest;
  }

  /** When a tick's run is due: the tick plus a jitter that every replica computes alike (a hash of schedule and tick). */
  dueMs(tickMs: number): number {
    const { jitterMs, id } = this.schedule;
    if (jitterMs <= 0) return tickMs;
    const hash = createHash('sha1').update(`${id}@${tickMs}`).digest();
    return tickMs + (hash.readUInt32BE(0) % (jitterMs + 1));
  }
}
