import type { Overlap } from '@tickwarden/contracts';
import { Cron } from 'croner';
import {
  checkLedger,
  readLedger,
  splitTickKey,
  tickKey,
  type FenceRegression,
  type LedgerRun,
  type RunOverlap,
} from './ledger.ts';

/**
 * A stretch of time in which the system could not run ticks, by design: misses inside it are allowed.
 * - `no-replica`: no replica running (killed, paused or restarting);
 * - `no-lock-majority`: none of the running replicas reaches a majority of the lock nodes;
 * - `queue-redis-down`: the queue Redis killed (until it is back: from its AOF or empty) or paused
 *   (until continued), while some replica runs: nothing can be enqueued, taken or recorded;
 * - `queue-redis-unreachable`: the replicas that reach a lock majority are all cut from the queue Redis.
 */
export interface OutageWindow {
  fromMs: number;
  toMs: number;
  reason: 'no-replica' | 'no-lock-majority' | 'queue-redis-down' | 'queue-redis-unreachable';
  /** How long before `fromMs` a tick may still have been in flight (default IN_FLIGHT_SLACK_MS; see queueInFlightMs). */
  inFlightMs?: number;
}

/**
 * A worker SIGKILLed (until restarted), SIGSTOPped (until continued) or cut from the queue Redis
 * (until healed: its queue commands wait and land then, as a paused worker's do): the jobs it held
 * wait for it or for BullMQ's stall check.
 */
export interface WorkerFaultWindow {
  /** The worker's process name (its slot: a restarted worker keeps it). */
  worker: string;
  kind: 'kill' | 'pause' | 'queue-cut';
  fromMs: number;
  toMs: number;
}

/** A schedule's `overlap` policy. */

/** Why an expected tick never ran (and was not skipped or superseded by design). `unexplained` fails a run. */
export type MissReason = OutageWindow['reason'] | 'unexplained';

/** A schedule the suites expect ticks from (every one writes the ledger). */
export interface ExpectedSchedule {
  /** `team/name`. */
  id: string;
  cron: string;
  overlap: Overlap;
  leaseTtlMs: number;
  /** How often one tick's handler may start: the schedule's `attempts` (default 1). */
  attempts?: number;
}

/** One log record of a process (pino JSON), as `Cluster.records` gives it. */
export type LogRecord = Record<string, unknown>;

export interface ReportInput {
  ledgerFile: string;
  /**
   * Every log record of every process (see `Cluster.records`). Read by field: `schedule`,
   * `tick`, `outcome`, `level`, `fence`, `attempt`, `firstTick`/`lastTick` (a gap), and
   * `seenMs` (when the harness read the line; else the record's own `time`).
   */
  records: readonly LogRecord[];
  schedules: readonly ExpectedSchedule[];
  /** Ticks in [fromMs, toMs] are expected to run. */
  fromMs: number;
  toMs: number;
  outages: readonly OutageWindow[];
  /** Workers killed, paused or cut from the queue Redis during the run (see `heldByWorkerFault`). */
  workerFaults?: readonly WorkerFaultWindow[];
  /**
   * When the queue Redis came back empty: a tick published before such a time whose job was lost
   * with the data is published again by recovery, by design (whether it ran is the ledger's).
   */
  queueWipesMs?: readonly number[];
  /**
   * The cluster's tick history (records of `tickwarden status --json`, read during the run): a
   * tick whose outcome is recorded there but in no log line (its recorder died between writing
   * the record and logging it) is not silent. Fields as the history keeps them.
   */
  history?: readonly LogRecord[];
}

/** A tick that did not run and was neither skipped nor superseded by design. */
export interface MissedTick {
  tick: string;
  reason: MissReason;
  /** Outcomes any process recorded for the tick (sorted, `missed(<reason>)` with a reason), empty when none. */
  outcomes: string[];
}

/** A run that a faulted worker held back: its lag, and how late it was past its fault's end plus WORKER_RECOVERY_MS (0 or less: in time). */
export interface HeldTick {
  tick: string;
  worker: string;
  lagMs: number;
  overdueMs: number;
}

/** When runs started relative to their tick: over ticks due outside every outage window and not held by a faulted worker. */
export interface StartLag {
  /** Runs measured. */
  count: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  minMs: number;
  /** p99 must not exceed this: the largest `leaseTtl` plus 1 s. */
  targetMs: number;
  /** The latest starts (at most 10), for inspection. */
  latest: { tick: string; lagMs: number }[];
  /** The earliest starts (at most 10): a negative lag is a run that started before its tick (a replica's clock ahead, say). */
  earliest: { tick: string; lagMs: number }[];
}

export interface TickReport {
  expected: number;
  enqueued: number;
  run: number;
  /** Ticks enqueued by more than one winner, started or completed more than once by one attempt number, or started more often than their attempts (the lists below, without repeats). */
  duplicates: string[];
  /** Ticks more than one replica logged as `enqueued` or `recovered`. */
  duplicateEnqueues: string[];
  /** Ticks completed more than once by the same attempt number (two jobs for one tick). */
  duplicateCompletions: string[];
  /** Ticks started more than once by the same attempt number (two jobs for one tick, even if one was killed). */
  duplicateStarts: string[];
  /** Ticks completed again by a later attempt of their one job (an end lost with its worker, retried as `worker-lost`): allowed within the schedule's attempts. */
  rerunsAfterCompletion: string[];
  /** Ticks whose handler started more often than their schedule's `attempts`: a run repeated behind the schedule's back. */
  startedTooOften: string[];
  overlaps: RunOverlap[];
  fenceRegressions: FenceRegression[];
  /** Ticks whose first run started (its program's first ledger line, on the true clock) before the tick: never allowed, whatever a process's clock says. */
  startedEarly: string[];
  /** `skip` ticks not run, recorded `skipped-overlap` while a run of an earlier tick of the schedule was in progress (see `inProgressUntilMs`): by design. */
  skipped: string[];
  /**
   * `skip` ticks not run, recorded `skipped-overlap` while no run of an earlier tick of the schedule
   * was in progress (none at all, only a queued job, a run that had ended, or a later tick's run):
   * a false skip, which fails the run.
   */
  skipsWithoutRun: string[];
  /** `cancel-previous` ticks not run because a later tick took their lease (recorded `superseded`), a later tick's run started soon after: by design. */
  superseded: string[];
  /** `skip` ticks not run, recorded `superseded` once a run of a later tick of the schedule had started (within EVIDENCE_SLACK_MS): by design, counted apart. */
  supersededSkip: string[];
  /**
   * Ticks recorded `worker-lost` that never wrote a ledger line: the worker that started the run was
   * killed or paused before its program did anything, and with `attempts: 1` it is not run again
   * (at most once). By design, listed apart.
   */
  lostWithWorker: string[];
  /** Ticks neither run, skipped, superseded nor lost with their worker; allowed only inside an outage window. */
  missed: MissedTick[];
  /** Runs whose tick a killed or paused worker held (see `heldByWorkerFault`): outside the start lag, each bounded by WORKER_RECOVERY_MS after its fault. */
  heldByWorkerFault: HeldTick[];
  /** Expected ticks (run or not) for which no process logged an outcome at info or above, and no gap line covers. */
  silent: string[];
  /** The silent ticks that did not run. */
  silentNotRun: number;
  /** Expected ticks whose outcome only the tick history holds (no log line: its recorder died before logging it). */
  historyOnly: string[];
  startLag: StartLag;
  /** Ledger lines that do not parse. */
  malformed: number;
  /** Runs aborted because their lease was lost (worker outcome `aborted-lease-lost`). */
  watchdogAborts: number;
  /** Validity left when a watchdog aborted a run (worker records with `validityLeftMs`), ms. */
  abortMarginsMs: number[];
}

/** A tick due just after an outage may still have failed inside it: its contest started before the outage ended. */
export const OUTAGE_SLACK_MS = 2_000;
/**
 * A tick due just before every replica was down may have been in flight on the last one (contested
 * when due, its enqueue not done) when it died: with `catchUp` 0 no replica fires it later
 * (apps/scheduler/README.md, "Ticks"). Likewise a tick due just before the queue Redis went down
 * may have been in flight there (its job queued or taken, its start not yet marked), and an empty
 * restart loses such a job. No-replica and queue-Redis-down outages only: a lock-majority outage,
 * or a queue Redis cut from some processes, stops no process and loses nothing.
 */
export const IN_FLIGHT_SLACK_MS = 1_000;
/**
 * A tick nobody published (its preferred contender could not take it) waits for recovery: apps/
 * scheduler's RECOVERY_DELAY_MS (1 s) after its contest, which a lock node's timeout stretches.
 * Recovery reads and publishes through the queue Redis, so the queue Redis going down within that
 * wait explains the miss too, but only of a tick nobody published before the queue Redis went
 * down (a publication after it comes back must be prompt: RECOVERY_AFTER_OUTAGE_MS).
 */
export const RECOVERY_WAIT_MS = 1_500;
/**
 * How soon a tick whose recovery the queue Redis blocked is published once the queue Redis is back
 * (the last outage before its publication): the replicas reconnect within 500 ms and recover the
 * open ticks a second after, which a loaded machine stretches; a tick published later than that
 * missed its start deadline by the replicas' fault, not the outage's.
 */
export const RECOVERY_AFTER_OUTAGE_MS = 4_000;
/** Sequential queue Redis round trips of a job's start on a worker (BullMQ's take, pause check, marks, history). */
const JOB_START_ROUND_TRIPS = 10;

/**
 * How long before the queue Redis went down a tick may still have been in flight, when every
 * queue link was slowed by `latencyMs` each way then: its job's start takes about
 * JOB_START_ROUND_TRIPS round trips more.
 */
export function queueInFlightMs(latencyMs: number): number {
  return IN_FLIGHT_SLACK_MS + JOB_START_ROUND_TRIPS * 2 * latencyMs;
}

/** The outages whose window starts IN_FLIGHT_SLACK_MS (or their `inFlightMs`) early. */
const IN_FLIGHT_REASONS: readonly OutageWindow['reason'][] = ['no-replica', 'queue-redis-down'];
/**
 * Clock and log-reading slack of the run evidence behind a skip or a supersession (harness poll,
 * the program's first line after its worker took the lease, event-loop stalls), ms.
 */
export const EVIDENCE_SLACK_MS = 1_000;
/**
 * How long a tick a dead or paused worker held may take to start once that worker is back or
 * gone, beyond the lease TTL: the worker's BullMQ job lock (5 s, its minimum, MIN_LOCK_DURATION_MS)
 * and two stalled checks (2 x 2.5 s, DEFAULT_STALLED_INTERVAL_MS), plus 1 s.
 */
export const WORKER_RECOVERY_MS = 11_000;
/** pino's `info`: silent means no outcome at this level or above. */
const INFO = 30;

const cronCache = new Map<string, Cron>();
function cronOf(pattern: string): Cron {
  let cron = cronCache.get(pattern);
  if (!cron) cronCache.set(pattern, (cron = new Cron(pattern, { timezone: 'UTC', paused: true })));
  return cron;
}

/** Every tick of the schedules in [fromMs, toMs], as `schedule tick` keys. */
export function expectedTicks(
  schedules: readonly Pick<ExpectedSchedule, 'id' | 'cron'>[],
  fromMs: number,
  toMs: number,
): string[] {
  return schedules.flatMap((schedule) => {
    const cron = cronOf(schedule.cron);
    const keys: string[] = [];
    for (let next = cron.nextRun(new Date(fromMs - 1)); next && next.getTime() <= toMs; next = cron.nextRun(next))
      keys.push(tickKey(schedule.id, next.getTime()));
    return keys;
  });
}

/** The schedule's next tick after `tickMs`, minus `tickMs`. */
function periodAfter(schedule: ExpectedSchedule, tickMs: number): number {
  const next = cronOf(schedule.cron).nextRun(new Date(tickMs));
  return next ? next.getTime() - tickMs : Infinity;
}

/** What the logs say about one tick. */
interface TickRecords {
  outcomes: Set<string>;
  /** An outcome was logged at info or above. */
  visible: boolean;
  /** When the `skipped-overlap` records were decided (harness time; see skipDecision). */
  skips: { fromMs: number; toMs: number }[];
  /** When the `superseded` records were logged (harness time). */
  supersedeTimesMs: number[];
  /** When the `enqueued` / `recovered` records were logged (harness time). */
  enqueueTimesMs: number[];
  enqueues: number;
  /** When its job was published (enqueued or recovered, not found on another's behalf), as far as known. */
  publishedAtMs: number[];
}

function pushTo<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

const recordTimeMs = (record: LogRecord): number | undefined =>
  typeof record['seenMs'] === 'number'
    ? record['seenMs']
    : typeof record['time'] === 'number'
      ? record['time']
      : undefined;

/** Checks a run of the cluster: what was expected, enqueued and run, and every safety and liveness violation. */
export function buildReport(input: ReportInput): TickReport {
  const workerFaults = input.workerFaults ?? [];
  const scheduleById = new Map(input.schedules.map((schedule) => [schedule.id, schedule]));
  const byTick = new Map<string, TickRecords>();
  const tickRecords = (key: string): TickRecords => {
    let entry = byTick.get(key);
    if (!entry)
      byTick.set(
        key,
        (entry = {
          outcomes: new Set(),
          visible: false,
          skips: [],
          supersedeTimesMs: [],
          enqueueTimesMs: [],
          enqueues: 0,
          publishedAtMs: [],
        }),
      );
    return entry;
  };
  /** Per schedule: gaps (ticks missed while no replica ran) logged at info or above. */
  const gaps = new Map<string, { fromMs: number; toMs: number }[]>();
  /** `schedule tick fence` -> attempt, from worker records. */
  const attempts = new Map<string, number>();
  /** Per tick, the earliest `run started` record (a worker record with `handler` and no outcome): its worker and attempt. */
  const firstRuns = new Map<string, { worker: string; attempt: number; atMs: number }>();
  /** Every `run started` record: a worker held the schedule's lease for that run from then. */
  const leaseGrants: { schedule: string; tick: string; fence: number; atMs: number }[] = [];
  /** Per `schedule tick fence`, when its worker last logged the run's end: it had released the lease just before. */
  const runEnds = new Map<string, number>();
  const abortMarginsMs: number[] = [];
  let watchdogAborts = 0;
  for (const record of input.records) {
    const { schedule, tick, outcome } = record;
    const level = typeof record['level'] === 'number' ? record['level'] : 0;
    if (typeof record['validityLeftMs'] === 'number') abortMarginsMs.push(record['validityLeftMs']);
    if (typeof schedule !== 'string') continue;
    if (typeof record['firstTick'] === 'string' && typeof record['lastTick'] === 'string' && level >= INFO) {
      pushTo(gaps, schedule, { fromMs: Date.parse(record['firstTick']), toMs: Date.parse(record['lastTick']) });
    }
    if (typeof tick !== 'string') continue;
    const at = recordTimeMs(record);
    if (typeof record['fence'] === 'number' && typeof record['attempt'] === 'number')
      attempts.set(`${schedule} ${tick} ${record['fence']}`, record['attempt']);
    if (
      typeof record['handler'] === 'string' &&
      outcome === undefined &&
      typeof record['attempt'] === 'number' &&
      typeof record['process'] === 'string' &&
      at !== undefined
    ) {
      const key = tickKey(schedule, tick);
      const known = firstRuns.get(key);
      if (!known || at < known.atMs)
        firstRuns.set(key, { worker: record['process'], attempt: record['attempt'], atMs: at });
      if (typeof record['fence'] === 'number') leaseGrants.push({ schedule, tick, fence: record['fence'], atMs: at });
    }
    // A release that reached no quorum (its worker cut from the lock nodes): the lease held until it lapsed.
    if (typeof record['heldUntilMs'] === 'number' && typeof record['fence'] === 'number') {
      const runKey = `${schedule} ${tick} ${record['fence']}`;
      runEnds.set(runKey, Math.max(record['heldUntilMs'], runEnds.get(runKey) ?? 0));
    }
    if (typeof outcome !== 'string') continue;
    // The last end of a run counts: another worker's `worker-lost` (its worker paused past the job
    // lock) comes while the paused worker still holds the lease, until its own end record.
    if (typeof record['fence'] === 'number' && at !== undefined) {
      const runKey = `${schedule} ${tick} ${record['fence']}`;
      runEnds.set(runKey, Math.max(at, runEnds.get(runKey) ?? at));
    }
    const key = tickKey(schedule, tick);
    const entry = tickRecords(key);
    entry.outcomes.add(
      outcome === 'missed' && typeof record['reason'] === 'string' ? `missed(${record['reason']})` : outcome,
    );
    if (level >= INFO) entry.visible = true;
    if (outcome === 'enqueued' || outcome === 'recovered') {
      entry.enqueues++;
      if (at !== undefined) entry.enqueueTimesMs.push(at);
      if (record['found'] !== true) entry.publishedAtMs.push(at ?? 0);
    }
    if (outcome === 'skipped-overlap' && at !== undefined) entry.skips.push(skipDecision(record, at, workerFaults));
    if (outcome === 'superseded' && at !== undefined) entry.supersedeTimesMs.push(at);
    if (outcome === 'aborted-lease-lost') watchdogAborts++;
  }
  const historyOnly = new Set<string>();
  for (const record of input.history ?? []) {
    const { schedule, tick, outcome, tickMs, lagMs, reason, gap } = record as {
      schedule?: unknown;
      tick?: unknown;
      outcome?: unknown;
      tickMs?: unknown;
      lagMs?: unknown;
      reason?: unknown;
      gap?: { firstTickMs?: unknown };
    };
    if (
      typeof schedule !== 'string' ||
      typeof tick !== 'string' ||
      typeof outcome !== 'string' ||
      typeof tickMs !== 'number'
    )
      continue;
    if (gap && typeof gap.firstTickMs === 'number') {
      pushTo(gaps, schedule, { fromMs: gap.firstTickMs, toMs: tickMs });
      continue;
    }
    const key = tickKey(schedule, tick);
    const entry = tickRecords(key);
    if (entry.visible) continue;
    historyOnly.add(key);
    entry.visible = true;
    entry.outcomes.add(outcome === 'missed' && typeof reason === 'string' ? `missed(${reason})` : outcome);
    // Decided at its tick plus the lag the recorder measured (on its own clock).
    const at = tickMs + (typeof lagMs === 'number' ? lagMs : 0);
    if (outcome === 'enqueued' || outcome === 'recovered') {
      entry.enqueues++;
      entry.enqueueTimesMs.push(at);
      entry.publishedAtMs.push(at);
    }
    if (outcome === 'skipped-overlap') entry.skips.push({ fromMs: at, toMs: at });
    if (outcome === 'superseded') entry.supersedeTimesMs.push(at);
  }

  const policyOf = (id: string): Overlap => scheduleById.get(id)?.overlap ?? 'skip';
  const ledger = checkLedger(readLedger(input.ledgerFile), {
    resourceOf: (schedule, tick) => (policyOf(schedule) === 'allow' ? tickKey(schedule, tick) : schedule),
    attemptOf: (schedule, tick, fence) => attempts.get(`${schedule} ${tick} ${fence}`),
  });

  /** Per schedule, its runs: their tick, their start and until when they were in progress. */
  const runsBySchedule = new Map<string, { tickMs: number; fromMs: number; toMs: number }[]>();
  const ledgerRuns = new Set<string>();
  const grantedAtMs = new Map<string, number>();
  for (const grant of leaseGrants) {
    const key = `${grant.schedule} ${grant.tick} ${grant.fence}`;
    grantedAtMs.set(key, Math.min(grant.atMs, grantedAtMs.get(key) ?? Infinity));
  }
  // A run holds its lease from its `run started` record (its program's first line can come more
  // than a second later on a loaded machine) until its worker released it, just before logging
  // its end: past its program's last line when the worker then waited (its finished mark written
  // to a slow queue Redis).
  for (const run of ledger.runs) {
    const key = `${run.schedule} ${run.tick} ${run.fence}`;
    const toMs = Math.max(
      inProgressUntilMs(run, scheduleById.get(run.schedule)?.leaseTtlMs ?? 0),
      runEnds.get(key) ?? -Infinity,
    );
    const fromMs = Math.min(run.firstMs, grantedAtMs.get(key) ?? Infinity);
    pushTo(runsBySchedule, run.schedule, { tickMs: Date.parse(run.tick), fromMs, toMs });
    ledgerRuns.add(key);
  }
  // A run whose worker took the lease and died (or was stopped) before its program wrote a line: it
  // held the lease from its `run started` record until its end record, or for as long as the lease could last.
  for (const grant of leaseGrants) {
    const key = `${grant.schedule} ${grant.tick} ${grant.fence}`;
    if (ledgerRuns.has(key)) continue;
    const ttl = scheduleById.get(grant.schedule)?.leaseTtlMs ?? 0;
    pushTo(runsBySchedule, grant.schedule, {
      tickMs: Date.parse(grant.tick),
      fromMs: grant.atMs,
      toMs: runEnds.get(key) ?? grant.atMs + ttl,
    });
  }
  /** Whether a run of an earlier tick of the schedule was in progress at some time from `fromMs` to `toMs`. */
  const earlierRunDuring = (schedule: string, tickMs: number, { fromMs, toMs }: { fromMs: number; toMs: number }) =>
    (runsBySchedule.get(schedule) ?? []).some(
      (run) => run.tickMs < tickMs && run.fromMs <= toMs + EVIDENCE_SLACK_MS && run.toMs >= fromMs - EVIDENCE_SLACK_MS,
    );
  /** Runs of the schedule by tick, to find a superseded tick's successor. */
  const startsBySchedule = new Map<string, { tickMs: number; startMs: number }[]>();
  for (const [key, startMs] of ledger.firstStartMs) {
    const { schedule, tickMs } = splitTickKey(key);
    pushTo(startsBySchedule, schedule, { tickMs, startMs });
  }
  // A run starts when its worker takes the lease (`run started`), as for skips: its program's first line can come a second later.
  for (const grant of leaseGrants)
    pushTo(startsBySchedule, grant.schedule, { tickMs: Date.parse(grant.tick), startMs: grant.atMs });
  /** Whether a run of a later tick of the schedule had started by `atMs`. */
  const laterRunBy = (schedule: string, tickMs: number, atMs: number): boolean =>
    (startsBySchedule.get(schedule) ?? []).some(
      (run) => run.tickMs > tickMs && run.startMs <= atMs + EVIDENCE_SLACK_MS,
    );

  const expected = expectedTicks(input.schedules, input.fromMs, input.toMs);
  const skipped: string[] = [];
  const skipsWithoutRun: string[] = [];
  const superseded: string[] = [];
  const supersededSkip: string[] = [];
  const lostWithWorker: string[] = [];
  const missed: MissedTick[] = [];
  const silent: string[] = [];
  let silentNotRun = 0;
  const lags: { tick: string; lagMs: number }[] = [];
  const startedEarly: string[] = [];
  const heldTicks: HeldTick[] = [];
  // While the queue Redis is down no successor can be published or start either.
  const queueDown = input.outages.filter((window) => window.reason === 'queue-redis-down');
  for (const key of expected) {
    const { schedule: id, tickMs } = splitTickKey(key);
    const schedule = scheduleById.get(id) as ExpectedSchedule;
    const records = byTick.get(key);
    const ran = ledger.ticksRun.has(key);
    const outage = outageOf(tickMs, input.outages);
    const inGap = (gaps.get(id) ?? []).some((gap) => tickMs >= gap.fromMs && tickMs <= gap.toMs);
    if (!records?.visible && !inGap) {
      silent.push(key);
      if (!ran) silentNotRun++;
    }
    if (ran) {
      const startMs = ledger.firstStartMs.get(key) as number;
      if (startMs < tickMs) startedEarly.push(`${key} (${startMs - tickMs} ms)`);
      const held = heldByWorkerFault(tickMs, startMs, firstRuns.get(key), workerFaults);
      if (held)
        heldTicks.push({
          tick: key,
          worker: held.worker,
          lagMs: startMs - tickMs,
          overdueMs: startMs - (held.toMs + schedule.leaseTtlMs + WORKER_RECOVERY_MS),
        });
      else if (outage === undefined) lags.push({ tick: key, lagMs: startMs - tickMs });
      continue;
    }
    const outcomes = records?.outcomes ?? new Set<string>();
    // Every skip or supersession recorded for the tick must have had its reason when it was decided.
    if (schedule.overlap === 'skip' && outcomes.has('skipped-overlap')) {
      const decisions = records?.skips.length ? records.skips : [{ fromMs: tickMs, toMs: tickMs }];
      const held = decisions.every((decision) => earlierRunDuring(id, tickMs, decision));
      (held ? skipped : skipsWithoutRun).push(key);
      continue;
    }
    if (
      schedule.overlap === 'skip' &&
      outcomes.has('superseded') &&
      decidedAt(records?.supersedeTimesMs, tickMs).every((atMs) => laterRunBy(id, tickMs, atMs))
    ) {
      supersededSkip.push(key);
      continue;
    }
    // A scheduler that recovers a cancel-previous tick after its successor is due records it skipped-overlap (it must not revoke the newer run): superseded too.
    if (schedule.overlap === 'cancel-previous' && (outcomes.has('superseded') || outcomes.has('skipped-overlap'))) {
      // A later tick took the lease: its run is due a lease TTL later at most, and may itself be superseded once.
      const byMs = supersededBy(tickMs, periodAfter(schedule, tickMs), schedule.leaseTtlMs, [
        ...workerFaults,
        ...queueDown,
      ]);
      if ((startsBySchedule.get(id) ?? []).some((run) => run.tickMs > tickMs && run.startMs <= byMs)) {
        superseded.push(key);
        continue;
      }
    }
    // Worker-lost, or its job gone with an empty restart before the stall check could record that.
    const firstRun = firstRuns.get(key);
    const jobWiped = firstRun !== undefined && (input.queueWipesMs ?? []).some((wipeMs) => wipeMs >= firstRun.atMs);
    if ((outcomes.has('worker-lost') || jobWiped) && lostWithItsWorker(firstRun, workerFaults, schedule.leaseTtlMs)) {
      lostWithWorker.push(key);
      continue;
    }
    const reason = outage ?? (recoveryBlocked(tickMs, records, queueDown) ? 'queue-redis-down' : 'unexplained');
    missed.push({ tick: key, reason, outcomes: [...outcomes].sort() });
  }

  const enqueueCounts = [...byTick]
    .filter(([, entry]) => publishedTwice(entry.publishedAtMs, input.queueWipesMs ?? []))
    .map(([key]) => key);
  const attemptsOf = new Map(input.schedules.map((schedule) => [schedule.id, schedule.attempts ?? 1]));
  const startsPerTick = new Map<string, number>();
  for (const run of ledger.runs)
    startsPerTick.set(tickKey(run.schedule, run.tick), (startsPerTick.get(tickKey(run.schedule, run.tick)) ?? 0) + 1);
  const startedTooOften = [...startsPerTick]
    .filter(([key, starts]) => starts > (attemptsOf.get(splitTickKey(key).schedule) ?? 1))
    .map(([key]) => key);
  const duplicates = [
    ...new Set([...enqueueCounts, ...ledger.duplicateStarts, ...ledger.duplicateCompletions, ...startedTooOften]),
  ];
  const targetMs = Math.max(0, ...input.schedules.map((schedule) => schedule.leaseTtlMs)) + 1000;
  return {
    expected: expected.length,
    enqueued: expected.filter((key) => (byTick.get(key)?.enqueues ?? 0) > 0).length,
    run: expected.filter((key) => ledger.ticksRun.has(key)).length,
    duplicates,
    duplicateEnqueues: enqueueCounts,
    duplicateCompletions: ledger.duplicateCompletions,
    duplicateStarts: ledger.duplicateStarts,
    rerunsAfterCompletion: ledger.rerunsAfterCompletion,
    startedTooOften,
    overlaps: ledger.overlaps,
    fenceRegressions: ledger.fenceRegressions,
    startedEarly,
    skipped,
    skipsWithoutRun,
    superseded,
    supersededSkip,
    lostWithWorker,
    missed,
    heldByWorkerFault: heldTicks,
    silent,
    silentNotRun,
    historyOnly: expected.filter((key) => historyOnly.has(key)),
    startLag: startLag(lags, targetMs),
    malformed: ledger.malformed.length,
    watchdogAborts,
    abortMarginsMs,
  };
}

/**
 * Whether a tick's job was published twice with no empty restart of the queue Redis between the two:
 * recovery publishes a tick again, by design, when the data it was published into was lost (a
 * second run would show in the ledger). Lines that found a publication on another's behalf are no
 * publication.
 */
export function publishedTwice(publishedAtMs: readonly number[], queueWipesMs: readonly number[]): boolean {
  const sorted = [...publishedAtMs].sort((a, b) => a - b);
  return sorted.some((at, i) => i > 0 && !queueWipesMs.some((wipe) => wipe > (sorted[i - 1] as number) && wipe < at));
}

/**
 * When a worker's skip was decided: when it was logged, unless its worker was paused or cut from
 * the queue Redis while it handled the job (from `durationMs` before the record): the lock nodes'
 * answer may have come before the fault, the record only after it, so any time since the job was
 * taken.
 */
function skipDecision(
  record: LogRecord,
  atMs: number,
  faults: readonly WorkerFaultWindow[],
): { fromMs: number; toMs: number } {
  const durationMs = record['durationMs'];
  if (typeof durationMs !== 'number') return { fromMs: atMs, toMs: atMs };
  const sinceMs = atMs - durationMs;
  const held = faults.some(
    (fault) =>
      fault.kind !== 'kill' && fault.worker === record['process'] && fault.fromMs <= atMs && fault.toMs >= sinceMs,
  );
  return { fromMs: held ? sinceMs : atMs, toMs: atMs };
}

/** When a tick's supersessions were decided: when each was logged; without a time (unit tests), at the tick. */
function decidedAt(timesMs: readonly number[] | undefined, tickMs: number): readonly number[] {
  return timesMs !== undefined && timesMs.length > 0 ? timesMs : [tickMs];
}

/**
 * Until when a ledger run was in progress: its last line; for a run that did not end (its worker
 * died or was stopped), a lease TTL after that, as long as its lease could still be held.
 */
function inProgressUntilMs(run: LedgerRun, leaseTtlMs: number): number {
  return run.ended ? run.lastMs : run.lastMs + leaseTtlMs;
}

/**
 * Whether a tick was due within RECOVERY_WAIT_MS (and the in-flight slack) before the queue Redis
 * went down, and nobody published it before then: either never, or only once the queue Redis was
 * back, within RECOVERY_AFTER_OUTAGE_MS (too late for its start deadline, by the outage).
 */
function recoveryBlocked(
  tickMs: number,
  records: TickRecords | undefined,
  queueDown: readonly OutageWindow[],
): boolean {
  const blocking = queueDown.find(
    (window) => tickMs >= window.fromMs - IN_FLIGHT_SLACK_MS - RECOVERY_WAIT_MS && tickMs < window.fromMs,
  );
  if (!blocking || records === undefined || records.enqueues === 0) return blocking !== undefined;
  // Published without a known time (unit tests): as if before the outage.
  if (records.enqueueTimesMs.length < records.enqueues) return false;
  const firstMs = Math.min(...records.enqueueTimesMs);
  if (firstMs < blocking.fromMs) return false;
  const backMs = Math.max(...queueDown.filter((window) => window.fromMs <= firstMs).map((window) => window.toMs));
  return firstMs <= backMs + RECOVERY_AFTER_OUTAGE_MS;
}

/** The outage a tick falls in (with the slacks above), if any. */
export function outageOf(tickMs: number, outages: readonly OutageWindow[]): OutageWindow['reason'] | undefined {
  const outage = outages.find(
    (window) =>
      tickMs >=
        window.fromMs - (IN_FLIGHT_REASONS.includes(window.reason) ? (window.inFlightMs ?? IN_FLIGHT_SLACK_MS) : 0) &&
      tickMs <= window.toMs + OUTAGE_SLACK_MS,
  );
  return outage?.reason;
}

/**
 * The worker fault that held a tick back, if one did: a kill, pause or cut from the queue Redis that
 * began between the tick and its first start, and either the run started on a later attempt (the job
 * came back through BullMQ's stall check; with `attempts: 1` nothing else numbers an attempt 2) or
 * it started on the paused or cut worker once it was back (it took the job before the fault).
 */
function heldByWorkerFault(
  tickMs: number,
  startMs: number,
  firstRun: { worker: string; attempt: number } | undefined,
  faults: readonly WorkerFaultWindow[],
): WorkerFaultWindow | undefined {
  if (firstRun === undefined) return undefined;
  const onPausedWorker = (fault: WorkerFaultWindow): boolean =>
    fault.kind !== 'kill' && fault.worker === firstRun.worker && startMs >= fault.toMs - EVIDENCE_SLACK_MS;
  return faults.find(
    (fault) =>
      fault.fromMs >= tickMs - EVIDENCE_SLACK_MS &&
      fault.fromMs <= startMs &&
      (firstRun.attempt > 1 || onPausedWorker(fault)),
  );
}

/** Whether the worker that started a tick's run was killed, paused or cut from the queue Redis soon after (within the run's lease TTL and WORKER_RECOVERY_MS). */
function lostWithItsWorker(
  firstRun: { worker: string; atMs: number } | undefined,
  faults: readonly WorkerFaultWindow[],
  leaseTtlMs: number,
): boolean {
  if (firstRun === undefined) return false;
  return faults.some(
    (fault) =>
      fault.worker === firstRun.worker &&
      fault.fromMs >= firstRun.atMs - EVIDENCE_SLACK_MS &&
      fault.fromMs <= firstRun.atMs + leaseTtlMs + WORKER_RECOVERY_MS,
  );
}

/**
 * By when a superseded tick's successor must have started: two periods and a lease TTL, and for
 * every worker killed, paused or cut from the queue Redis, and every queue Redis outage, meanwhile
 * a lease TTL and a period more (a run dead or stopped
 * with its worker holds the lease its successor waits for, and that successor may be superseded).
 */
function supersededBy(
  tickMs: number,
  periodMs: number,
  leaseTtlMs: number,
  faults: readonly { fromMs: number; toMs: number }[],
): number {
  let byMs = tickMs + 2 * periodMs + leaseTtlMs + EVIDENCE_SLACK_MS;
  const counted = new Set<{ fromMs: number; toMs: number }>();
  for (let more = true; more;) {
    more = false;
    for (const fault of faults) {
      if (counted.has(fault) || fault.fromMs < tickMs - leaseTtlMs || fault.fromMs > byMs) continue;
      counted.add(fault);
      byMs = Math.max(byMs, fault.toMs) + leaseTtlMs + periodMs;
      more = true;
    }
  }
  return byMs;
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] as number;
}

function startLag(lags: { tick: string; lagMs: number }[], targetMs: number): StartLag {
  const sorted = lags.map((lag) => lag.lagMs).sort((a, b) => a - b);
  return {
    count: sorted.length,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    maxMs: sorted.at(-1) ?? 0,
    minMs: sorted[0] ?? 0,
    targetMs,
    latest: [...lags].sort((a, b) => b.lagMs - a.lagMs).slice(0, 10),
    earliest: [...lags].sort((a, b) => a.lagMs - b.lagMs).slice(0, 10),
  };
}

/** Misses that no outage or designed skip explains. */
export function unexplainedMisses(report: TickReport): string[] {
  return report.missed.filter((miss) => miss.reason === 'unexplained').map((miss) => miss.tick);
}

/** Which checks fail a run besides safety and unexplained misses (all by default; the end-to-end tests turn the two off). */
export interface FailureRules {
  /** A silent tick fails the run. */
  silent?: boolean;
  /** Start lag p99 above `startLag.targetMs` fails the run. */
  startLag?: boolean;
}

/**
 * Why the run fails (empty: it passed): any duplicate, overlap, fence regression, run started
 * before its tick, torn ledger line,
 * skip without a run, unexplained miss, silent tick, or start lag p99 above the largest leaseTtl plus 1 s.
 */
export function reportFailures(report: TickReport, rules: FailureRules = {}): string[] {
  const { silent = true, startLag = true } = rules;
  const failures: string[] = [];
  const some = (keys: readonly string[]): string =>
    `${keys.slice(0, 10).join(', ')}${keys.length > 10 ? `, … (${keys.length})` : ''}`;
  if (report.duplicateEnqueues.length > 0) failures.push(`enqueued twice: ${some(report.duplicateEnqueues)}`);
  if (report.duplicateStarts.length > 0)
    failures.push(`started twice by the same attempt: ${some(report.duplicateStarts)}`);
  if (report.duplicateCompletions.length > 0) failures.push(`completed twice: ${some(report.duplicateCompletions)}`);
  if (report.startedTooOften.length > 0)
    failures.push(`started more often than the schedule's attempts: ${some(report.startedTooOften)}`);
  for (const overlap of report.overlaps.slice(0, 10))
    failures.push(
      `overlap: ${overlap.resource} fence ${overlap.staleFence} wrote (ledger line ${overlap.line}) after fence ${overlap.newerFence} started`,
    );
  for (const regression of report.fenceRegressions.slice(0, 10))
    failures.push(
      `fence regression: ${regression.resource} fence ${regression.fence} started after ${regression.previousFence} (ledger line ${regression.line})`,
    );
  if (report.startedEarly.length > 0) failures.push(`runs started before their tick: ${some(report.startedEarly)}`);
  if (report.malformed > 0) failures.push(`malformed ledger lines: ${report.malformed}`);
  if (report.skipsWithoutRun.length > 0) failures.push(`skips without a run: ${some(report.skipsWithoutRun)}`);
  const unexplained = report.missed.filter((miss) => miss.reason === 'unexplained');
  if (unexplained.length > 0)
    failures.push(
      `unexplained missed ticks: ${some(unexplained.map((miss) => `${miss.tick} [${miss.outcomes.join(',') || 'no outcome'}]`))}`,
    );
  if (silent && report.silent.length > 0)
    failures.push(`silent ticks (no outcome logged at info or above): ${some(report.silent)}`);
  const lag = report.startLag;
  const overdue = report.heldByWorkerFault.filter((held) => held.overdueMs > 0);
  if (overdue.length > 0)
    failures.push(
      `held by a faulted worker past ${WORKER_RECOVERY_MS} ms after the fault and a lease TTL: ${some(overdue.map((held) => `${held.tick} (${held.worker}, +${held.lagMs} ms)`))}`,
    );
  if (startLag && lag.count > 0 && lag.p99Ms > lag.targetMs)
    failures.push(
      `start lag p99 ${lag.p99Ms} ms is above ${lag.targetMs} ms (leaseTtl + 1 s); latest: ${lag.latest
        .slice(0, 5)
        .map((late) => `${late.tick} +${late.lagMs} ms`)
        .join(', ')}`,
    );
  return failures;
}

/** Unexplained misses counted by what was recorded for them (`none` when nothing was). */
export function unexplainedByOutcome(report: TickReport): [string, number][] {
  const counts = new Map<string, number>();
  for (const miss of report.missed) {
    if (miss.reason !== 'unexplained') continue;
    const signature = miss.outcomes.join('+') || 'none';
    counts.set(signature, (counts.get(signature) ?? 0) + 1);
  }
  return [...counts].sort((a, b) => b[1] - a[1]);
}

/** The summary, one figure per line in a fixed `name: value` form. */
export function formatReport(report: TickReport): string[] {
  const unexplained = unexplainedMisses(report).length;
  const outages = report.missed.length - unexplained;
  const margins = [...report.abortMarginsMs].sort((a, b) => a - b);
  const late = margins.filter((ms) => ms <= 0).length;
  const marginText =
    margins.length === 0
      ? ''
      : ` (validity left at abort: min ${margins[0]} ms, median ${margins[Math.floor(margins.length / 2)]} ms; after the lease lapsed, i.e. the worker was paused: ${late})`;
  const byOutcome = unexplainedByOutcome(report);
  const lag = report.startLag;
  return [
    `ticks expected: ${report.expected}`,
    `ticks enqueued: ${report.enqueued}`,
    `ticks run: ${report.run}`,
    `skipped (overlap): ${report.skipped.length}`,
    `skips without a run: ${report.skipsWithoutRun.length}`,
    `superseded (cancel-previous): ${report.superseded.length}`,
    `superseded (skip: a later tick ran first): ${report.supersededSkip.length}`,
    `lost with their worker before the program wrote (worker-lost, not run again): ${report.lostWithWorker.length}`,
    `duplicates: ${report.duplicates.length}`,
    `started more often than attempts allow: ${report.startedTooOften.length}`,
    `re-runs after a lost completion (within attempts): ${report.rerunsAfterCompletion.length}`,
    `overlaps: ${report.overlaps.length}`,
    `fence regressions: ${report.fenceRegressions.length}`,
    `started before their tick: ${report.startedEarly.length}`,
    `missed: ${report.missed.length} (explained by an outage: ${outages}, unexplained: ${unexplained})`,
    ...(byOutcome.length === 0
      ? []
      : [
          `unexplained by recorded outcome: ${byOutcome.map(([signature, count]) => `${signature} ${count}`).join(', ')}`,
        ]),
    `silent: ${report.silent.length}${report.silent.length === 0 ? '' : ` (not run: ${report.silentNotRun})`}`,
    ...(report.historyOnly.length === 0
      ? []
      : [`recorded only in the tick history (the recorder died before logging): ${report.historyOnly.join(', ')}`]),
    `start lag: p50 ${lag.p50Ms} ms, p99 ${lag.p99Ms} ms, max ${lag.maxMs} ms, min ${lag.minMs} ms (${lag.count} runs due outside outages; p99 target ${lag.targetMs} ms)`,
    `held by a killed or paused worker: ${report.heldByWorkerFault.length}${report.heldByWorkerFault.length === 0 ? '' : ` (lag max ${Math.max(...report.heldByWorkerFault.map((held) => held.lagMs))} ms)`}`,
    `watchdog aborts: ${report.watchdogAborts}${marginText}`,
  ];
}
