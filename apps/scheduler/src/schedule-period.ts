import { yieldToLoop } from '@tickwarden/runtime';
import { CronCache } from './tick-planner.ts';

/** How far ahead the longest interval between ticks is looked for: 8 days, so a weekday pattern shows its weekend. */
export const PERIOD_HORIZON_MS = 8 * 24 * 3_600_000;
/** At least this many intervals are looked at however far they reach (monthly and yearly patterns). */
const MIN_INTERVALS = 3;
/**
 * Ticks closer than a third of this are not walked one by one: the walk jumps ahead by it and
 * measures the interval that spans the jump exactly. An interval longer than the step is always
 * found; a pattern whose intervals are all shorter and uneven may read up to this much short.
 */
const STEP_MS = 3_600_000;
/** A bound on croner calls per pattern (a dense pattern takes about 600). */
const MAX_CALLS = 2_000;
/** How long a computed period is kept before it is computed again from the then current time. */
export const PERIOD_MAX_AGE_MS = 24 * 3_600_000;
/** Time slice of the background computation, ms: the tick loop waits at most this long for it. */
const SLICE_MS = 5;
/** Schedules `retainOnly` looks at per turn of the event loop. */
const RETAIN_SLICE = 5_000;

/** A schedule's ticks as epoch milliseconds. */
export interface TickCalendar {
  /** The first tick strictly after `afterMs`. */
  next(afterMs: number): number | undefined;
  /** The latest tick strictly before `beforeMs`. */
  previous(beforeMs: number): number | undefined;
}

/**
 * The longest interval between two consecutive ticks from `fromMs` on, over `horizonMs` (and at
 * least 3 intervals), in ms; undefined for a pattern with fewer than two ticks left.
 */
export function longestTickIntervalMs(
  calendar: TickCalendar,
  fromMs: number,
  horizonMs = PERIOD_HORIZON_MS,
): number | undefined {
  const walk = tickIntervalWalk(calendar, fromMs, horizonMs);
  let step = walk.next();
  while (!step.done) step = walk.next();
  return step.value;
}

/**
 * `longestTickIntervalMs` one calendar call at a time: it yields after each call and returns the
 * period, so that a caller can spread one pattern's walk (up to MAX_CALLS calls) over time slices.
 */
export function* tickIntervalWalk(
  calendar: TickCalendar,
  fromMs: number,
  horizonMs = PERIOD_HORIZON_MS,
): Generator<void, number | undefined> {
  let calls = 1;
  let tick = calendar.next(fromMs);
  let longest: number | undefined;
  let intervals = 0;
  const measured = (ms: number): void => {
    longest = Math.max(longest ?? 0, ms);
    intervals++;
  };
  while (tick !== undefined && (tick < fromMs + horizonMs || intervals < MIN_INTERVALS) && calls < MAX_CALLS) {
    yield;
    const next = calendar.next(tick);
    calls++;
    if (next === undefined) break;
    measured(next - tick);
    if (next - tick >= STEP_MS / 3) {
      tick = next;
      continue;
    }
    // Dense: skip to the first tick at or after one step on, and measure the interval that spans that point.
    const probe = tick + STEP_MS;
    yield;
    const after = calendar.next(probe - 1);
    yield;
    const before = calendar.previous(probe);
    calls += 2;
    if (after !== undefined && before !== undefined) measured(after - before);
    tick = after;
  }
  return longest;
}

interface Period {
  /** undefined: the pattern has fewer than two ticks left. */
  ms: number | undefined;
  computedAtMs: number;
}

/**
 * Each (pattern, time zone)'s period (see `longestTickIntervalMs`), computed in the background in
 * short slices (croner takes 40-100 µs a call: thousands of patterns must not hold up the tick
 * loop), kept a day, and shared by the schedules that use it.
 */
export class SchedulePeriods {
  readonly #periods = new Map<string, Period>();
  readonly #waiting = new Map<string, { cron: string; timezone: string }>();
  readonly #now: () => number;
  #running: Promise<void> | undefined;
  /** The pattern whose walk is under way: a dense one takes hundreds of croner calls, spread over slices. */
  #walking: Walking | undefined;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** The period of a pattern in ms: undefined while not computed yet (it is queued) or when the pattern has fewer than two ticks left. */
  get(cron: string, timezone: string): number | undefined {
    const key = periodKey(cron, timezone);
    const period = this.#periods.get(key);
    if (period === undefined || this.#now() - period.computedAtMs > PERIOD_MAX_AGE_MS) this.#queue(key, cron, timezone);
    return period?.ms;
  }

  /**
   * Drops the periods of patterns none of `schedules` uses, and queues the new ones. Each distinct
   * pattern is looked at once (100,000 schedules share a few patterns, and their strings), and
   * RETAIN_SLICE schedules per turn of the event loop.
   */
  async retainOnly(schedules: Iterable<{ cron: string; timezone: string }>): Promise<void> {
    const used = new Set<string>();
    const seen = new Map<string, Set<string>>();
    let looked = 0;
    for (const { cron, timezone } of schedules) {
      if (++looked % RETAIN_SLICE === 0) await yieldToLoop();
      let zones = seen.get(cron);
      if (zones === undefined) seen.set(cron, (zones = new Set()));
      if (zones.has(timezone)) continue;
      zones.add(timezone);
      used.add(periodKey(cron, timezone));
      this.get(cron, timezone);
    }
    for (const key of this.#periods.keys()) if (!used.has(key)) this.#periods.delete(key);
    for (const key of this.#waiting.keys()) if (!used.has(key)) this.#waiting.delete(key);
    if (this.#walking && !used.has(this.#walking.key)) this.#walking = undefined;
  }

  /** Resolves once nothing is waiting to be computed (tests). */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  #queue(key: string, cron: string, timezone: string): void {
    if (this.#walking?.key === key) return;
    this.#waiting.set(key, { cron, timezone });
    this.#start();
  }

  #start(): void {
    if (this.#running) return;
    this.#running = this.#run().finally(() => {
      this.#running = undefined;
      // Queued after the run's last look: start again.
      if (this.#waiting.size > 0) this.#start();
    });
  }

  async #run(): Promise<void> {
    while (this.#walking || this.#waiting.size > 0) {
      await new Promise((resolve) => setImmediate(resolve));
      const sliceEnd = performance.now() + SLICE_MS;
      while (performance.now() < sliceEnd) {
        const walking = (this.#walking ??= this.#nextWalk());
        if (walking === undefined || !this.#walk(walking, sliceEnd)) break;
      }
    }
  }

  /** Starts the walk of the next waiting pattern. */
  #nextWalk(): Walking | undefined {
    const next = this.#waiting.entries().next();
    if (next.done) return undefined;
    const [key, { cron, timezone }] = next.value;
    this.#waiting.delete(key);
    const computedAtMs = this.#now();
    let walk: Walking['walk'] | undefined;
    try {
      const { cron: parsed } = new CronCache().get(cron, timezone);
      walk = tickIntervalWalk(
        {
          next: (afterMs) => parsed.nextRun(new Date(afterMs))?.getTime(),
          previous: (beforeMs) => parsed.previousRuns(1, new Date(beforeMs))[0]?.getTime(),
        },
        computedAtMs,
      );
    } catch {
      // A pattern croner refuses never reaches the scheduler (the config is validated): no period.
    }
    return { key, computedAtMs, walk };
  }

  /** Walks until the slice ends (false) or the period is known (true: kept, the next pattern may start). */
  #walk(walking: Walking, sliceEnd: number): boolean {
    let ms: number | undefined;
    try {
      let step = walking.walk?.next();
      while (step && !step.done && performance.now() < sliceEnd) step = walking.walk?.next();
      if (step && !step.done) return false;
      ms = step?.value;
    } catch {
      // As in #nextWalk: no period.
    }
    this.#periods.set(walking.key, { ms, computedAtMs: walking.computedAtMs });
    this.#walking = undefined;
    return true;
  }
}

interface Walking {
  key: string;
  computedAtMs: number;
  /** undefined: croner refused the pattern. */
  walk: Generator<void, number | undefined> | undefined;
}

const periodKey = (cron: string, timezone: string): string => `${timezone} ${cron}`;
