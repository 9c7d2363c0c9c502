import { yieldToLoop } from '@tickwarden/runtime';
import type { ReplicaStore } from './ports.ts';

/** Ticks of a schedule that no replica took up: after `afterMs` (its mark), before `beforeMs` (this replica's first tick). */
export interface MarkGap {
  scheduleId: string;
  afterMs: number;
  beforeMs: number;
}

/**
 * Where the start-up gap check stands: `waiting` until it is due, `claiming`
 * while its write is in flight, `done` after. Until it is done this replica
 * writes no marks, or its own would hide the gap.
 */
type GapCheck = 'waiting' | 'claiming' | 'done';

/** After a failed gap check, the next try comes this much later, ms (the queue Redis may be down). */
export const GAP_CHECK_RETRY_MS = 1000;

/** Schedules the gap check goes through per turn of the event loop: all of a big config at once would hold up the ticks. */
const SCHEDULES_PER_SLICE = 2_000;

/**
 * Each schedule's high-water mark: the latest tick any replica has taken up
 * (every tick a replica pops, whatever its outcome), kept in the queue Redis
 * so that a replica starting after all of them were down finds the ticks in
 * between. Writes are batched: one call per wake-up for every schedule due.
 *
 * At start a replica waits (`start`'s delay) for the live replicas, if any, to
 * mark the ticks before its own first ones, then raises every schedule's mark
 * to just before its first tick in one atomic call that returns the marks from
 * before: ticks between such a mark and the first tick were taken up by
 * nobody. Only one replica gets the old mark back, so a gap is counted once
 * however many replicas start together.
 */
export class TickMarks {
  readonly #store: Pick<ReplicaStore, 'raiseMarks' | 'forgetMarks' | 'marks'>;
  /** The highest tick taken up per schedule since the last write. */
  #pending = new Map<string, number>();
  /** The highest tick this replica took up per schedule: written again if the queue Redis loses the marks (see restore). */
  readonly #latest = new Map<string, number>();
  /** This replica's first tick per schedule, for the gap check. */
  #firstTicks = new Map<string, number>();
  #gapCheck: GapCheck = 'waiting';
  #gapCheckAtMs = Number.POSITIVE_INFINITY;
  /** The marks as this replica found them at start (see found), until its gap check ran. */
  #found = new Map<string, number>();
  /** The queue Redis lost its data before the gap check: the marks found are written back first. */
  #writeBack = false;

  constructor(store: Pick<ReplicaStore, 'raiseMarks' | 'forgetMarks' | 'marks'>) {
    this.#store = store;
  }

  /** The replica runs: the gap check is due `delayMs` after `nowMs`. */
  start(nowMs: number, delayMs: number): void {
    this.#gapCheckAtMs = nowMs + delayMs;
  }

  /** When the gap check is due, or undefined once it is not waiting. */
  get gapCheckAtMs(): number | undefined {
    return this.#gapCheck === 'waiting' ? this.#gapCheckAtMs : undefined;
  }

  /** A schedule's first tick on this replica. Only schedules planned before the gap check ran are checked (a schedule added later by a reload has no gap). */
  planned(scheduleId: string, firstTickMs: number): void {
    if (this.#gapCheck !== 'done') this.#firstTicks.set(scheduleId, firstTickMs);
  }

  /** A tick this replica popped (contested, skipped or missed: it was decided). */
  takenUp(scheduleId: string, tickMs: number): void {
    this.#pending.set(scheduleId, Math.max(this.#pending.get(scheduleId) ?? tickMs, tickMs));
    this.#latest.set(scheduleId, Math.max(this.#latest.get(scheduleId) ?? tickMs, tickMs));
  }

  /**
   * Reads the marks as they stand, before the gap check: if the queue Redis loses its data in
   * between (every replica restarted, then an empty restart), they are written back, and the gap
   * check still finds the ticks that nobody took up. Resolves them (none once the check ran).
   */
  async find(): Promise<ReadonlyMap<string, number>> {
    if (this.#gapCheck !== 'waiting') return new Map();
    const found = await this.#store.marks();
    if (this.#gapCheck === 'waiting') this.#found = found;
    return found;
  }

  /** The queue Redis lost its data: the next flush writes every mark this replica knows again (those it found, before its gap check). */
  restore(): void {
    for (const [scheduleId, tickMs] of this.#latest) this.takenUp(scheduleId, tickMs);
    if (this.#gapCheck !== 'done' && this.#found.size > 0) this.#writeBack = true;
  }

  /** Schedules gone from the config: their marks are dropped, so one added again later does not find an old gap. */
  async forget(scheduleIds: readonly string[]): Promise<void> {
    for (const id of scheduleIds) {
      this.#pending.delete(id);
      this.#latest.delete(id);
      this.#firstTicks.delete(id);
    }
    await this.#store.forgetMarks(scheduleIds);
  }

  /**
   * Writes the pending marks, and once the gap check is due (or `final`, when
   * the replica stops) claims the gaps before this replica's first ticks.
   * Resolves the gaps this replica must record. On failure the marks and the
   * gap check stay pending for the next call.
   */
  async flush(nowMs: number, final = false): Promise<MarkGap[]> {
    // Raised to what they were (never lowered): its own marks would hide the gap, these do not.
    if (this.#writeBack && this.#gapCheck === 'waiting') {
      await this.#store.raiseMarks(this.#found);
      this.#writeBack = false;
    }
    const claim = this.#gapCheck === 'waiting' && (final || nowMs >= this.#gapCheckAtMs);
    if (this.#gapCheck !== 'done' && !claim) return [];
    // Claiming from here on: the check yields to the event loop, and a flush meanwhile must not start another.
    if (claim) this.#gapCheck = 'claiming';
    const pending = this.#pending;
    this.#pending = new Map();
    const marks = new Map(pending);
    const firstTicks = claim ? this.#firstTicks : new Map<string, number>();
    // Everything before a first tick is decided now: taken up by another replica, or missed.
    let done = 0;
    for (const [id, first] of firstTicks) {
      marks.set(id, Math.max(marks.get(id) ?? first - 1, first - 1));
      this.#latest.set(id, Math.max(this.#latest.get(id) ?? first - 1, first - 1));
      if (++done % SCHEDULES_PER_SLICE === 0) await yieldToLoop();
    }
    let previous: Map<string, number | undefined>;
    try {
      previous = await this.#store.raiseMarks(marks);
    } catch (error) {
      for (const [id, tickMs] of pending) this.takenUp(id, tickMs);
      if (claim) {
        this.#gapCheck = 'waiting';
        this.#gapCheckAtMs = nowMs + GAP_CHECK_RETRY_MS;
      }
      throw error;
    }
    if (!claim) return [];
    this.#gapCheck = 'done';
    this.#firstTicks = new Map();
    this.#found = new Map();
    const gaps: MarkGap[] = [];
    for (const [scheduleId, beforeMs] of firstTicks) {
      const afterMs = previous.get(scheduleId);
      if (afterMs !== undefined && afterMs < beforeMs - 1) gaps.push({ scheduleId, afterMs, beforeMs });
      if (++done % SCHEDULES_PER_SLICE === 0) await yieldToLoop();
    }
    return gaps;
  }
}
