import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildReport, expectedTicks, formatReport, reportFailures } from '../src/index.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-report-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const T0 = Date.UTC(2030, 0, 1, 0, 0, 0);
const iso = (s: number): string => new Date(T0 + s * 1000).toISOString();

function ledger(lines: string[]): string {
  const file = path.join(dir, `ledger-${Math.random()}.txt`);
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

describe('the run report', () => {
  it('expects every cron tick in the window, bounds included', () => {
    expect(expectedTicks([{ id: 't/a', cron: '*/2 * * * * *' }], T0, T0 + 4000)).toEqual([`t/a ${iso(0)}`, `t/a ${iso(2)}`, `t/a ${iso(4)}`]);
  });

  it('a tick that never ran is allowed inside an outage, skipped when a process logged the skip, and otherwise fails the run', () => {
    const ledgerFile = ledger([`t/a ${iso(0)} 1 1 start 9`, `t/a ${iso(0)} 1 1 end 9`]);
    const records = [
      { schedule: 't/a', tick: iso(0), outcome: 'enqueued' },
      { schedule: 't/a', tick: iso(1), outcome: 'skipped-overlap' },
    ];
    const report = buildReport({ ledgerFile, records, schedules: [{ id: 't/a', cron: '* * * * * *' }], fromMs: T0, toMs: T0 + 3000, outages: [{ fromMs: T0 + 2000, toMs: T0 + 2500, reason: 'no-lock-majority' }] });
    expect(report.skipped).toEqual([`t/a ${iso(1)}`]);
    expect(report.missed).toEqual([
      { tick: `t/a ${iso(2)}`, reason: 'no-lock-majority' },
      { tick: `t/a ${iso(3)}`, reason: 'no-lock-majority' }, // within the slack after the outage
    ]);
    expect(reportFailures(report)).toEqual([]);
    const later = buildReport({ ledgerFile, records, schedules: [{ id: 't/a', cron: '* * * * * *' }], fromMs: T0, toMs: T0 + 6000, outages: [] });
    expect(reportFailures(later)).toEqual([`unexplained missed ticks: t/a ${iso(2)}, t/a ${iso(3)}, t/a ${iso(4)}, t/a ${iso(5)}, t/a ${iso(6)}`]);
    expect(formatReport(later)).toContain('missed: 5 (allowed: 0)');
  });

  it('a tick due at most 1 s before every replica was down is allowed (in flight on the last one); earlier ones, or before a lock outage, are not', () => {
    const ledgerFile = ledger([`t/a ${iso(0)} 1 1 start 9`, `t/a ${iso(0)} 1 1 end 9`]);
    const schedules = [{ id: 't/a', cron: '* * * * * *' }];
    const run = (reason: 'no-replica' | 'no-lock-majority') =>
      buildReport({ ledgerFile, records: [], schedules, fromMs: T0, toMs: T0 + 3000, outages: [{ fromMs: T0 + 2600, toMs: T0 + 10_000, reason }] });
    expect(run('no-replica').missed).toEqual([
      { tick: `t/a ${iso(1)}`, reason: 'unexplained' },
      { tick: `t/a ${iso(2)}`, reason: 'no-replica' },
      { tick: `t/a ${iso(3)}`, reason: 'no-replica' },
    ]);
    expect(run('no-lock-majority').missed.map((miss) => miss.reason)).toEqual(['unexplained', 'unexplained', 'no-lock-majority']);
  });

  it('a tick enqueued by two winners is a duplicate', () => {
    const ledgerFile = ledger([`t/a ${iso(0)} 1 1 start 9`, `t/a ${iso(0)} 1 1 end 9`]);
    const records = [
      { schedule: 't/a', tick: iso(0), outcome: 'enqueued' },
      { schedule: 't/a', tick: iso(0), outcome: 'recovered' },
    ];
    const report = buildReport({ ledgerFile, records, schedules: [{ id: 't/a', cron: '* * * * * *' }], fromMs: T0, toMs: T0, outages: [] });
    expect(report.duplicates).toEqual([`t/a ${iso(0)}`]);
    expect(reportFailures(report)).toEqual([`enqueued twice: t/a ${iso(0)}`]);
    expect(formatReport(report)).toContain('duplicates: 1');
  });
});
