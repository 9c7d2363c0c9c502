import { DEFAULT_HISTORY, type HistoryRetention } from '@tickwarden/config';
import type { Logger } from 'pino';
import type { MissReason, TickObservation, TickOutcome } from './outcomes.ts';
import type { HistoryEntry, ReplicaStore, Tick, TickRecord } from './ports.ts';
import type { Schedule } from './schedule.ts';

/** An outcome this replica recorded (or tried to: `recorded` false when another record of the tick stands). */
export interface OutcomeEvent {
  outcome: TickOutcome;
  scheduleId: string;
  tickMs: number;
  lagMs: number;
  reason: string | undefined;
  recorded: boolean;
  /** Recorded on another publisher's behalf: the tick's job was found published, its publisher gone before recording it. */
  found: boolean;
}

/** What the recorder tells (metrics, tests). */
export type OutcomeListener = (event: OutcomeEvent) => void;
export type ObservationListener = (observation: TickObservation, scheduleId: string, tickMs: number) => void;

/** A tick as far as recording needs it (a tick of a schedule no longer configured has only its id). */
export type RecordedTick = Pick<Tick, 'tickMs' | 'jobId' | 'retentionMs'> & {
  schedule: Pick<Schedule, 'id'> & Partial<Pick<Schedule, 'history'>>;
};

/** A schedule's history retention; the defaults for one not configured here. */
const retentionOf = (schedule: Partial<Pick<Schedule, 'history'>>): HistoryRetention =>
  schedule.history ?? { keep: DEFAULT_HISTORY.keep, maxAgeMs: DEFAULT_HISTORY.maxAge };

export interface TickRecorderOptions {
  replicaId: string;
  store: Pick<ReplicaStore, 'record'>;
  logger: Logger;
  /** Wall time, ms. */
  now: () => number;
  onOutcome?: OutcomeListener | undefined;
  onObservation?: ObservationListener | undefined;
}

/** An outcome on its way to the history. */
interface Pending {
  entry: HistoryEntry;
  fields: Record<string, unknown>;
  /** A gap's entry stands for these ticks (each counted). */
  ticks?: readonly number[];
  found?: boolean;
}

/**
 * Records tick outcomes: the schedule's history in the replica store (the cluster's record of
 * each tick: the first outcome recorded stands, except that a run enqueued or recovered replaces
 * a skip or a miss), a log line and the listeners. Writes are batched per turn of the event loop,
 * so a boundary of 10,000 ticks is one write. The replica whose entry became the tick's record
 * logs it at info (missed: warn); others at debug, so each tick is logged once for the cluster.
 * If the write fails every outcome is logged at warn: none is silent.
 */
export class TickRecorder {
  readonly #options: TickRecorderOptions;
  #pending: Pending[] = [];
  readonly #writing = new Set<Promise<void>>();

  constructor(options: TickRecorderOptions) {
    this.#options = options;
  }

  /** Records a tick's outcome (`detail`: reason, who published it, as known). */
  outcome(
    outcome: TickRecord['outcome'],
    tick: RecordedTick,
    detail: { reason?: MissReason | string; found?: { by: string | undefined } } = {},
  ): void {
    const lagMs = this.#options.now() - tick.tickMs;
    const replica = detail.found ? (detail.found.by ?? 'unknown') : this.#options.replicaId;
    const record: TickRecord = {
      tickMs: tick.tickMs,
      outcome,
      reason: detail.reason,
      lagMs,
      jobId: tick.jobId,
      replica,
    };
    const fields = {
      schedule: tick.schedule.id,
      tick: new Date(tick.tickMs).toISOString(),
      outcome,
      reason: detail.reason,
      lagMs,
      jobId: tick.jobId,
      ...(detail.found ? { found: true, enqueuedBy: replica } : {}),
    };
    this.#queue({
      entry: { scheduleId: tick.schedule.id, record, keepMs: tick.retentionMs, retention: retentionOf(tick.schedule) },
      fields,
      found: detail.found !== undefined,
    });
  }

  /** Records a gap (ticks missed while no replica ran) as one entry at its last tick; each of `ticks` is counted. */
  gap(
    schedule: Pick<Schedule, 'id' | 'history'>,
    record: TickRecord,
    keepMs: number,
    ticks: readonly number[],
    fields: Record<string, unknown>,
  ): void {
    this.#queue({ entry: { scheduleId: schedule.id, record, keepMs, retention: schedule.history }, fields, ticks });
  }

  /** What this replica saw of a tick it does not decide: debug (warn for failures), and the listener. */
  observe(
    observation: TickObservation,
    tick: Pick<RecordedTick, 'schedule' | 'tickMs'>,
    detail: Record<string, unknown> = {},
  ): void {
    const { logger, onObservation } = this.#options;
    onObservation?.(observation, tick.schedule.id, tick.tickMs);
    const level = observation === 'lost-race' ? 'debug' : 'warn';
    if (!logger.isLevelEnabled(level)) return;
    logger[level](
      { schedule: tick.schedule.id, tick: new Date(tick.tickMs).toISOString(), observation, ...detail },
      `tick ${observation}`,
    );
  }

  #queue(pending: Pending): void {
    if (this.#pending.length === 0) setImmediate(() => this.#drain());
    this.#pending.push(pending);
  }

  /** Writes what is pending now, and waits for every write in flight (the replica stops). */
  async flush(): Promise<void> {
    this.#drain();
    await Promise.all([...this.#writing]);
  }

  #drain(): void {
    const batch = this.#pending;
    this.#pending = [];
    if (batch.length === 0) return;
    const writing = this.#write(batch);
    this.#writing.add(writing);
    void writing.finally(() => this.#writing.delete(writing));
  }

  async #write(batch: Pending[]): Promise<void> {
    const { store, logger, onOutcome } = this.#options;
    let recorded: boolean[] | undefined;
    let failure: unknown;
    try {
      recorded = await store.record(batch.map(({ entry }) => entry));
    } catch (error) {
      failure = error;
    }
    const now = this.#options.now();
    batch.forEach(({ entry, fields, ticks, found = false }, i) => {
      const { outcome, tickMs, reason } = entry.record;
      // An operator's run is counted by no listener; only its record's loss is worth a line (the CLI shows it).
      if (outcome === 'triggered' || outcome === 'backfilled') {
        if (failure !== undefined)
          logger.warn(
            { ...fields, historyError: (failure as Error).message },
            `${outcome} run not recorded in the tick history`,
          );
        return;
      }
      const first = recorded?.[i] ?? true;
      for (const counted of ticks ?? [tickMs])
        onOutcome?.({
          outcome,
          scheduleId: entry.scheduleId,
          tickMs: counted,
          lagMs: now - counted,
          reason,
          recorded: first,
          found,
        });
      const level = !first ? 'debug' : failure !== undefined || outcome === 'missed' ? 'warn' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      const message = entry.record.gap
        ? 'ticks missed while no replica ran'
        : `tick ${outcome}${found ? ', found published' : ''}${first ? '' : ', already recorded by another replica'}`;
      logger[level](failure === undefined ? fields : { ...fields, historyError: (failure as Error).message }, message);
    });
  }
}
