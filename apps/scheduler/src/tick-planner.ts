import { createHash } from 'node:crypto';
import { Cron } from 'croner';
import type { Schedule } from './schedule.ts';

/**
 * A parsed pattern and its last answers: schedules sharing a pattern ask for
 * the tick after (and before) the same instant one after the other, so one
 * remembered answer each way saves the rest of them croner's search (its
 * backward search is the slower one).
 */
export interface SharedCron {
  cron: Cron;
  lastAfterMs: number;
  lastNextMs: number | undefined;
  lastBeforeMs: number;
  lastPreviousMs: number | undefined;
}

/** The part of croner 11's internal pattern that holds the year table. */
interface CronPatternInternals {
  starYear?: unknown;
  year?: unknown;
}

/**
 * croner 11 gives every `Cron` its own table of the years 0-9999 (80 KB),
 * which a pattern without a year field (every 5- or 6-field pattern) fills
 * with ones and never reads (each read checks `starYear` first). One frozen
 * table for all of them takes 10,000 distinct patterns from 800 MB to about
 * 30 MB. Frozen, so a croner that wrote to it would throw instead of changing
 * every pattern at once.
 */
const EVERY_YEAR: readonly number[] = Object.freeze(new Array<number>(10_000).fill(1));

/** Points the pattern's year table at the shared one when it is the every-year table (else leaves it: a croner upgrade costs memory, not correctness). */
function shareYearTable(cron: Cron): void {
  const pattern = (cron as unknown as { _states?: { pattern?: CronPatternInternals } })._states?.pattern;
  const year = pattern?.year;
  if (
    pattern?.starYear !== true ||
    !Array.isArray(year) ||
    year.length !== EVERY_YEAR.length ||
    !year.every((value) => value === 1)
  )
    return;
  pattern.year = EVERY_YEAR;
}

/** Whether a `Cron` uses the shared year table (tests watch that it still does after a croner upgrade). */
export function sharesYearTable(cron: Cron): boolean {
  return (cron as unknown as { _states?: { pattern?: CronPatternInternals } })._states?.pattern?.year === EVERY_YEAR;
}

/**
 * Parsed patterns, one per pattern and time zone, shared by the schedules
 * that use it. A scheduler prunes it after each reload, so patterns no
 * schedule uses any more do not pile up.
 */
export class CronCache {
  /** By pattern, then time zone: no key string built per lookup (100,000 schedules share a few patterns). */
  readonly #crons = new Map<string, Map<string, SharedCron>>();

  get size(): number {
    let size = 0;
    for (const zones of this.#crons.values()) size += zones.size;
    return size;
  }

  get(pattern: string, timezone: string): SharedCron {
    let zones = this.#crons.get(pattern);
    if (zones === undefined) this.#crons.set(pattern, (zones = new Map()));
    let shared = zones.get(timezone);
    if (!shared) {
      // croner mutates the options object it is given: always a fresh literal. Paused: it never starts a timer.
      const cron = new Cron(pattern, { timezone, paused: true });
      shareYearTable(cron);
      shared = {
        cron,
        lastAfterMs: Number.NaN,
        lastNextMs: undefined,
        lastBeforeMs: Number.NaN,
        lastPreviousMs: undefined,
      };
      zones.set(timezone, shared);
    }
    return shared;
  }

  /** Drops the patterns none of `schedules` uses. */
  retainOnly(schedules: Iterable<Pick<Schedule, 'cron' | 'timezone'>>): void {
    const used = new Map<string, Set<string>>();
    for (const { cron, timezone } of schedules) {
      const zones = used.get(cron);
      if (zones === undefined) used.set(cron, new Set([timezone]));
      else zones.add(timezone);
    }
    for (const [pattern, zones] of this.#crons) {
      for (const timezone of zones.keys()) if (!used.get(pattern)?.has(timezone)) zones.delete(timezone);
      if (zones.size === 0) this.#crons.delete(pattern);
    }
  }
}

/** Schedule maths, apart from timers: croner as a pure calculator. Ticks are epoch milliseconds. */
export class TickPlanner {
  readonly schedule: Schedule;
  readonly #cron: SharedCron;

  /** `crons` shares parsed patterns between planners (default: a cache of this planner's own). */
  constructor(schedule: Schedule, crons: CronCache = new CronCache()) {
    this.schedule = schedule;
    this.#cron = crons.get(schedule.cron, schedule.timezone);
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

  /**
   * The first tick whose run is not due before `atMs`. With jitter, the tick just past may still
   * be due; no earlier one can, as a run is never due after the next tick (see `dueMs`).
   */
  firstDue(atMs: number): number | undefined {
    const last = this.schedule.jitterMs > 0 ? this.previous(atMs) : undefined;
    return last !== undefined && this.dueMs(last) >= atMs ? last : this.next(atMs - 1);
  }

  /** The ticks strictly between `afterMs` and `beforeMs`, oldest first, at most `limit` of them. */
  ticksBetween(afterMs: number, beforeMs: number, limit: number): number[] {
    const ticks: number[] = [];
    for (
      let tick = this.next(afterMs);
      tick !== undefined && tick < beforeMs && ticks.length < limit;
      tick = this.next(tick)
    )
      ticks.push(tick);
    return ticks;
  }

  /** The latest tick strictly before `beforeMs`, or undefined. */
  previous(beforeMs: number): number | undefined {
    const shared = this.#cron;
    if (shared.lastBeforeMs !== beforeMs) {
      shared.lastPreviousMs = shared.cron.previousRuns(1, new Date(beforeMs))[0]?.getTime();
      shared.lastBeforeMs = beforeMs;
    }
    return shared.lastPreviousMs;
  }

  /** The latest tick at or before `atMs` within `windowMs`, or undefined. */
  latestWithin(atMs: number, windowMs: number): number | undefined {
    const latest = this.previous(atMs + 1);
    return latest !== undefined && latest >= atMs - windowMs ? latest : undefined;
  }

  /** The latest tick due at or before `atMs` (a tick is due after it by its jitter, never past the next tick). */
  lastDueBy(atMs: number): number | undefined {
    const tickMs = this.previous(atMs + 1);
    return tickMs === undefined || this.dueMs(tickMs) <= atMs ? tickMs : this.previous(tickMs);
  }

  /**
   * When a tick's run is due: the tick plus a jitter that every replica computes alike (a hash of
   * schedule and tick), at most `jitterMs` and never past the next tick, so runs stay in tick
   * order and the tick due at any instant is found without walking the ticks before it.
   */
  dueMs(tickMs: number): number {
    const { jitterMs, id } = this.schedule;
    if (jitterMs <= 0) return tickMs;
    const nextMs = this.next(tickMs);
    const maxMs = nextMs === undefined ? jitterMs : Math.min(jitterMs, nextMs - tickMs);
    const hash = createHash('sha1').update(`${id}@${tickMs}`).digest();
    return tickMs + (hash.readUInt32BE(0) % (maxMs + 1));
  }
}
