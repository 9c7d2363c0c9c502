import { createHash } from 'node:crypto';
import { Cron } from 'croner';
import type { Schedule } from './schedule.ts';

/**
 * Parsed patterns, shared by every schedule with the same pattern and time
 * zone: a croner `Cron` holds about 80 KB (a year table), so 10,000 schedules
 * would take 800 MB with one each. Entries are few (distinct patterns) and
 * never change meaning, so the cache is never pruned.
 */
const crons = new Map<string, SharedCron>();

/**
 * A parsed pattern and its last answer: schedules sharing a pattern ask for
 * the tick after the same instant one after the other, so one remembered
 * answer saves the rest of them croner's search.
 */
interface SharedCron {
  cron: Cron;
  lastAfterMs: number;
  lastNextMs: number | undefined;
}

function cronFor(pattern: string, timezone: string): SharedCron {
  const key = `${timezone} ${pattern}`;
  let shared = crons.get(key);
  if (!shared) {
    // croner mutates the options object it is given: always a fresh literal. Paused: it never starts a timer.
    shared = { cron: new Cron(pattern, { timezone, paused: true }), lastAfterMs: Number.NaN, lastNextMs: undefined };
    crons.set(key, shared);
  }
  return shared;
}

/** Schedule maths, apart from timers: croner as a pure calculator. Ticks are epoch milliseconds. */
export class TickPlanner {
  readonly schedule: Schedule;
  readonly #cron: SharedCron;

  constructor(schedule: Schedule) {
    this.schedule = schedule;
    this.#cron = cronFor(schedule.cron, schedule.timezone);
  }

  /** The first tick strictly after `afterMs`, or undefined when the pattern has no more. */
  next(afterMs: number): number | undefined {
    const shared = this.#cron;
    if (shared.lastAfterMs !== afterMs) {
      shared.lastNextMs = shared.cron.nextRun(new Date(afterMs))?.getTime();
      shared.lastAfterMs = afterMs;
    }
    return shared.lastNextMs;
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
