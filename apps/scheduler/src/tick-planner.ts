import { createHash } from 'node:crypto';
import { Cron } from 'croner';
import type { Schedule } from './schedule.ts';

/**
 * Parsed patterns, shared by every schedule with the same pattern and time
 * zone: a croner `Cron` holds about 80 KB (a year table), so 10,000 schedules
 * would take 800 MB with one each. Entries are few (distinct patterns) and
 * never change meaning, so the cache is never pruned.
 */
const crons = new Map<string, Cron>();

function cronFor(pattern: string, timezone: string): Cron {
  const key = `${timezone} ${pattern}`;
  let cron = crons.get(key);
  if (!cron) {
    // croner mutates the options object it is given: always a fresh literal. Paused: it never starts a timer.
    cron = new Cron(pattern, { timezone, paused: true });
    crons.set(key, cron);
  }
  return cron;
}

/** Schedule maths, apart from timers: croner as a pure calculator. Ticks are epoch milliseconds. */
export class TickPlanner {
  readonly schedule: Schedule;
  readonly #cron: Cron;

  constructor(schedule: Schedule) {
    this.schedule = schedule;
    this.#cron = cronFor(schedule.cron, schedule.timezone);
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
