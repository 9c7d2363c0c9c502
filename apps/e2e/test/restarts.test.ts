import { sleep, waitUntil } from '@tickwarden/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { checkLedger, readLedger } from '../src/index.ts';
import { expectSafe, startLedgerSystem, type LedgerSystem } from './support.ts';

describe('scheduler and worker processes restarted, killed and paused', () => {
  let system: LedgerSystem | undefined;
  afterEach(async () => {
    await system?.close();
    system = undefined;
  });

  // Five processes drained and started one after another: on a loaded machine that alone can take a minute.
  it(
    'a rolling restart of the schedulers, then of the workers: no tick missed, none duplicated',
    { timeout: 150_000 },
    async () => {
      system = await startLedgerSystem({ names: ['alpha', 'beta'], schedulers: 3, workers: 2 });
      const { cluster } = system;
      const from = Date.now() + 1000;
      await sleep(2000);
      for (const role of ['scheduler', 'worker'] as const) {
        for (const app of cluster.running(role)) {
          expect((await cluster.stopApp(app.name)).code, `${app.name} drains on SIGTERM`).toBe(0);
          await cluster.startApp(role, `${app.name}-next`);
          await sleep(1000);
        }
      }
      await sleep(2000);
      const to = Date.now() - 1500;
      const report = await system.settle(from, to);
      expect(report.missed).toEqual([]);
      // Every tick ran, or was skipped because its schedule's previous run still held the lease
      // (`overlap: skip`, logged): on a loaded machine a 0.35 s run can outlast its 1 s period.
      // A few such skips are by design; many would mean leases outliving their runs.
      expect(report.run + report.skipped.length).toBe(report.expected);
      expect(report.skipped.length).toBeLessThanOrEqual(report.expected / 10);
      expectSafe(report);
    },
  );

  it('a scheduler killed with SIGKILL, another paused with SIGSTOP longer than the lease TTL then resumed: no duplicate, no miss', async () => {
    system = await startLedgerSystem({ names: ['alpha', 'beta'], schedulers: 3, workers: 2 });
    const { cluster } = system;
    const from = Date.now() + 1000;
    await sleep(2000);
    cluster.app('scheduler-1').process.signal('SIGKILL');
    await sleep(2000);
    const paused = cluster.app('scheduler-2').process;
    paused.signal('SIGSTOP');
    await sleep(3500); // lease TTL 2 s
    paused.signal('SIGCONT');
    await sleep(4000);
    const to = Date.now() - 1500;
    const report = await system.settle(from, to);
    expect(report.missed).toEqual([]);
    expectSafe(report);
    // The resumed replica found its ticks decided: it logged them as lost or late, never enqueued one twice.
    expect(report.duplicates).toEqual([]);
  });

  it(
    'a worker killed mid-run: the run is retried only after its lease is gone, never overlapping',
    { timeout: 180_000 },
    async () => {
      // A run that would write for about 50 s (900 beats): longer than the lease TTL (2 s, extended by the
      // watchdog) and than BullMQ's stalled re-run takes (the dead worker's job lock, at least 30 s), so a
      // command that outlived its worker would still be writing when the retry starts - the ledger would
      // show the overlap. The schedulers claim each tick when due (no contest lead) and stop right after the
      // kill: no later tick is claimed, so none competes for the lease (a later tick's run would supersede the retry).
      system = await startLedgerSystem({
        names: ['long'],
        schedulers: 2,
        workers: 2,
        cron: '*/5 * * * * *',
        beats: 900,
        // The retry is what this test checks: the schedule asks for one, as a team would.
        attempts: 3,
        schedulerEnv: { TICKWARDEN_CONTEST_LEAD: '0s' },
      });
      const { cluster, ledgerFile } = system;
      const runStarted = (): { process: string; tick: string } | undefined => {
        const record = cluster.records().find((r) => r['msg'] === 'run started' && r['attempt'] === 1);
        return record ? { process: record.process, tick: String(record['tick']) } : undefined;
      };
      await waitUntil(() => runStarted() !== undefined, 'a run started', { timeoutMs: 15_000 });
      const victim = runStarted();
      if (!victim) throw new Error('unreachable');
      // Until the command is beating (attempt 1 wrote its start, then a beat): killed before its start,
      // the tick's runs would not be [1, 2].
      await waitUntil(
        () =>
          readLedger(ledgerFile).lines.some(
            (line) => line.tick === victim.tick && line.attempt === 1 && line.event === 'beat',
          ),
        'the command beating',
        { timeoutMs: 15_000 },
      );
      cluster.app(victim.process).process.signal('SIGKILL');
      await Promise.all(cluster.running('scheduler').map((app) => cluster.stopApp(app.name)));
      // BullMQ's stalled check hands the job to the other worker once the dead worker's job lock (at least 30 s) expired;
      // the lease decides when it may start.
      await waitUntil(
        () =>
          cluster
            .records()
            .some((r) => r['msg'] === 'run started' && r['tick'] === victim.tick && Number(r['attempt']) > 1),
        'the retry started',
        { timeoutMs: 110_000 },
      ).catch((error: unknown) => {
        const seen = cluster
          .records()
          .filter((r) => r['tick'] === victim.tick || (r['process'] !== victim.process && Number(r['level']) >= 40));
        throw new Error(
          `${(error as Error).message}; what the processes logged for that tick, and their warnings:\n${seen.map((r) => JSON.stringify(r)).join('\n')}`,
        );
      });
      await sleep(3000);
      const report = system.report(Date.parse(victim.tick), Date.parse(victim.tick));
      expect(report.run).toBe(1);
      const runs = checkLedger(readLedger(system.ledgerFile)).runs.filter((run) => run.tick === victim.tick);
      expect(runs.map((run) => run.attempt)).toEqual([1, 2]);
      expectSafe(report);
    },
  );
});
