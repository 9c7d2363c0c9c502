import { Cron } from 'croner';
import { checkLedger, readLedger, tickKey, type FenceRegression, type Overlap } from './ledger.ts';

/** A stretch of time in which the system could not run ticks, by design: misses inside it are allowed. */
export interface OutageWindow {
  fromMs: number;
  toMs: number;
  reason: 'no-replica' | 'no-lock-majority';
}

/** Why an expected tick never ran (and was not skipped by design). `unexplained` fails a run. */
export type MissReason = OutageWindow['reason'] | 'unexplained';

/** A schedule the suites expect ticks from (every one writes the ledger). */
export interface ExpectedSchedule {
  /** `team/name`. */
  id: string;
  cron: string;
}

export interface ReportInput {
  ledgerFile: string;
  /** Every log record of every process (see `Cluster.records`). */
  records: readonly Record<string, unknown>[];
  schedules: readonly ExpectedSchedule[];
  /** Ticks in [fromMs, toMs] are expected to run. */
  fromMs: number;
  toMs: number;
  outages: readonly OutageWindow[];
}

export interface TickReport {
  expected: number;
  enqueued: number;
  run: number;
  /** Ticks enqueued by more than one winner, or completed more than once (both lists below, without repeats). */
  duplicates: string[];
  /** Ticks more than one replica logged as `enqueued` or `recovered`. */
  duplicateEnqueues: string[];
  /** Ticks completed more than once by the same attempt number (two jobs for one tick). */
  duplicateCompletions: string[];
  /** Ticks completed again by a later attempt of their one job (a completion lost with a killed worker): reported, allowed. */
  rerunsAfterCompletion: string[];
  overlaps: Overlap[];
  fenceRegressions: FenceRegression[];
  /** Ticks not run because the previous run of their `skip` schedule still held the lease (logged by a scheduler or worker): by design. */
  skipped: string[];
  /** Ticks neither run nor skipped. */
  missed: { tick: string; reason: MissReason }[];
  /** Ledger lines that do not parse. */
  malformed: number;
  /** Validity left when a watchdog aborted a run (worker log `validityLeftMs`), ms. */
  abortMarginsMs: number[];
}

/** A tick due just after an outage may still have failed inside it: its contest started before the outage ended. */
const OUTAGE_SLACK_MS = 2_000;
/**
 * A tick due just before every replica was down may have been in flight on the last one (contested
 * when due, its enqueue not done) when it died: with `catchUp` 0 no replica fires it later
 * (apps/scheduler/README.md, "Ticks"). No-replica outages only: a lock-majority outage stops no process.
 */
const IN_FLIGHT_SLACK_MS = 1_000;

/** Every tick of the schedules in [fromMs, toMs], as `schedule tick` keys. */
export function expectedTicks(schedules: readonly ExpectedSchedule[], fromMs: number, toMs: number): string[] {
  return schedules.flatMap((schedule) => {
    const cron = new Cron(schedule.cron, { timezone: 'UTC', paused: true });
    const keys: string[] = [];
    for (let next = cron.nextRun(new Date(fromMs - 1)); next && next.getTime() <= toMs; next = cron.nextRun(next)) keys.push(tickKey(schedule.id, next.getTime()));
    return keys;
  });
}

/** Checks a run of the cluster: what was expected, enqueued and run, and every safety violation. */
export function buildReport(input: ReportInput): TickReport {
  const ledger = checkLedger(readLedger(input.ledgerFile));
  const enqueueCounts = new Map<string, number>();
  const skipped = new Set<string>();
  const abortMarginsMs: number[] = [];
  for (const record of input.records) {
    const key = typeof record['schedule'] === 'string' && typeof record['tick'] === 'string' ? tickKey(record['schedule'], record['tick']) : undefined;
    if (key && (record['outcome'] === 'enqueued' || record['outcome'] === 'recovered')) enqueueCounts.set(key, (enqueueCounts.get(key) ?? 0) + 1);
    if (key && record['outcome'] === 'skipped-overlap') skipped.add(key);
    if (record['msg'] === 'lease watchdog aborted a run' && typeof record['validityLeftMs'] === 'number') abortMarginsMs.push(record['validityLeftMs']);
  }
  const expected = expectedTicks(input.schedules, input.fromMs, input.toMs);
  const notRun = expected.filter((key) => !ledger.ticksRun.has(key));
  const missed = notRun.filter((key) => !skipped.has(key)).map((key) => ({ tick: key, reason: missReason(key, input.outages) }));
  const duplicateEnqueues = [...enqueueCounts].filter(([, count]) => count > 1).map(([key]) => key);
  const duplicates = [...new Set([...duplicateEnqueues, ...ledger.duplicateCompletions])];
  return {
    expected: expected.length,
    enqueued: expected.filter((key) => enqueueCounts.has(key)).length,
    run: expected.filter((key) => ledger.ticksRun.has(key)).length,
    duplicates,
    duplicateEnqueues,
    duplicateCompletions: ledger.duplicateCompletions,
    rerunsAfterCompletion: ledger.rerunsAfterCompletion,
    overlaps: ledger.overlaps,
    fenceRegressions: ledger.fenceRegressions,
    skipped: notRun.filter((key) => skipped.has(key)),
    missed,
    malformed: ledger.malformed.length,
    abortMarginsMs,
  };
}

function missReason(key: string, outages: readonly OutageWindow[]): MissReason {
  const tickMs = Date.parse(key.slice(key.lastIndexOf(' ') + 1));
  const outage = outages.find((window) => tickMs >= window.fromMs - (window.reason === 'no-replica' ? IN_FLIGHT_SLACK_MS : 0) && tickMs <= window.toMs + OUTAGE_SLACK_MS);
  return outage?.reason ?? 'unexplained';
}

/** Misses that no outage or designed skip explains. */
export function unexplainedMisses(report: TickReport): string[] {
  return report.missed.filter((miss) => miss.reason === 'unexplained').map((miss) => miss.tick);
}

/** Why the run fails (empty: it passed): any duplicate, overlap, fence regression, torn ledger line or unexplained miss. */
export function reportFailures(report: TickReport): string[] {
  const failures: string[] = [];
  if (report.duplicateEnqueues.length > 0) failures.push(`enqueued twice: ${report.duplicateEnqueues.slice(0, 10).join(', ')}`);
  if (report.duplicateCompletions.length > 0) failures.push(`completed twice: ${report.duplicateCompletions.slice(0, 10).join(', ')}`);
  for (const overlap of report.overlaps.slice(0, 10)) failures.push(`overlap: ${overlap.schedule} fence ${overlap.staleFence} wrote (ledger line ${overlap.line}) after fence ${overlap.newerFence} started`);
  for (const regression of report.fenceRegressions.slice(0, 10)) failures.push(`fence regression: ${regression.schedule} fence ${regression.fence} started after ${regression.previousFence} (ledger line ${regression.line})`);
  if (report.malformed > 0) failures.push(`malformed ledger lines: ${report.malformed}`);
  const unexplained = unexplainedMisses(report);
  if (unexplained.length > 0) failures.push(`unexplained missed ticks: ${unexplained.slice(0, 10).join(', ')}`);
  return failures;
}

/** The summary, one figure per line in a fixed `name: value` form. */
export function formatReport(report: TickReport): string[] {
  const allowed = report.missed.length - unexplainedMisses(report).length;
  const margins = [...report.abortMarginsMs].sort((a, b) => a - b);
  const late = margins.filter((ms) => ms <= 0).length;
  const marginText = margins.length === 0 ? '' : ` (validity left at abort: min ${margins[0]} ms, median ${margins[Math.floor(margins.length / 2)]} ms; after the lease lapsed, i.e. the worker was paused: ${late})`;
  return [
    `ticks expected: ${report.expected}`,
    `ticks enqueued: ${report.enqueued}`,
    `ticks run: ${report.run}`,
    `skipped (overlap): ${report.skipped.length}`,
    `duplicates: ${report.duplicates.length}`,
    `re-runs after a lost completion: ${report.rerunsAfterCompletion.length}`,
    `overlaps: ${report.overlaps.length}`,
    `missed: ${report.missed.length} (allowed: ${allowed})`,
    `fence regressions: ${report.fenceRegressions.length}`,
    `watchdog aborts: ${margins.length}${marginText}`,
  ];
}
