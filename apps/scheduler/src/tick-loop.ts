import { tickJobId } from '@tickwarden/contracts';
import type { Clock } from '@tickwarden/redlock';
import { yieldToLoop } from '@tickwarden/runtime';
import type { Logger } from 'pino';
import type { Tick } from './ports.ts';
import type { Schedule } from './schedule.ts';
import { TickHeap, type PendingTick } from './tick-heap.ts';
import { CronCache, TickPlanner } from './tick-planner.ts';
import { LATE_TICK_WINDOW_MS, tickWindow } from './tick-window.ts';

/** What one wake-up found: ticks to contest, and ticks popped too late to contest (this replica stalled). */
export interface Wake {
  nowMs: number;
  due: Tick[];
  late: Tick[];
  /** Every tick popped for the first time (contested, late, whatever): the high-water marks. */
  takenUp: Tick[];
  /** Every tick of the schedules planned here due at or before this (wall ms) has been taken up. */
  throughMs: number;
}

/** A schedule change, for the high-water marks. */
export interface ScheduleChange {
  /** Schedules gone from the config. */
  removed: string[];
  /** Added or changed schedules and the first tick this replica takes up. */
  planned: { scheduleId: string; firstTickMs: number }[];
}

/**
 * At most this many ticks are taken up per wake: 100,000 due at one boundary are taken up over
 * many wakes, each a few ms, and the event loop serves timers and replies in between.
 */
export const MAX_TICKS_PER_WAKE = 1_000;
/** Schedules compared or planned per slice of setSchedules: 100,000 take many slices of a few ms. */
export const SCHEDULES_PER_SLICE = 500;

export interface TickLoopOptions {
  clock: Clock;
  logger: Logger;
  /** Longest single timer wait, ms: waits are recomputed, so a wall-clock jump is noticed within it. */
  maxWaitMs: number;
  /** How long before its due time a tick is contested (see `SchedulerOptions.contestLeadMs`). */
  contestLeadMs: number;
  onWake: (wake: Wake) => void;
  /** Another time the loop must wake at (wall ms), if any: the start-up gap check. */
  alarmAtMs?: () => number | undefined;
}

/**
 * Keeps ticks late (more than LATE_TICK_WINDOW_MS) out of the contest: a replica that stalled must
 * not contest ticks the others decided meanwhile; recovery asks first. Except the latest tick
 * inside `catchUp` of a schedule with no fresh tick (the one tick a replica that starts catches up).
 */
export function splitLateTicks(
  popped: readonly PendingTick[],
  nowMs: number,
  catchUpMs: (scheduleId: string) => number | undefined,
): { kept: PendingTick[]; late: PendingTick[] } {
  const kept: PendingTick[] = [];
  const stale = new Map<string, PendingTick[]>();
  for (const tick of popped) {
    if (nowMs - tick.dueMs <= LATE_TICK_WINDOW_MS) kept.push(tick);
    else {
      const ticks = stale.get(tick.scheduleId);
      if (ticks) ticks.push(tick);
      else stale.set(tick.scheduleId, [tick]);
    }
  }
  const fresh = new Set(kept.map((tick) => tick.scheduleId));
  const late: PendingTick[] = [];
  for (const [scheduleId, ticks] of stale) {
    const window = catchUpMs(scheduleId);
    const latest = ticks.at(-1) as PendingTick;
    const caughtUp =
      window !== undefined && !fresh.has(scheduleId) && nowMs - latest.tickMs <= window ? latest : undefined;
    if (caughtUp) kept.push(caughtUp);
    for (const tick of ticks) if (tick !== caughtUp) late.push(tick);
  }
  return { kept, late };
}

/**
 * The tick loop: evaluates every schedule (croner as a calculator, one heap of the next tick of
 * every schedule, one timer on the injected clock) and hands each wake-up's due ticks out. Wall
 * time from the clock, durations from its monotonic side: a stepped wall clock is detected and
 * logged. Knows nothing of leases or queues.
 */
export class TickLoop {
  readonly #options: TickLoopOptions;
  readonly #planners = new Map<string, TickPlanner>();
  readonly #crons = new CronCache();
  readonly #heap = new TickHeap();
  #timer: unknown;
  #running = false;
  /** Stopping: no tick is taken up any more. */
  #stopping = false;
  #lastWake: { wall: number; mono: number } | undefined;
  /** Which setSchedules call is the newest: an older one stops at its next slice. */
  #generation = 0;

  constructor(options: TickLoopOptions) {
    this.#options = options;
  }

  /** Distinct patterns (cron and time zone) parsed for the current schedules. */
  get parsedPatterns(): number {
    return this.#crons.size;
  }

  nowMs(): number {
    return Math.floor(this.#options.clock.wallMicros() / 1000);
  }

  /** The planner of a schedule configured here. */
  planner(scheduleId: string): TickPlanner | undefined {
    return this.#planners.get(scheduleId);
  }

  /** The planners of every schedule configured here. */
  planners(): IterableIterator<TickPlanner> {
    return this.#planners.values();
  }

  /**
   * Replaces the schedules: removed ones stop firing, added or changed ones start at their next
   * tick after the call (or catch up). Works SCHEDULES_PER_SLICE schedules at a time, the event
   * loop free in between, and hands each slice's change to `onChange`: a small config is done
   * before this returns. A newer call takes over from where an older one stopped.
   */
  async setSchedules(
    schedules: readonly Schedule[],
    onChange: (change: ScheduleChange) => void = () => undefined,
  ): Promise<void> {
    const generation = ++this.#generation;
    const now = this.nowMs();
    const incoming = new Map<string, Schedule>();
    const dropped = new Set<string>();
    let planned: ScheduleChange['planned'] = [];
    let done = 0;
    // Awaited only at the end of a slice: a small config is planned before this returns.
    const sliceEnds = (): boolean => ++done % SCHEDULES_PER_SLICE === 0;
    /** At the end of a slice: hands out what was planned, lets the loop run; false once a newer call took over. */
    const yielded = async (): Promise<boolean> => {
      if (planned.length > 0) onChange({ removed: [], planned });
      planned = [];
      if (this.#running) this.arm();
      await yieldToLoop();
      return generation === this.#generation;
    };
    for (const schedule of schedules) {
      incoming.set(schedule.id, schedule);
      if (sliceEnds() && !(await yielded())) return;
    }
    for (const [id, planner] of this.#planners) {
      const next = incoming.get(id);
      // The same object: a file a reload found unchanged. Else as JSON (computed here, not kept: it would outweigh the planners themselves).
      if (!next || (next !== planner.schedule && JSON.stringify(next) !== JSON.stringify(planner.schedule))) {
        this.#planners.delete(id);
        dropped.add(id);
      }
      if (sliceEnds() && !(await yielded())) return;
    }
    this.#heap.removeSchedules(dropped);
    onChange({ removed: [...dropped].filter((id) => !incoming.has(id)), planned: [] });
    for (const schedule of schedules) {
      if (!this.#planners.has(schedule.id)) this.#plan(schedule, now, planned);
      if (sliceEnds() && !(await yielded())) return;
    }
    onChange({ removed: [], planned });
    // Patterns only removed schedules used would stay parsed forever (none when none was dropped).
    if (dropped.size > 0) this.#crons.retainOnly(schedules);
    if (this.#running) this.arm();
  }

  /** Plans a schedule's first tick after `now` (or its catch-up), into the heap and `planned`. */
  #plan(schedule: Schedule, now: number, planned: ScheduleChange['planned']): void {
    const planner = new TickPlanner(schedule, this.#crons);
    this.#planners.set(schedule.id, planner);
    if (this.#stopping) return;
    const first = this.#firstTick(planner, now);
    if (first === undefined) return;
    this.#heap.push(this.#pending(planner, first));
    planned.push({ scheduleId: schedule.id, firstTickMs: first });
  }

  /**
   * The first tick this replica takes up: the latest one inside `catchUp` (a tick missed while
   * no replica ran fires once; its claim and publish marker keep it single), else the first
   * whose run is not yet due.
   */
  #firstTick(planner: TickPlanner, now: number): number | undefined {
    const { catchUpMs } = planner.schedule;
    return (catchUpMs > 0 ? planner.latestWithin(now, catchUpMs) : undefined) ?? planner.firstDue(now);
  }

  /**
   * A tick to contest, `contestLeadMs` ahead of its due time, whatever its overlap policy: a
   * contest only claims the tick, and whether its run may start beside another is its worker's
   * to decide at the due time.
   */
  #pending(planner: TickPlanner, tickMs: number): PendingTick {
    const dueMs = planner.dueMs(tickMs);
    return { scheduleId: planner.schedule.id, tickMs, dueMs, contestAtMs: dueMs - this.#options.contestLeadMs };
  }

  /** The tick `tickMs` of a schedule, with its window (undefined when the schedule is not configured here). */
  tick(scheduleId: string, tickMs: number): Tick | undefined {
    const planner = this.#planners.get(scheduleId);
    return planner ? this.#tick(planner, tickMs, planner.next(tickMs)) : undefined;
  }

  #tick(planner: TickPlanner, tickMs: number, nextTickMs: number | undefined): Tick {
    const { schedule } = planner;
    const dueMs = planner.dueMs(tickMs);
    const nextDueMs = nextTickMs === undefined ? undefined : planner.dueMs(nextTickMs);
    return {
      schedule,
      tickMs,
      dueMs,
      nextDueMs,
      jobId: tickJobId(schedule.id, tickMs),
      ...tickWindow(schedule, dueMs, nextDueMs),
    };
  }

  start(): void {
    this.#running = true;
    this.arm();
  }

  /** Takes no tick up any more. */
  stop(): void {
    this.#stopping = true;
    this.#options.clock.clearTimeout(this.#timer);
  }

  /** Sets the timer for the next tick to contest (or the alarm), at most `maxWaitMs` away. */
  arm(): void {
    const { clock, maxWaitMs, alarmAtMs } = this.#options;
    clock.clearTimeout(this.#timer);
    if (!this.#running || this.#stopping) return;
    const alarm = alarmAtMs?.();
    const next = Math.min(this.#heap.peek()?.contestAtMs ?? Infinity, alarm ?? Infinity);
    const wait = Number.isFinite(next) ? Math.min(Math.max(next - this.nowMs(), 0), maxWaitMs) : maxWaitMs;
    this.#timer = clock.setTimeout(() => this.#wake(), wait);
  }

  #wake(): void {
    const now = this.nowMs();
    this.#noticeJump(now);
    const popped: PendingTick[] = [];
    const takenUp: Tick[] = [];
    const built = new Map<PendingTick, Tick>();
    for (
      let top = this.#heap.peek();
      top && top.contestAtMs <= now && popped.length < MAX_TICKS_PER_WAKE;
      top = this.#heap.peek()
    ) {
      const pending = this.#heap.pop() as PendingTick;
      const planner = this.#planners.get(pending.scheduleId);
      if (!planner) continue;
      popped.push(pending);
      const next = planner.next(pending.tickMs);
      const tick = this.#tick(planner, pending.tickMs, next);
      built.set(pending, tick);
      takenUp.push(tick);
      if (next !== undefined) this.#heap.push(this.#pending(planner, next));
    }
    const { kept, late } = splitLateTicks(popped, now, (id) => this.#planners.get(id)?.schedule.catchUpMs);
    const tickOf = (pending: PendingTick): Tick => built.get(pending) as Tick;
    // Not past the lead: a schedule added after this wake plans its ticks from then on.
    const throughMs = Math.min((this.#heap.peek()?.dueMs ?? Infinity) - 1, now + this.#options.contestLeadMs);
    this.#options.onWake({ nowMs: now, due: kept.map(tickOf), late: late.map(tickOf), takenUp, throughMs });
    this.arm();
  }

  /**
   * Wall time against monotonic time between wake-ups: a host clock stepped (NTP step, VM resume)
   * shows as a jump. Ticks are planned on wall time, one after the other: after a backward step
   * the next tick simply comes later (nothing fires twice); after a forward step the ticks
   * skipped are late, and recovery decides each one.
   */
  #noticeJump(wall: number): void {
    const mono = this.#options.clock.now();
    if (this.#lastWake) {
      const jumpMs = wall - this.#lastWake.wall - (mono - this.#lastWake.mono);
      if (Math.abs(jumpMs) > 1000)
        this.#options.logger.warn(
          { jumpMs: Math.round(jumpMs) },
          'wall clock jumped: ticks are planned on wall time; skipped ticks are recovered or recorded missed, none fires twice',
        );
    }
    this.#lastWake = { wall, mono };
  }
}
