import { yieldToLoop } from '@tickwarden/runtime';
import type { Logger } from 'pino';
import type { ProgressMarks, ReplicaStore } from './ports.ts';

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

/** The lock nodes' resource holding the replicas' progress (see TickMarks). */
export const PROGRESS_RESOURCE = 'scheduler-progress';
/** A replica writes its progress at most this often, ms: one call per lock node. */
export const PROGRESS_INTERVAL_MS = 1000;
/** The progress is kept this long after it last rose, ms: a restart of every replica after a longer outage, with a queue Redis that lost its data meanwhile, finds no gap. */
const PROGRESS_KEEP_MS = 7 * 86_400_000;

/** What a replica found at start (see TickMarks.find). */
export interface FoundMarks {
  marks: ReadonlyMap<string, number>;
  /** Set when the queue Redis lost its data since the replicas last wrote their progress: every tick due at or before it had been taken up. */
  lostThroughMs: number | undefined;
}

export interface TickMarksOptions {
  store: Pick<ReplicaStore, 'raiseMarks' | 'forgetMarks' | 'marks'>;
  /** The lock nodes, which keep the replicas' progress. */
  progress: ProgressMarks;
  logger: Logger;
}

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
 *
 * The marks live in the queue Redis, which may lose its data while no replica runs (a restart of
 * every replica, then an empty queue Redis): then nothing there says which ticks were taken up.
 * So each replica also writes its progress on the lock nodes, about once a second: the time
 * through which it has taken up every tick, tagged with the queue Redis's data epoch it saw. A
 * replica that finds the queue Redis of another epoch than the progress takes every schedule's
 * mark from the progress instead.
 */
export class TickMarks {
  readonly #store: TickMarksOptions['store'];
  readonly #progress: ProgressMarks;
  readonly #logger: Logger;
  /** How far this replica has taken up ticks (see Wake.throughMs), and how far it wrote that on the lock nodes, and when. */
  #throughMs = Number.NEGATIVE_INFINITY;
  #writtenThroughMs = Number.NEGATIVE_INFINITY;
  #progressAtMs = Number.NEGATIVE_INFINITY;
  /** The last progress write failed (logged once until one works again). */
  #progressFailing = false;
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

  constructor(options: TickMarksOptions) {
    this.#store = options.store;
    this.#progress = options.progress;
    this.#logger = options.logger;
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
   * check still finds the ticks that nobody took up. Resolves them (none once the check ran), and
   * the replicas' progress if the queue Redis lost its data before this read (see recover).
   */
  async find(): Promise<FoundMarks> {
    if (this.#gapCheck !== 'waiting') return { marks: new Map(), lostThroughMs: undefined };
    const [{ marks, epoch }, progress] = await Promise.all([
      this.#store.marks(),
      this.#progress.readMark(PROGRESS_RESOURCE).catch((error: unknown) => {
        this.#logger.warn(
          { err: error },
          "could not read the replicas' progress on the lock nodes: if the queue Redis lost its data while no replica ran, ticks taken up then are not found",
        );
        return undefined;
      }),
    ]);
    if (this.#gapCheck === 'waiting') this.#found = marks;
    const lost = progress !== undefined && progress.tag !== epoch;
    if (lost)
      this.#logger.warn(
        { progressEpoch: progress.tag, epoch, throughTick: new Date(progress.value).toISOString() },
        "the queue Redis lost its data while no replica ran: the replicas' progress on the lock nodes stands in for its marks",
      );
    return { marks, lostThroughMs: lost ? progress.value : undefined };
  }

  /**
   * Marks the queue Redis lost, taken from the replicas' progress: merged (the higher) into those
   * found, and written back before the gap check. Resolves the merged marks.
   */
  recover(fromProgress: ReadonlyMap<string, number>): ReadonlyMap<string, number> {
    const merged = this.#gapCheck === 'waiting' ? this.#found : new Map<string, number>();
    for (const [id, tickMs] of fromProgress) merged.set(id, Math.max(merged.get(id) ?? tickMs, tickMs));
    if (this.#gapCheck === 'waiting') this.#writeBack = true;
    return merged;
  }

  /** Every tick due at or before `throughMs` has been taken up here (Wake.throughMs). */
  progressed(throughMs: number): void {
    this.#throughMs = Math.max(this.#throughMs, throughMs);
  }

  /**
   * Writes this replica's progress on the lock nodes, tagged with the queue Redis's data `epoch`
   * it last read: at most every PROGRESS_INTERVAL_MS (or `final`), once its gap check ran (before
   * it, its own progress would hide the gap). Undefined when no write is due (most wake-ups: no
   * promise on the tick path). A failure is logged once until a write works; it never rejects.
   */
  writeProgress(nowMs: number, epoch: string | undefined, final = false): Promise<void> | undefined {
    if (this.#gapCheck !== 'done' || epoch === undefined || this.#throughMs <= this.#writtenThroughMs) return undefined;
    if (!final && nowMs < this.#progressAtMs + PROGRESS_INTERVAL_MS) return undefined;
    this.#progressAtMs = nowMs;
    return this.#raiseProgress(epoch);
  }

  async #raiseProgress(epoch: string): Promise<void> {
    const throughMs = this.#throughMs;
    const held = await this.#progress
      .raiseMark(PROGRESS_RESOURCE, { value: throughMs, tag: epoch }, PROGRESS_KEEP_MS)
      .catch(() => false);
    if (held) this.#writtenThroughMs = throughMs;
    if (held === !this.#progressFailing) return;
    this.#progressFailing = !held;
    if (held) this.#logger.info('progress written on the lock nodes again');
    else
      this.#logger.warn(
        "could not write this replica's progress on a quorum of the lock nodes: if the queue Redis lost its data and every replica restarted, ticks taken up since are not found",
      );
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
