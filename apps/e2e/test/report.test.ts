import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  buildReport,
  expectedTicks,
  formatReport,
  queueInFlightMs,
  reportFailures,
  unexplainedByOutcome,
  type ExpectedSchedule,
  type LogRecord,
  type OutageWindow,
  type WorkerFaultWindow,
} from '../src/index.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-report-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const T0 = Date.UTC(2030, 0, 1, 0, 0, 0);
const iso = (s: number): string => new Date(T0 + s * 1000).toISOString();
const at = (s: number): number => T0 + s * 1000;
const INFO = 30;
const DEBUG = 20;

const EVERY_SECOND: ExpectedSchedule = { id: 't/a', cron: '* * * * * *', overlap: 'skip', leaseTtlMs: 2000 };

function ledger(lines: string[]): string {
  const file = path.join(dir, `ledger-${Math.random()}.txt`);
  writeFileSync(file, lines.length === 0 ? '' : lines.join('\n') + '\n');
  return file;
}

/** A run's ledger lines: start `startS` seconds after T0, end `endS` after (no end when undefined). */
function run(schedule: string, tickS: number, fence: number, startS: number, endS?: number, attempt = 1): string[] {
  const lines = [`${schedule} ${iso(tickS)} ${fence} ${attempt} start 9 ${at(startS)}`];
  if (endS !== undefined) lines.push(`${schedule} ${iso(tickS)} ${fence} ${attempt} end 9 ${at(endS)}`);
  return lines;
}

/** An outcome record for a tick, at info unless said, seen by the harness at `seenS`. */
function outcome(schedule: string, tickS: number, name: string, extra: LogRecord = {}): LogRecord {
  return { level: INFO, schedule, tick: iso(tickS), outcome: name, ...extra };
}

/** The `run started` line a worker logs as it takes the lease for t/a's tick `tickS` with `fence`, at `atS`. */
function runStarted(tickS: number, fence: number, atS: number, extra: LogRecord = {}): LogRecord {
  return {
    level: INFO,
    schedule: 't/a',
    tick: iso(tickS),
    attempt: 1,
    fence,
    handler: 'command',
    process: 'worker-1',
    seenMs: at(atS),
    ...extra,
  };
}

/** The line a worker logs as it starts t/a's tick 1 (fence 2) at 1.05 s. */
function startedOn(worker: string): LogRecord {
  return runStarted(1, 2, 1.05, { handler: 'module', process: worker });
}

function steady(schedule: string, n: number, fenceFrom = 1): { lines: string[]; records: LogRecord[] } {
  const lines = Array.from({ length: n }, (_, s) => run(schedule, s, fenceFrom + s, s + 0.05, s + 0.15)).flat();
  const records = Array.from({ length: n }, (_, s) => outcome(schedule, s, 'enqueued', { seenMs: at(s) }));
  return { lines, records };
}

function report(options: {
  lines: string[];
  records: LogRecord[];
  schedules?: ExpectedSchedule[];
  fromS?: number;
  toS: number;
  outages?: OutageWindow[];
  workerFaults?: WorkerFaultWindow[];
  queueWipesS?: number[];
  history?: LogRecord[];
}): ReturnType<typeof buildReport> {
  return buildReport({
    ledgerFile: ledger(options.lines),
    records: options.records,
    schedules: options.schedules ?? [EVERY_SECOND],
    fromMs: at(options.fromS ?? 0),
    toMs: at(options.toS),
    outages: options.outages ?? [],
    workerFaults: options.workerFaults,
    queueWipesMs: options.queueWipesS?.map(at),
    history: options.history,
  });
}

describe('the run report', () => {
  it('expects every cron tick in the window, bounds included', () => {
    expect(expectedTicks([{ id: 't/a', cron: '*/2 * * * * *' }], T0, T0 + 4000)).toEqual([
      `t/a ${iso(0)}`,
      `t/a ${iso(2)}`,
      `t/a ${iso(4)}`,
    ]);
  });

  it('a tick that never ran is allowed inside an outage, and otherwise fails the run whatever was recorded for it', () => {
    const lines = run('t/a', 0, 1, 0.05, 0.2);
    const records = [
      outcome('t/a', 0, 'enqueued'),
      outcome('t/a', 2, 'missed', { reason: 'no-quorum' }),
      outcome('t/a', 3, 'missed', { reason: 'no-quorum' }),
    ];
    const inside = report({
      lines,
      records,
      toS: 3,
      outages: [{ fromMs: at(1.5), toMs: at(2.5), reason: 'no-lock-majority' }],
    });
    expect(inside.missed).toEqual([
      { tick: `t/a ${iso(1)}`, reason: 'unexplained', outcomes: [] },
      { tick: `t/a ${iso(2)}`, reason: 'no-lock-majority', outcomes: ['missed(no-quorum)'] },
      { tick: `t/a ${iso(3)}`, reason: 'no-lock-majority', outcomes: ['missed(no-quorum)'] }, // within the slack after the outage
    ]);
    // A tick recorded `missed` while the system could run it is unexplained: the record explains nothing.
    const later = report({ lines, records, toS: 5 });
    expect(later.missed.map((miss) => miss.reason)).toEqual([
      'unexplained',
      'unexplained',
      'unexplained',
      'unexplained',
      'unexplained',
    ]);
    expect(unexplainedByOutcome(later)).toEqual([
      ['none', 3],
      ['missed(no-quorum)', 2],
    ]);
    expect(reportFailures(later, { silent: false })).toEqual([
      `unexplained missed ticks: t/a ${iso(1)} [no outcome], t/a ${iso(2)} [missed(no-quorum)], t/a ${iso(3)} [missed(no-quorum)], t/a ${iso(4)} [no outcome], t/a ${iso(5)} [no outcome]`,
    ]);
    expect(formatReport(later)).toContain('missed: 5 (explained by an outage: 0, unexplained: 5)');
    expect(formatReport(later)).toContain('unexplained by recorded outcome: none 3, missed(no-quorum) 2');
  });

  it('a tick due at most 1 s before every replica was down is allowed (in flight on the last one); earlier ones, or before a lock outage, are not', () => {
    const lines = run('t/a', 0, 1, 0.05, 0.2);
    const withOutage = (reason: OutageWindow['reason']) =>
      report({ lines, records: [], toS: 3, outages: [{ fromMs: at(2.6), toMs: at(10), reason }] });
    expect(withOutage('no-replica').missed.map((miss) => [miss.tick, miss.reason])).toEqual([
      [`t/a ${iso(1)}`, 'unexplained'],
      [`t/a ${iso(2)}`, 'no-replica'],
      [`t/a ${iso(3)}`, 'no-replica'],
    ]);
    expect(withOutage('no-lock-majority').missed.map((miss) => miss.reason)).toEqual([
      'unexplained',
      'unexplained',
      'no-lock-majority',
    ]);
  });

  describe('the queue Redis down (killed until back from its AOF or empty, or paused until continued)', () => {
    const down: OutageWindow = { fromMs: at(4.5), toMs: at(7.5), reason: 'queue-redis-down' };

    it('a tick due from 1 s before it went down until 2 s after it was back that did not run is explained, whatever was logged for it; others are not', () => {
      // Ticks 0-2 and 10 ran; 3-9 did not: 4 and 5 were enqueued and their jobs lost with an empty restart, 6-7 missed (queue-unavailable), 8-9 nothing.
      const lines = [0, 1, 2, 10].flatMap((s) => run('t/a', s, s + 1, s + 0.05, s + 0.15));
      const records = [
        ...[0, 1, 2, 3, 4, 5, 10].map((s) => outcome('t/a', s, 'enqueued', { seenMs: at(s - 1) })),
        outcome('t/a', 6, 'missed', { reason: 'queue-unavailable', level: 40 }),
        outcome('t/a', 7, 'missed', { reason: 'queue-unavailable', level: 40 }),
      ];
      const result = report({ lines, records, toS: 10, outages: [down] });
      expect(result.missed.map((miss) => [miss.tick, miss.reason, miss.outcomes.join(',')])).toEqual([
        [`t/a ${iso(3)}`, 'unexplained', 'enqueued'], // due 1.5 s before it went down: not in flight then
        [`t/a ${iso(4)}`, 'queue-redis-down', 'enqueued'], // in flight when it went down
        [`t/a ${iso(5)}`, 'queue-redis-down', 'enqueued'],
        [`t/a ${iso(6)}`, 'queue-redis-down', 'missed(queue-unavailable)'],
        [`t/a ${iso(7)}`, 'queue-redis-down', 'missed(queue-unavailable)'],
        [`t/a ${iso(8)}`, 'queue-redis-down', ''],
        [`t/a ${iso(9)}`, 'queue-redis-down', ''], // 1.5 s after it was back: within the slack
      ]);
      expect(formatReport(result)).toContain('missed: 7 (explained by an outage: 6, unexplained: 1)');
      expect(reportFailures(result, { silent: false })).toEqual([`unexplained missed ticks: t/a ${iso(3)} [enqueued]`]);
      // Runs due in the window are left out of the start lag.
      expect(result.startLag.count).toBe(4);
    });

    it('a tick nobody published, due within the recovery wait before it went down, is explained; one enqueued or due earlier is not', () => {
      // Ticks 0, 1 and 5 ran; 2-4 did not: 2 and 3 were recorded missed after the outage, 4 nothing.
      const lines = [0, 1, 5].flatMap((s) => run('t/a', s, s + 1, s + 0.05, s + 0.15));
      const missedLate = (s: number) => outcome('t/a', s, 'missed', { reason: 'queue-unavailable', level: 40 });
      const records = [0, 1, 5].map((s) => outcome('t/a', s, 'enqueued', { seenMs: at(s) }));
      const reasons = (extra: ReturnType<typeof outcome>[], outage = down) =>
        report({ lines, records: [...records, ...extra], toS: 5, outages: [outage] }).missed.map((miss) => [
          miss.tick,
          miss.reason,
        ]);
      // Down at 4.5 s: tick 2 waited 2.5 s, tick 3 1.5 s.
      expect(reasons([missedLate(2), missedLate(3)])).toEqual([
        [`t/a ${iso(2)}`, 'queue-redis-down'],
        [`t/a ${iso(3)}`, 'queue-redis-down'],
        [`t/a ${iso(4)}`, 'queue-redis-down'],
      ]);
      // Published before the outage: it was not waiting for recovery (its job should have run).
      expect(reasons([missedLate(2), outcome('t/a', 3, 'enqueued', { seenMs: at(3) })])).toContainEqual([
        `t/a ${iso(3)}`,
        'unexplained',
      ]);
      // Recovered once the queue Redis was back (up at 7.5 s), too late for its start deadline: within 4 s of it the
      // outage explains it; later, the replicas were slow.
      const recoveredLate = (seenS: number) => [
        outcome('t/a', 3, 'recovered', { seenMs: at(seenS) }),
        outcome('t/a', 3, 'missed-deadline', { seenMs: at(seenS + 0.1) }),
      ];
      expect(reasons([missedLate(2), ...recoveredLate(11)])).toContainEqual([`t/a ${iso(3)}`, 'queue-redis-down']);
      expect(reasons([missedLate(2), ...recoveredLate(11.6)])).toContainEqual([`t/a ${iso(3)}`, 'unexplained']);
      // Down at 5.6 s: 3.6 s and 2.6 s are past the in-flight slack and the recovery wait.
      expect(reasons([missedLate(2), missedLate(3)], { ...down, fromMs: at(5.6) })).toEqual([
        [`t/a ${iso(2)}`, 'unexplained'],
        [`t/a ${iso(3)}`, 'unexplained'],
        [`t/a ${iso(4)}`, 'queue-redis-down'],
      ]);
    });

    it('a queue Redis cut from the replicas that reach a lock majority stops no process and loses no job: no early slack', () => {
      const result = report({
        lines: [],
        records: [],
        fromS: 4,
        toS: 10,
        outages: [{ ...down, reason: 'queue-redis-unreachable' }],
      });
      expect(result.missed.map((miss) => miss.reason)).toEqual([
        'unexplained',
        'queue-redis-unreachable',
        'queue-redis-unreachable',
        'queue-redis-unreachable',
        'queue-redis-unreachable',
        'queue-redis-unreachable',
        'unexplained',
      ]);
    });

    it('an empty restart loses the tick history, not the logs: ticks are judged from the log lines and the ledger, and records read before the wipe still count', () => {
      const { lines, records } = steady('t/a', 10);
      // The history read before the wipe held ticks 0-4 (tick 3's recorder died before logging it); read after it, only ticks 8-9.
      const beforeWipe = [0, 1, 2, 3, 4].map((s) => ({
        schedule: 't/a',
        tick: iso(s),
        tickMs: at(s),
        outcome: 'enqueued',
        lagMs: -900,
        replica: 'r1',
      }));
      const afterWipe = [8, 9].map((s) => ({
        schedule: 't/a',
        tick: iso(s),
        tickMs: at(s),
        outcome: 'enqueued',
        lagMs: -900,
        replica: 'r2',
      }));
      const logged = records.filter((record) => record['tick'] !== iso(3));
      const result = report({
        lines,
        records: logged,
        toS: 9,
        outages: [down],
        history: [...beforeWipe, ...afterWipe],
      });
      expect(result).toMatchObject({
        expected: 10,
        run: 10,
        missed: [],
        silent: [],
        duplicates: [],
        historyOnly: [`t/a ${iso(3)}`],
      });
      expect(reportFailures(result)).toEqual([]);
      // No history at all (every read after the wipe): the log lines alone judge every tick but the one nobody logged.
      const noHistory = report({ lines, records: logged, toS: 9, outages: [down] });
      expect(noHistory.silent).toEqual([`t/a ${iso(3)}`]);
      expect(noHistory.missed).toEqual([]);
    });

    it('a worker cut from the queue Redis holds the jobs it took as a paused one does: a run it starts once healed is held, not lag', () => {
      const lines = [
        ...Array.from({ length: 20 }, (_, s) =>
          run('t/a', s, s + 1, s + (s === 5 ? 6.2 : 0.1), s + (s === 5 ? 6.3 : 0.2)),
        ).flat(),
      ];
      const records = [
        ...Array.from({ length: 20 }, (_, s) => outcome('t/a', s, 'enqueued')),
        {
          level: INFO,
          schedule: 't/a',
          tick: iso(5),
          jobId: `t/a@${at(5)}`,
          attempt: 1,
          fence: 6,
          handler: 'command',
          firstStart: true,
          process: 'worker-1',
          seenMs: at(5.05),
        },
      ];
      const cut: WorkerFaultWindow = { worker: 'worker-1', kind: 'queue-cut', fromMs: at(5.1), toMs: at(11) };
      const result = report({ lines, records, toS: 19, workerFaults: [cut] });
      expect(result.heldByWorkerFault.map((held) => [held.tick, held.worker, held.lagMs])).toEqual([
        [`t/a ${iso(5)}`, 'worker-1', 6200],
      ]);
      expect(result.startLag).toMatchObject({ count: 19, maxMs: 100 });
      expect(reportFailures(result)).toEqual([]);
    });
  });

  describe('skip: a tick skipped while a run of an earlier tick was in progress is by design; any other skip fails the run', () => {
    it('a run of an earlier tick was in progress when the skip was decided: skipped', () => {
      // Tick 0 runs 0.05-1.6 s: tick 1, skipped at 1.02 s, is by design. Tick 3's worker took the lease at 4.9 s and
      // its program wrote `start` at 5.5 s: tick 5, skipped at 5.02 s, is by design too (the 1 s slack).
      const lines = [
        ...run('t/a', 0, 1, 0.05, 1.6),
        ...run('t/a', 2, 2, 2.05, 2.2),
        ...run('t/a', 3, 3, 5.5, 6),
        ...run('t/a', 4, 4, 6.05, 6.2),
      ];
      const records = [
        outcome('t/a', 1, 'skipped-overlap', { seenMs: at(1.02) }),
        outcome('t/a', 5, 'skipped-overlap', { seenMs: at(5.02) }),
      ];
      const result = report({ lines, records, toS: 5 });
      expect(result.skipped).toEqual([`t/a ${iso(1)}`, `t/a ${iso(5)}`]);
      expect(result.skipsWithoutRun).toEqual([]);
      expect(result.missed).toEqual([]);
      expect(reportFailures(result, { silent: false })).toEqual([]);
      expect(formatReport(result)).toContain('skipped (overlap): 2');
      expect(formatReport(result)).toContain('skips without a run: 0');
    });

    it('nothing in progress, or only a queued job, a deferral or a lapsed grant of an earlier tick: a skip without a run, which fails the run', () => {
      const cases: { name: string; lines: string[]; records: LogRecord[]; tickS: number }[] = [
        {
          // Tick 0 ended at 0.2 s; tick 5's skip at 5.01 s finds nothing.
          name: 'nothing',
          lines: run('t/a', 0, 1, 0.05, 0.2),
          records: [
            outcome('t/a', 0, 'enqueued', { seenMs: at(0.01) }),
            outcome('t/a', 5, 'skipped-overlap', { seenMs: at(5.01) }),
          ],
          tickS: 5,
        },
        {
          // Tick 0 enqueued at 0.01 s and never started: its queued job holds no lease.
          name: 'enqueued',
          lines: [],
          records: [
            outcome('t/a', 0, 'enqueued', { seenMs: at(0.01) }),
            outcome('t/a', 1, 'skipped-overlap', { seenMs: at(1.01) }),
          ],
          tickS: 1,
        },
        {
          // Tick 0's job deferred at 3.5 s and 6.9 s: still no run when tick 7 was skipped at 7.01 s.
          name: 'deferred',
          lines: [],
          records: [
            outcome('t/a', 0, 'enqueued', { seenMs: at(0.01) }),
            outcome('t/a', 0, 'deferred', { seenMs: at(3.5) }),
            outcome('t/a', 0, 'deferred', { seenMs: at(6.9) }),
            outcome('t/a', 7, 'skipped-overlap', { seenMs: at(7.01) }),
          ],
          tickS: 7,
        },
        {
          // Tick 8's winner paused before enqueueing it (lease-lapsed, logged once it ran again).
          name: 'lease-lapsed',
          lines: [],
          records: [
            { level: 40, schedule: 't/a', tick: iso(8), observation: 'lease-lapsed', seenMs: at(11.8) },
            outcome('t/a', 9, 'skipped-overlap', { seenMs: at(9.5) }),
          ],
          tickS: 9,
        },
      ];
      for (const { name, lines, records, tickS } of cases) {
        const result = report({ lines, records, fromS: tickS, toS: tickS });
        expect(result.skipped, name).toEqual([]);
        expect(result.skipsWithoutRun, name).toEqual([`t/a ${iso(tickS)}`]);
        expect(result.missed, name).toEqual([]);
        expect(reportFailures(result, { silent: false }), name).toEqual([`skips without a run: t/a ${iso(tickS)}`]);
        expect(formatReport(result), name).toContain('skips without a run: 1');
      }
    });

    it('the run of the earlier tick had ended more than 1 s before the skip: a skip without a run', () => {
      // Tick 4's run ended at 4.15 s: tick 5, skipped at 5.01 s, is within the slack; tick 6, skipped at 6.01 s, is not
      // (an ended run's lease is released with its end).
      const lines = [...run('t/a', 0, 1, 0.05, 0.2), ...run('t/a', 4, 2, 4.05, 4.15)];
      const records = [
        outcome('t/a', 5, 'skipped-overlap', { seenMs: at(5.01) }),
        outcome('t/a', 6, 'skipped-overlap', { seenMs: at(6.01) }),
      ];
      const result = report({ lines, records, fromS: 5, toS: 6 });
      expect(result.skipped).toEqual([`t/a ${iso(5)}`]);
      expect(result.skipsWithoutRun).toEqual([`t/a ${iso(6)}`]);
      expect(result.missed).toEqual([]);
    });

    it('every skip recorded for a tick needs its run: one decided with nothing in progress fails it', () => {
      // Tick 1 was skipped at 1.02 s, while tick 0's run (0.05-1.6 s) held the lease, and again at 4 s, with nothing running.
      const lines = run('t/a', 0, 1, 0.05, 1.6);
      const once = [outcome('t/a', 1, 'skipped-overlap', { seenMs: at(1.02) })];
      const twice = [...once, outcome('t/a', 1, 'skipped-overlap', { seenMs: at(4) })];
      expect(report({ lines, records: once, fromS: 1, toS: 1 }).skipped).toEqual([`t/a ${iso(1)}`]);
      const result = report({ lines, records: twice, fromS: 1, toS: 1 });
      expect(result.skipped).toEqual([]);
      expect(result.skipsWithoutRun).toEqual([`t/a ${iso(1)}`]);
    });

    it('a run of a later tick holding the lease is no reason to skip (the older tick is superseded): a skip without a run', () => {
      // Tick 1's job was taken at 2.5 s, while tick 2's run (2.05-4 s) held the lease.
      const lines = run('t/a', 2, 5, 2.05, 4);
      const records = [outcome('t/a', 1, 'skipped-overlap', { seenMs: at(2.5) })];
      const result = report({ lines, records, fromS: 1, toS: 1 });
      expect(result.skipped).toEqual([]);
      expect(result.skipsWithoutRun).toEqual([`t/a ${iso(1)}`]);
      expect(reportFailures(result, { silent: false })).toEqual([`skips without a run: t/a ${iso(1)}`]);
    });

    it('a run of an earlier tick that did not end (its worker died) is in progress until a lease TTL after its last line', () => {
      // Tick 0's run: start at 0.05 s, last beat at 0.5 s, no end; lease TTL 2 s, so in progress until 2.5 s (and 1 s slack).
      const beat = `t/a ${iso(0)} 1 1 beat 9 ${at(0.5)}`;
      const lines = [...run('t/a', 0, 1, 0.05), beat];
      const records = [
        outcome('t/a', 3, 'skipped-overlap', { seenMs: at(3.4) }),
        outcome('t/a', 4, 'skipped-overlap', { seenMs: at(4.01) }),
      ];
      const unended = report({ lines, records, fromS: 3, toS: 4 });
      expect(unended.skipped).toEqual([`t/a ${iso(3)}`]);
      expect(unended.skipsWithoutRun).toEqual([`t/a ${iso(4)}`]);
      // The same run ended at its last beat: its lease went with it.
      const ended = report({ lines: [...lines, `t/a ${iso(0)} 1 1 end 9 ${at(0.5)}`], records, fromS: 3, toS: 4 });
      expect(ended.skipped).toEqual([]);
      expect(ended.skipsWithoutRun).toEqual([`t/a ${iso(3)}`, `t/a ${iso(4)}`]);
    });

    it('a run whose release reached no quorum (its worker cut from the lock nodes) holds the lease until it lapses, as its worker logged', () => {
      // Tick 0 ran 0.05-1.2 s; its worker could not release the lease, held until 3.2 s: tick 3, skipped at 3.05 s, found it.
      const lines = run('t/a', 0, 1, 0.05, 1.2);
      const records = [outcome('t/a', 3, 'skipped-overlap', { seenMs: at(3.05) })];
      expect(report({ lines, records, fromS: 3, toS: 3 }).skipsWithoutRun).toEqual([`t/a ${iso(3)}`]);
      const unreleased = { level: 40, schedule: 't/a', tick: iso(0), fence: 1, heldUntilMs: at(3.2), seenMs: at(1.2) };
      const result = report({ lines, records: [unreleased, ...records], fromS: 3, toS: 3 });
      expect(result.skipped).toEqual([`t/a ${iso(3)}`]);
      expect(result.skipsWithoutRun).toEqual([]);
    });

    it("a worker's run whose program never wrote (its worker died first) holds the lease from its `run started` for a lease TTL", () => {
      // Tick 0's run: `run started` at 1.5 s, no ledger line; lease TTL 2 s, so in progress until 3.5 s (and 1 s slack).
      const records = [
        runStarted(0, 7, 1.5),
        outcome('t/a', 2, 'skipped-overlap', { seenMs: at(2.01) }),
        outcome('t/a', 5, 'skipped-overlap', { seenMs: at(5.01) }),
      ];
      const result = report({
        lines: [],
        records,
        fromS: 2,
        toS: 5,
        schedules: [{ ...EVERY_SECOND, leaseTtlMs: 2000 }],
      });
      expect(result.skipped).toEqual([`t/a ${iso(2)}`]);
      expect(result.skipsWithoutRun).toEqual([`t/a ${iso(5)}`]);
    });

    it("a run holds its lease from its worker's `run started`, before its program's first line", () => {
      // Tick 0's worker took the lease at 1 s; its program, slow to start, wrote its first line at 2.6 s: tick 1,
      // skipped at 1.1 s, had a run in progress.
      const lines = run('t/a', 0, 1, 2.6, 3);
      const started = runStarted(0, 1, 1);
      const records = [started, outcome('t/a', 1, 'skipped-overlap', { seenMs: at(1.1) })];
      const result = report({ lines, records, fromS: 1, toS: 1 });
      expect(result.skipped).toEqual([`t/a ${iso(1)}`]);
      expect(result.skipsWithoutRun).toEqual([]);
      // Without that record, only the program's lines tell: nothing ran at 1.1 s.
      expect(report({ lines, records: records.slice(1), fromS: 1, toS: 1 }).skipsWithoutRun).toEqual([`t/a ${iso(1)}`]);
    });

    it('a skip logged by a worker paused while it handled the job was decided any time since it took the job', () => {
      // Tick 0 ran 0.05-1.3 s. Tick 1's job was taken at 1.1 s by worker-2, which the nodes answered `taken` (tick 0's
      // run held the lease) just before worker-2 was paused from 1.2 s to 4.3 s: its skip was logged at 4.5 s.
      const lines = run('t/a', 0, 1, 0.05, 1.3);
      const skip = outcome('t/a', 1, 'skipped-overlap', { seenMs: at(4.5), durationMs: 3400, process: 'worker-2' });
      const paused: WorkerFaultWindow = { worker: 'worker-2', kind: 'pause', fromMs: at(1.2), toMs: at(4.3) };
      const result = report({ lines, records: [skip], fromS: 1, toS: 1, workerFaults: [paused] });
      expect(result.skipped).toEqual([`t/a ${iso(1)}`]);
      expect(result.skipsWithoutRun).toEqual([]);
      // Another worker's pause, or none: decided when logged, with nothing in progress then.
      const elsewhere = { ...paused, worker: 'worker-1' };
      for (const workerFaults of [[], [elsewhere]])
        expect(report({ lines, records: [skip], fromS: 1, toS: 1, workerFaults }).skipsWithoutRun).toEqual([
          `t/a ${iso(1)}`,
        ]);
    });

    it("a run holds its lease until its worker's end record (the lease released just before), past its program's last line", () => {
      // Tick 0's program ended at 1.1 s; its worker logged the run's end at 2.8 s (its finished mark waited for a slow
      // queue Redis): skipped at 2.5 s, tick 2 had a run in progress; tick 4, at 4.01 s, had none.
      const lines = run('t/a', 0, 1, 0.05, 1.1);
      const records = [
        { level: INFO, schedule: 't/a', tick: iso(0), attempt: 1, fence: 1, outcome: 'succeeded', seenMs: at(2.8) },
        outcome('t/a', 2, 'skipped-overlap', { seenMs: at(2.5) }),
        outcome('t/a', 4, 'skipped-overlap', { seenMs: at(4.01) }),
      ];
      const result = report({ lines, records, fromS: 2, toS: 4 });
      expect(result.skipped).toEqual([`t/a ${iso(2)}`]);
      expect(result.skipsWithoutRun).toEqual([`t/a ${iso(4)}`]);
    });

    it("another worker's worker-lost does not end a run: its paused worker holds the lease until its own end record", () => {
      // Tick 0's program ended at 1.1 s while its worker was paused; another worker recorded worker-lost at 1.2 s
      // (the job lock lapsed), the paused worker, resumed, its end at 4.5 s: tick 3, skipped at 3.2 s, had a run.
      const lines = run('t/a', 0, 1, 0.05, 1.1);
      const records = [
        {
          level: INFO,
          schedule: 't/a',
          tick: iso(0),
          attempt: 1,
          fence: 1,
          outcome: 'aborted-lease-lost',
          seenMs: at(4.5),
        },
        { level: INFO, schedule: 't/a', tick: iso(0), attempt: 1, fence: 1, outcome: 'worker-lost', seenMs: at(1.2) },
        outcome('t/a', 3, 'skipped-overlap', { seenMs: at(3.2) }),
      ];
      const result = report({ lines, records, fromS: 3, toS: 3 });
      expect(result.skipped).toEqual([`t/a ${iso(3)}`]);
      expect(result.skipsWithoutRun).toEqual([]);
    });

    it('superseded: a run of a later tick had started when it was decided (1 s slack), counted apart', () => {
      // Tick 2's run started at 2.05 s: tick 1, superseded at 2.3 s, and tick 0, at 1.6 s (the program's first line
      // after its worker took the lease), are by design.
      const lines = run('t/a', 2, 5, 2.05, 2.5);
      const records = [
        outcome('t/a', 0, 'superseded', { seenMs: at(1.6) }),
        outcome('t/a', 1, 'superseded', { seenMs: at(2.3) }),
      ];
      const result = report({ lines, records, fromS: 0, toS: 1 });
      expect(result.supersededSkip).toEqual([`t/a ${iso(0)}`, `t/a ${iso(1)}`]);
      expect(result.superseded).toEqual([]);
      expect(result.missed).toEqual([]);
      expect(reportFailures(result, { silent: false })).toEqual([]);
      expect(formatReport(result)).toContain('superseded (skip: a later tick ran first): 2');
      expect(formatReport(result)).toContain('superseded (cancel-previous): 0');
    });

    it("superseded: a later tick's run started when its worker took the lease, its program's first line a second or more later", () => {
      // Tick 4's worker took the lease at 3.5 s; its program wrote first at 4.8 s. Tick 1 was superseded at 3.7 s.
      const lines = run('t/a', 4, 5, 4.8, 5.2);
      const started = runStarted(4, 5, 3.5, { handler: 'module' });
      const records = [outcome('t/a', 1, 'superseded', { seenMs: at(3.7) })];
      expect(report({ lines, records, fromS: 1, toS: 1 }).supersededSkip).toEqual([]);
      const result = report({ lines, records: [started, ...records], fromS: 1, toS: 1 });
      expect(result.supersededSkip).toEqual([`t/a ${iso(1)}`]);
      expect(result.missed).toEqual([]);
    });

    it('superseded while no run of a later tick had started (none, only an earlier one, or one that started later) is an unexplained miss', () => {
      // Tick 0 ran 0.05-1.5 s, tick 3 from 3.05 s; tick 1 was recorded superseded at 1.2 s.
      const records = [outcome('t/a', 1, 'superseded', { seenMs: at(1.2) })];
      for (const lines of [
        [],
        run('t/a', 0, 1, 0.05, 1.5),
        [...run('t/a', 0, 1, 0.05, 1.5), ...run('t/a', 3, 5, 3.05, 3.5)],
      ]) {
        const result = report({ lines, records, fromS: 1, toS: 1 });
        expect(result.supersededSkip).toEqual([]);
        expect(result.missed).toEqual([{ tick: `t/a ${iso(1)}`, reason: 'unexplained', outcomes: ['superseded'] }]);
        expect(reportFailures(result, { silent: false })).toEqual([
          `unexplained missed ticks: t/a ${iso(1)} [superseded]`,
        ]);
      }
    });

    it('allow and cancel-previous schedules are never skipped for an earlier run: a skipped-overlap there is a miss', () => {
      for (const overlap of ['allow', 'cancel-previous'] as const) {
        const schedule = { ...EVERY_SECOND, overlap };
        const lines = run('t/a', 0, 1, 0.05, 1.6);
        const result = report({
          lines,
          records: [outcome('t/a', 1, 'skipped-overlap', { seenMs: at(1.02) })],
          schedules: [schedule],
          fromS: 1,
          toS: 1,
        });
        expect(
          result.missed.map((miss) => miss.reason),
          overlap,
        ).toEqual(['unexplained']);
      }
    });
  });

  describe('cancel-previous: a superseded tick is by design when a later tick of the schedule started soon after', () => {
    const CANCEL: ExpectedSchedule = { id: 't/c', cron: '*/2 * * * * *', overlap: 'cancel-previous', leaseTtlMs: 3000 };

    it('superseded, and a later tick started within two periods, a lease TTL and 1 s', () => {
      // Tick 0 superseded by tick 2, whose run waited a lease TTL: started at 5.2 s (bound: 0 + 4 + 3 + 1 = 8 s).
      const lines = run('t/c', 2, 5, 5.2, 6);
      const records = [outcome('t/c', 0, 'superseded'), outcome('t/c', 2, 'enqueued')];
      const result = report({ lines, records, schedules: [CANCEL], toS: 2 });
      expect(result.superseded).toEqual([`t/c ${iso(0)}`]);
      expect(result.missed).toEqual([]);
      expect(formatReport(result)).toContain('superseded (cancel-previous): 1');
    });

    it('superseded while no later tick runs in time (a schedule starved by its own ticks) is a miss', () => {
      const lines = run('t/c', 6, 5, 10.5, 11); // bounds: tick 0 by 8 s, tick 2 by 10 s, tick 4 by 12 s
      const result = report({
        lines,
        records: [outcome('t/c', 0, 'superseded'), outcome('t/c', 2, 'superseded'), outcome('t/c', 4, 'superseded')],
        schedules: [CANCEL],
        toS: 4,
      });
      expect(result.superseded).toEqual([`t/c ${iso(4)}`]);
      expect(result.missed.map((miss) => [miss.tick, miss.reason])).toEqual([
        [`t/c ${iso(0)}`, 'unexplained'],
        [`t/c ${iso(2)}`, 'unexplained'],
      ]);
    });

    it('cancel-previous: a tick recovered after its successor was due is recorded skipped-overlap by the scheduler, and counts as superseded when a later tick ran in time', () => {
      const schedule = { ...EVERY_SECOND, overlap: 'cancel-previous' as const };
      const lines = run('t/a', 2, 1, 2.1, 2.5);
      const result = report({
        lines,
        records: [outcome('t/a', 1, 'skipped-overlap', { seenMs: at(3.2) })],
        schedules: [schedule],
        fromS: 1,
        toS: 1,
      });
      expect(result.superseded).toEqual([`t/a ${iso(1)}`]);
      expect(result.missed).toEqual([]);
    });

    it('each worker killed or paused meanwhile gives the successor a lease TTL and a period more (a run dead with its worker holds the lease its successors wait for)', () => {
      // Ticks 0-6 superseded, tick 8 ran at 14.2 s: without faults the bounds are 8, 10, 12 and 14 s.
      const lines = run('t/c', 8, 5, 14.2, 15);
      const records = [0, 2, 4, 6].map((tickS) => outcome('t/c', tickS, 'superseded'));
      const kills: WorkerFaultWindow[] = [
        { worker: 'worker-2', kind: 'kill', fromMs: at(1), toMs: at(3) },
        { worker: 'worker-2', kind: 'pause', fromMs: at(7), toMs: at(9) },
      ];
      expect(report({ lines, records, schedules: [CANCEL], toS: 6 }).missed).toHaveLength(4);
      // Tick 0: 8 s, then the kill at 1 s: 8 + 3 + 2 = 13 s, which reaches the kill at 7 s: 13 + 5 = 18 s.
      const faulted = report({ lines, records, schedules: [CANCEL], toS: 6, workerFaults: kills });
      expect(faulted.missed).toEqual([]);
      expect(faulted.superseded).toHaveLength(4);
      // A fault long before the tick explains nothing.
      expect(
        report({
          lines,
          records,
          schedules: [CANCEL],
          toS: 6,
          workerFaults: [{ worker: 'worker-2', kind: 'kill', fromMs: at(-10), toMs: at(-9) }],
        }).missed,
      ).toHaveLength(4);
    });

    it('a superseded run that writes after its successor started is an overlap', () => {
      const lines = [...run('t/c', 0, 4, 0.05), ...run('t/c', 2, 5, 5.2, 6), `t/c ${iso(0)} 4 1 beat 9 ${at(5.25)}`];
      const result = report({
        lines,
        records: [outcome('t/c', 0, 'enqueued'), outcome('t/c', 2, 'enqueued')],
        schedules: [CANCEL],
        toS: 2,
      });
      expect(result.overlaps).toEqual([{ schedule: 't/c', resource: 't/c', staleFence: 4, newerFence: 5, line: 4 }]);
      expect(reportFailures(result)).toEqual([`overlap: t/c fence 4 wrote (ledger line 4) after fence 5 started`]);
    });
  });

  it('allow: runs of different ticks may overlap (one lease per tick); attempts of one tick may not', () => {
    const ALLOW: ExpectedSchedule = { id: 't/x', cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 3000 };
    const records = [outcome('t/x', 0, 'enqueued'), outcome('t/x', 1, 'enqueued')];
    const lines = [...run('t/x', 0, 10, 0.05), ...run('t/x', 1, 11, 1.05, 2), `t/x ${iso(0)} 10 1 end 9 ${at(2.5)}`];
    expect(report({ lines, records, schedules: [ALLOW], toS: 1 }).overlaps).toEqual([]);
    const retried = [...run('t/x', 0, 10, 0.05), ...run('t/x', 0, 12, 4, 5, 2), `t/x ${iso(0)} 10 1 beat 9 ${at(4.5)}`];
    expect(report({ lines: retried, records, schedules: [ALLOW], toS: 0 }).overlaps).toEqual([
      { schedule: 't/x', resource: `t/x ${iso(0)}`, staleFence: 10, newerFence: 12, line: 4 },
    ]);
  });

  describe('silent: no outcome logged at info or above for a tick, and no gap line over it', () => {
    it('counts ticks without a record, or with only debug records; a gap line covers its ticks', () => {
      const { lines, records } = steady('t/a', 3);
      const more = [
        outcome('t/a', 3, 'skipped-overlap', { level: DEBUG, seenMs: at(3.01) }), // debug only: silent
        outcome('t/a', 4, 'lost-race', { level: DEBUG }),
        // tick 5: nothing at all
        {
          level: 40,
          schedule: 't/a',
          outcome: 'missed',
          missed: 2,
          firstTick: iso(6),
          lastTick: iso(7),
          msg: 'ticks missed while no replica ran',
        },
        outcome('t/a', 8, 'missed', { reason: 'lock-unavailable', level: 40 }),
      ];
      const result = report({
        lines,
        records: [...records, ...more],
        toS: 8,
        outages: [{ fromMs: at(5.5), toMs: at(7.2), reason: 'no-replica' }],
      });
      expect(result.silent).toEqual([`t/a ${iso(3)}`, `t/a ${iso(4)}`, `t/a ${iso(5)}`]);
      expect(result.silentNotRun).toBe(3);
      expect(formatReport(result)).toContain('silent: 3 (not run: 3)');
      expect(reportFailures(result).filter((failure) => failure.startsWith('silent'))).toEqual([
        `silent ticks (no outcome logged at info or above): t/a ${iso(3)}, t/a ${iso(4)}, t/a ${iso(5)}`,
      ]);
      expect(reportFailures(result, { silent: false }).some((failure) => failure.startsWith('silent'))).toBe(false);
    });

    it('a tick that ran but whose outcome nobody logged is silent too', () => {
      const { lines, records } = steady('t/a', 3);
      const result = report({ lines, records: records.filter((record) => record['tick'] !== iso(1)), toS: 2 });
      expect(result.silent).toEqual([`t/a ${iso(1)}`]);
      expect(result.silentNotRun).toBe(0);
      expect(result.missed).toEqual([]);
      expect(formatReport(result)).toContain('silent: 1 (not run: 0)');
    });

    it('an outcome only the tick history holds (its recorder died before logging it) is not silent, and is explained as a logged one would be', () => {
      const { lines: steadyLines, records } = steady('t/a', 3);
      // Tick 3 was skipped while tick 2's run (2.05-3.5 s) held the lease; tick 4's record is a gap (no replica ran).
      const lines = [...steadyLines.filter((line) => !line.includes(iso(2))), ...run('t/a', 2, 3, 2.05, 3.5)];
      const history = [
        {
          schedule: 't/a',
          tick: iso(3),
          tickMs: at(3),
          outcome: 'skipped-overlap',
          reason: "another run holds the schedule's lease",
          lagMs: 20,
          replica: 'r2',
        },
        {
          schedule: 't/a',
          tick: iso(4),
          tickMs: at(4),
          outcome: 'missed',
          reason: 'no-replica',
          lagMs: 9000,
          replica: 'r1',
          gap: { firstTickMs: at(4), count: 1, atLeast: false },
        },
        { schedule: 't/a', tick: iso(1), tickMs: at(1), outcome: 'enqueued', lagMs: 5, replica: 'r1' },
      ];
      const result = report({
        lines,
        records,
        toS: 4,
        history,
        outages: [{ fromMs: at(3.9), toMs: at(4.5), reason: 'no-replica' }],
      });
      expect(result.silent).toEqual([]);
      expect(result.historyOnly).toEqual([`t/a ${iso(3)}`]);
      expect(result.skipped).toEqual([`t/a ${iso(3)}`]);
      // Logged and in the history: one enqueue.
      expect(result.duplicates).toEqual([]);
      expect(formatReport(result)).toContain(
        `recorded only in the tick history (the recorder died before logging): t/a ${iso(3)}`,
      );
      expect(report({ lines, records, toS: 3 }).silent).toEqual([`t/a ${iso(3)}`]);
    });

    it('a worker outcome counts as much as a scheduler one', () => {
      const lines = run('t/a', 0, 1, 0.05, 0.2);
      const result = report({
        lines,
        records: [
          {
            level: INFO,
            worker: 'w-1',
            schedule: 't/a',
            tick: iso(0),
            jobId: 'j',
            attempt: 1,
            fence: 1,
            outcome: 'succeeded',
          },
        ],
        toS: 0,
      });
      expect(result.silent).toEqual([]);
      expect(formatReport(result)).toContain('silent: 0');
    });
  });

  it("a run whose program started before its tick (the ledger's true clock) fails the run, whatever any process's clock said", () => {
    const { lines, records } = steady('t/a', 5);
    lines.push(...run('t/a', 5, 6, 4.2, 4.3));
    records.push(outcome('t/a', 5, 'enqueued'));
    const result = report({ lines, records, schedules: [EVERY_SECOND], toS: 5 });
    expect(result.startedEarly).toEqual([`t/a ${iso(5)} (-800 ms)`]);
    expect(formatReport(result)).toContain('started before their tick: 1');
    expect(reportFailures(result)).toEqual([`runs started before their tick: t/a ${iso(5)} (-800 ms)`]);
  });

  it('a queue Redis down while it was slowed: a tick due up to 1 s plus ten of its round trips before is in flight', () => {
    // Tick 10 due 1.8 s before the queue Redis paused while its links were slowed 50 ms each way: 1 s + 10 x 100 ms covers it.
    const { lines, records } = steady('t/a', 10);
    records.push(outcome('t/a', 10, 'enqueued'));
    const slowed: OutageWindow = {
      fromMs: at(11.8),
      toMs: at(14),
      reason: 'queue-redis-down',
      inFlightMs: queueInFlightMs(50),
    };
    expect(queueInFlightMs(50)).toBe(2000);
    expect(report({ lines, records, toS: 10, outages: [slowed] }).missed).toMatchObject([
      { reason: 'queue-redis-down' },
    ]);
    const { inFlightMs: _, ...plain } = slowed;
    expect(report({ lines, records, toS: 10, outages: [plain] }).missed).toMatchObject([{ reason: 'unexplained' }]);
  });

  describe('start lag: first start minus tick, over ticks due outside outages', () => {
    it('p50, p99 and max; ticks inside an outage are left out; p99 above leaseTtl + 1 s fails the run', () => {
      const lines: string[] = [];
      const records: LogRecord[] = [];
      // 200 ticks: 100 ms late, but one 3.5 s late, and one 20 s late inside an outage (left out, with the next one: the slack).
      for (let s = 0; s < 200; s++) {
        const lagS = s === 40 ? 3.5 : s === 70 ? 20 : 0.1;
        lines.push(...run('t/a', s, 10 * (s + 1), s + lagS, s + lagS + 0.1));
        // A retry of tick 10 (attempts 2), later, its fence in tick 10's slot: the first start counts.
        if (s === 10) lines.push(...run('t/a', 10, 115, 230, 230.1, 2));
        records.push(outcome('t/a', s, 'enqueued'));
      }
      const schedules = [{ ...EVERY_SECOND, attempts: 2 }];
      const outage: OutageWindow = { fromMs: at(69.5), toMs: at(69.8), reason: 'no-lock-majority' };
      const result = report({ lines, records, schedules, toS: 199, outages: [outage] });
      expect(result.startLag).toMatchObject({
        count: 198,
        p50Ms: 100,
        p99Ms: 100,
        maxMs: 3500,
        minMs: 100,
        targetMs: 3000,
      });
      expect(result.startLag.latest[0]).toEqual({ tick: `t/a ${iso(40)}`, lagMs: 3500 });
      expect(formatReport(result)).toContain(
        'start lag: p50 100 ms, p99 100 ms, max 3500 ms, min 100 ms (198 runs due outside outages; p99 target 3000 ms)',
      );
      expect(result.startLag.earliest[0]).toEqual({ tick: `t/a ${iso(0)}`, lagMs: 100 });
      expect(reportFailures(result)).toEqual([]);

      // Two more late runs: 3 of 200 are late, so p99 is.
      const late = [...lines, ...run('t/a', 200, 2010, 204, 204.1), ...run('t/a', 201, 2020, 204.8, 205)];
      const slow = report({
        lines: late,
        records: [...records, outcome('t/a', 200, 'enqueued'), outcome('t/a', 201, 'enqueued')],
        schedules,
        toS: 201,
        outages: [outage],
      });
      expect(slow.startLag).toMatchObject({ count: 200, p99Ms: 3500, maxMs: 4000 });
      expect(reportFailures(slow)).toEqual([
        `start lag p99 3500 ms is above 3000 ms (leaseTtl + 1 s); latest: t/a ${iso(200)} +4000 ms, t/a ${iso(201)} +3800 ms, t/a ${iso(40)} +3500 ms, t/a ${iso(0)} +100 ms, t/a ${iso(1)} +100 ms`,
      ]);
      expect(reportFailures(slow, { startLag: false })).toEqual([]);
    });
  });

  describe('a tick a killed or paused worker held: outside the start lag, bounded by its fault', () => {
    const started = (tickS: number, worker: string, attempt: number, atS: number): LogRecord => ({
      level: INFO,
      schedule: 't/a',
      tick: iso(tickS),
      jobId: `t/a@${at(tickS)}`,
      attempt,
      fence: 1,
      handler: 'command',
      firstStart: attempt === 1,
      process: worker,
      seenMs: at(atS),
    });
    // 100 ticks on time; tick 10 taken by worker-1, paused at 10.05 s for 4.5 s; tick 20 lost with worker-2 killed at 20.1 s and re-run on worker-1 after the stall check.
    const lines: string[] = [];
    const records: LogRecord[] = [];
    for (let s = 0; s < 100; s++) {
      const lagS = s === 10 ? 4.6 : s === 20 ? 9 : 0.1;
      lines.push(...run('t/a', s, s + 1, s + lagS, s + lagS + 0.1, s === 20 ? 2 : 1));
      records.push(outcome('t/a', s, 'enqueued'));
    }
    records.push(started(10, 'worker-1', 1, 14.6), started(20, 'worker-1', 2, 29));
    const faults: WorkerFaultWindow[] = [
      { worker: 'worker-1', kind: 'pause', fromMs: at(10.05), toMs: at(14.55) },
      { worker: 'worker-2', kind: 'kill', fromMs: at(20.1), toMs: at(23) },
    ];

    it('held: the run started on the paused worker, or on a later attempt after a kill; listed apart, not in the lag', () => {
      const result = report({ lines, records, toS: 99, workerFaults: faults });
      expect(result.heldByWorkerFault.map((held) => [held.tick, held.worker, held.lagMs])).toEqual([
        [`t/a ${iso(10)}`, 'worker-1', 4600],
        [`t/a ${iso(20)}`, 'worker-2', 9000],
      ]);
      expect(result.startLag).toMatchObject({ count: 98, maxMs: 100 });
      expect(formatReport(result)).toContain('held by a killed or paused worker: 2 (lag max 9000 ms)');
      expect(reportFailures(result)).toEqual([]);
      // Without the fault windows both count, and p99 fails.
      expect(report({ lines, records, toS: 99 }).startLag).toMatchObject({ count: 100, p99Ms: 4600 });
    });

    it('not held: a run on a healthy worker at attempt 1, or a fault after the start', () => {
      const healthy = records.map((record) =>
        record['process'] === 'worker-1' && record['tick'] === iso(10) ? { ...record, process: 'worker-2' } : record,
      );
      expect(
        report({ lines, records: healthy, toS: 99, workerFaults: faults }).heldByWorkerFault.map((held) => held.tick),
      ).toEqual([`t/a ${iso(20)}`]);
      const later: WorkerFaultWindow[] = [{ worker: 'worker-2', kind: 'kill', fromMs: at(30), toMs: at(31) }];
      expect(report({ lines, records, toS: 99, workerFaults: later }).heldByWorkerFault).toEqual([]);
      // A killed worker restarted under the same name takes fresh jobs: its attempt-1 runs were held by nothing.
      const restarted = records.map((record) =>
        record['process'] === 'worker-1' && record['tick'] === iso(10) ? { ...record, process: 'worker-2' } : record,
      );
      const killed: WorkerFaultWindow[] = [{ worker: 'worker-2', kind: 'kill', fromMs: at(10.05), toMs: at(11) }];
      expect(report({ lines, records: restarted, toS: 99, workerFaults: killed }).heldByWorkerFault).toEqual([]);
    });

    it('held past the fault, a lease TTL and WORKER_RECOVERY_MS fails the run', () => {
      // Tick 20's run started at 40 s instead, its fence still in tick 20's slot.
      const stuck = lines.flatMap((line) =>
        !line.includes(iso(20)) ? [line] : line.includes(' start ') ? run('t/a', 20, 21, 40, 40.1, 2) : [],
      );
      const result = report({
        lines: stuck,
        records: records.map((record) =>
          record['tick'] === iso(20) && record['process'] ? { ...record, seenMs: at(40) } : record,
        ),
        toS: 99,
        workerFaults: faults,
      });
      expect(result.heldByWorkerFault.find((held) => held.tick === `t/a ${iso(20)}`)).toMatchObject({
        lagMs: 20000,
        overdueMs: 4000,
      });
      expect(reportFailures(result)).toEqual([
        `held by a faulted worker past 11000 ms after the fault and a lease TTL: t/a ${iso(20)} (worker-2, +20000 ms)`,
      ]);
    });
  });

  it('a tick recorded worker-lost and never run is lost with its worker only when the worker that started it was killed or paused soon after', () => {
    const lines = run('t/a', 0, 1, 0.05, 0.2);
    const records = [
      outcome('t/a', 0, 'enqueued'),
      outcome('t/a', 1, 'enqueued'),
      startedOn('worker-1'),
      outcome('t/a', 1, 'worker-lost', { level: 50 }),
    ];
    const killed = (worker: string, fromS: number): WorkerFaultWindow => ({
      worker,
      kind: 'kill',
      fromMs: at(fromS),
      toMs: at(fromS + 2),
    });
    const lost = report({ lines, records, toS: 1, workerFaults: [killed('worker-1', 1.1)] });
    expect(lost.lostWithWorker).toEqual([`t/a ${iso(1)}`]);
    expect(lost.missed).toEqual([]);
    expect(formatReport(lost)).toContain(
      'lost with their worker before the program wrote (worker-lost, not run again): 1',
    );
    // Another worker's fault, or none near the start: the record explains nothing.
    expect(
      report({ lines, records, toS: 1, workerFaults: [killed('worker-2', 1.1)] }).missed.map((miss) => miss.reason),
    ).toEqual(['unexplained']);
    expect(
      report({ lines, records, toS: 1, workerFaults: [killed('worker-1', 30)] }).missed.map((miss) => miss.reason),
    ).toEqual(['unexplained']);
  });

  it('a tick enqueued by two winners is a duplicate', () => {
    const lines = run('t/a', 0, 1, 0.05, 0.2);
    const records = [outcome('t/a', 0, 'enqueued'), outcome('t/a', 0, 'recovered')];
    const result = report({ lines, records, toS: 0 });
    expect(result.duplicates).toEqual([`t/a ${iso(0)}`]);
    expect(reportFailures(result)).toEqual([`enqueued twice: t/a ${iso(0)}`]);
    expect(formatReport(result)).toContain('duplicates: 1');
  });

  it('a tick whose run started on a worker killed soon after, and whose job an empty restart then lost, is lost with its worker', () => {
    const lines = run('t/a', 0, 1, 0.05, 0.2);
    const records = [outcome('t/a', 0, 'enqueued'), outcome('t/a', 1, 'enqueued'), startedOn('worker-1')];
    const killed: WorkerFaultWindow = { worker: 'worker-1', kind: 'kill', fromMs: at(1.1), toMs: at(3) };
    expect(report({ lines, records, toS: 1, workerFaults: [killed], queueWipesS: [5] }).lostWithWorker).toEqual([
      `t/a ${iso(1)}`,
    ]);
    // No wipe after the start: BullMQ's stall check would have recorded it, and nothing did.
    expect(report({ lines, records, toS: 1, workerFaults: [killed] }).missed.map((miss) => miss.reason)).toEqual([
      'unexplained',
    ]);
    expect(
      report({ lines, records, toS: 1, workerFaults: [killed], queueWipesS: [0.5] }).missed.map((miss) => miss.reason),
    ).toEqual(['unexplained']);
  });

  it('a tick published again after the queue Redis came back empty is no duplicate; a line that found it published is no publication', () => {
    const lines = run('t/a', 0, 1, 0.05, 0.2);
    const published = (name: string, atS: number, extra: LogRecord = {}) =>
      outcome('t/a', 0, name, { seenMs: at(atS), ...extra });
    const wiped = report({
      lines,
      records: [published('enqueued', 0), published('recovered', 5)],
      toS: 0,
      queueWipesS: [2],
    });
    expect(wiped.duplicates).toEqual([]);
    // A wipe before both, or none between them, justifies nothing.
    expect(
      report({ lines, records: [published('enqueued', 3), published('recovered', 5)], toS: 0, queueWipesS: [2] })
        .duplicates,
    ).toEqual([`t/a ${iso(0)}`]);
    // Found on the lock nodes after the wipe (its claim started): a record, not a second job.
    const found = report({
      lines,
      records: [published('enqueued', 0), published('enqueued', 5, { found: true })],
      toS: 0,
    });
    expect(found.duplicates).toEqual([]);
    expect(found.enqueued).toBe(1);
  });

  it("a tick whose handler started more often than its schedule's attempts is a duplicate, whatever the attempt numbers; within its attempts it is a re-run", () => {
    // Attempt 1 ended (its end lost with its worker), attempt 2 ran it again.
    const lines = [...run('t/a', 0, 1, 0.05, 0.2, 1), ...run('t/a', 0, 2, 3, 3.2, 2)];
    const records = [outcome('t/a', 0, 'enqueued'), outcome('t/a', 0, 'worker-lost')];
    const once = report({ lines, records, toS: 0 });
    expect(once.startedTooOften).toEqual([`t/a ${iso(0)}`]);
    expect(once.duplicates).toEqual([`t/a ${iso(0)}`]);
    expect(reportFailures(once, { startLag: false })).toEqual([
      `started more often than the schedule's attempts: t/a ${iso(0)}`,
    ]);
    expect(formatReport(once)).toContain('started more often than attempts allow: 1');
    const twice = report({ lines, records, toS: 0, schedules: [{ ...EVERY_SECOND, attempts: 2 }] });
    expect(twice.startedTooOften).toEqual([]);
    expect(twice.rerunsAfterCompletion).toEqual([`t/a ${iso(0)}`]);
    expect(reportFailures(twice, { startLag: false })).toEqual([]);
  });

  it('counts watchdog aborts by outcome and keeps their margins', () => {
    const lines = run('t/a', 0, 1, 0.05);
    const records = [
      outcome('t/a', 0, 'enqueued'),
      outcome('t/a', 0, 'aborted-lease-lost', { level: 50 }),
      { level: 40, validityLeftMs: 180, msg: 'lease watchdog aborted a run' },
    ];
    const result = report({ lines, records, toS: 0 });
    expect(result.watchdogAborts).toBe(1);
    expect(formatReport(result)).toContain(
      'watchdog aborts: 1 (validity left at abort: min 180 ms, median 180 ms; after the lease lapsed, i.e. the worker was paused: 0)',
    );
  });
});
