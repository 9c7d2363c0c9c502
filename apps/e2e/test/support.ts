import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sleep } from '@tickwarden/testkit';
import { expect } from 'vitest';
import {
  buildReport,
  Cluster,
  formatReport,
  ledgerSchedules,
  ledgerTeamYaml,
  reportFailures,
  type LedgerTeamOptions,
  type OutageWindow,
  type TickReport,
} from '../src/index.ts';

export const TEAM = 'e2e';

/** A cluster whose schedules write one ledger, and the checks over it. */
export interface LedgerSystem {
  cluster: Cluster;
  ledgerFile: string;
  /** Builds the report for ticks in [fromMs, toMs] once the ledger has settled. */
  report(fromMs: number, toMs: number, outages?: OutageWindow[]): TickReport;
  /** Waits until every tick in [fromMs, toMs] ran (or `timeoutMs` passed), then returns the report. */
  settle(fromMs: number, toMs: number, outages?: OutageWindow[], timeoutMs?: number): Promise<TickReport>;
  close(): Promise<void>;
}

export async function startLedgerSystem(
  options: {
    names: string[];
    schedulers: number;
    workers: number;
    schedulerEnv?: Record<string, string>;
    /** Apps whose wall clock follows a libfaketime file (`clockFile`), stepped with `writeClockOffset`. */
    clocked?: string[];
  } & Partial<LedgerTeamOptions>,
): Promise<LedgerSystem> {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-e2e-'));
  const configDir = path.join(dir, 'config');
  mkdirSync(configDir);
  const ledgerFile = path.join(dir, 'ledger.txt');
  writeFileSync(path.join(configDir, `${TEAM}.yaml`), ledgerTeamYaml({ team: TEAM, ledgerFile, ...options }));
  const cluster = await Cluster.start({ configDir, roleEnv: { scheduler: options.schedulerEnv ?? {} } });
  const clocked = (name: string) =>
    options.clocked?.includes(name) ? { clockFile: path.join(dir, `clock-${name}.rc`) } : {};
  await Promise.all([
    ...Array.from({ length: options.schedulers }, (_, i) =>
      cluster.startApp('scheduler', `scheduler-${i + 1}`, clocked(`scheduler-${i + 1}`)),
    ),
    ...Array.from({ length: options.workers }, (_, i) =>
      cluster.startApp('worker', `worker-${i + 1}`, clocked(`worker-${i + 1}`)),
    ),
  ]);
  const schedules = ledgerSchedules(TEAM, options.names, options.cron, options.leaseTtl, options.attempts);
  const report = (fromMs: number, toMs: number, outages: OutageWindow[] = []): TickReport =>
    buildReport({ ledgerFile, records: cluster.records(), schedules, fromMs, toMs, outages });
  return {
    cluster,
    ledgerFile,
    report,
    async settle(fromMs, toMs, outages = [], timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      let result = report(fromMs, toMs, outages);
      while (result.run < result.expected && Date.now() < deadline) {
        await sleep(500);
        result = report(fromMs, toMs, outages);
      }
      await sleep(1000); // runs in flight finish (their end lines count)
      return report(fromMs, toMs, outages);
    },
    async close() {
      await cluster.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The run's safety: no duplicate, overlap, fence regression or unexplained miss (the report is
 * printed on failure). Silent ticks and start lag are the chaos suite's: these tests log at
 * debug and time their faults by hand.
 */
export function expectSafe(report: TickReport): void {
  expect(reportFailures(report, { silent: false, startLag: false }), formatReport(report).join('\n')).toEqual([]);
}
