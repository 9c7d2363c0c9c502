import { NOT_RUN_OUTCOMES } from '@tickwarden/contracts';
import type { HistoryRetention } from '@tickwarden/config';
import type { RunRecord } from '@tickwarden/runtime';
import type { TickRecord } from './ports.ts';

/** Ticks a backfill's range may hold unless told more (`--max`), and the most it may be told. */
export const DEFAULT_BACKFILL_MAX = 100;
export const BACKFILL_MAX_LIMIT = 10_000;

/** What a backfill does with one tick of its range, and why. */
export interface BackfillTick {
  tickMs: number;
  action: 'fire' | 'skip';
  why: string;
  /** Fired though its job was published: every start of it ended without running, and may hold its claim. */
  publishedNotRun?: true;
}

/**
 * Tick outcomes after which the tick did not run: no job was published for it. `skipped-overlap`:
 * a replica of an earlier version decided overlaps itself, and its records stay in the history.
 */
const NOT_PUBLISHED: ReadonlySet<string> = new Set(['skipped-paused', 'skipped-overlap', 'missed']);

/**
 * The earliest tick the schedule's history still answers for: older records may have been trimmed
 * (beyond `keep` entries, or `maxAge`), so there no record does not mean no outcome.
 */
export function historyReachMs(records: readonly TickRecord[], retention: HistoryRetention, nowMs: number): number {
  const byAge = nowMs - retention.maxAgeMs;
  if (records.length < retention.keep) return byAge;
  let oldest = Infinity;
  for (const record of records) oldest = Math.min(oldest, record.gap?.firstTickMs ?? record.tickMs);
  return Math.max(byAge, oldest);
}

/** The tick's own records: those at it (a manual trigger's is no tick's), and a gap (ticks missed while no replica ran) that covers it. */
function recordsOf(tickMs: number, records: readonly TickRecord[]): TickRecord[] {
  const covers = (record: TickRecord) =>
    record.tickMs === tickMs ||
    (record.gap !== undefined && record.gap.firstTickMs <= tickMs && tickMs < record.tickMs);
  return records.filter((record) => record.outcome !== 'triggered' && covers(record));
}

/**
 * Which ticks of a range a backfill fires: those that did not run. A tick ran, or may still run,
 * when a job was published for it (enqueued, recovered, backfilled) unless every recorded run of
 * it ended without running (NOT_RUN_OUTCOMES); a tick without any record is not decided yet, or
 * its record was lost with the queue Redis's data, so it is left alone too. What this decides
 * the lock nodes confirm: the backfill starts each fired tick's claim, which a run that started
 * holds.
 */
export function planBackfill(
  ticks: readonly number[],
  records: readonly TickRecord[],
  runs: readonly RunRecord[],
): BackfillTick[] {
  return ticks.map((tickMs): BackfillTick => {
    const own = recordsOf(tickMs, records);
    const skip = (why: string): BackfillTick => ({ tickMs, action: 'skip', why });
    if (own.length === 0) return skip('no outcome recorded: not decided yet, or its record was lost');
    if (own.some((record) => record.outcome === 'backfilled')) return skip('backfilled before');
    const published = own.find((record) => !NOT_PUBLISHED.has(record.outcome));
    if (published === undefined) {
      const [record] = own as [TickRecord];
      return {
        tickMs,
        action: 'fire',
        why: record.gap
          ? 'missed while no replica ran'
          : `${record.outcome}${record.reason ? ` (${record.reason})` : ''}`,
      };
    }
    const ran = runs.filter((run) => run.tickMs === tickMs);
    if (ran.length === 0)
      return skip(`${published.outcome}; no run recorded (queued, running, or beyond the run history)`);
    const started = ran.find((run) => !NOT_RUN_OUTCOMES.has(run.outcome));
    if (started) return skip(`${published.outcome}; its run ${started.outcome}`);
    return {
      tickMs,
      action: 'fire',
      why: `${published.outcome}; its job did not run (${[...new Set(ran.map((run) => run.outcome))].join(', ')})`,
      publishedNotRun: true,
    };
  });
}
