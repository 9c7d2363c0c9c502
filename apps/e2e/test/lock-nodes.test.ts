import { DEFAULT_CONTEST_LEAD_MS } from '@tickwarden/config';
import { sleep } from '@tickwarden/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { expectSafe, startLedgerSystem, type LedgerSystem } from './support.ts';

describe('lock nodes failing under a running system', () => {
  let system: LedgerSystem | undefined;
  afterEach(async () => {
    await system?.close();
    system = undefined;
  });

  it('two of five lock nodes killed, restarted empty after the lease TTL: no duplicate, no miss', async () => {
    system = await startLedgerSystem({ names: ['alpha', 'beta'], schedulers: 3, workers: 2 });
    const { locks } = system.cluster;
    const from = Date.now() + 1000;
    await sleep(2000);
    await Promise.all([locks.node(0).kill(), locks.node(3).kill()]);
    await sleep(4000); // longer than the 2 s lease TTL: the delayed restart Redlock needs without AOF
    await Promise.all([locks.node(0).restart({ keepData: false }), locks.node(3).restart({ keepData: false })]);
    await sleep(4000);
    const to = Date.now() - 1500;
    const report = await system.settle(from, to);
    expect(report.missed).toEqual([]);
    expectSafe(report);
  });

  it('three of five lock nodes down for 5 s: nothing is claimed meanwhile; once they return each tick contested in the outage is recovered, and every tick runs or is skipped by a run, none missed', async () => {
    system = await startLedgerSystem({ names: ['alpha', 'beta'], schedulers: 3, workers: 2 });
    const { cluster } = system;
    const from = Date.now() + 1000;
    await sleep(2000);
    const downAt = Date.now();
    await Promise.all([0, 1, 2].map((i) => cluster.locks.node(i).kill()));
    await sleep(5000);
    const upAt = Date.now();
    await Promise.all([0, 1, 2].map((i) => cluster.locks.node(i).restart({ keepData: true })));
    // The ticks contested in the outage are due up to a contest lead after it: until they ran.
    await sleep(DEFAULT_CONTEST_LEAD_MS + 5000);
    const to = Date.now() - 1500;
    const report = await system.settle(from, to);
    // Safety: no replica logged an enqueue while a majority was down (a contest already in flight may finish within a second).
    const decided = cluster.records().filter((r) => r['outcome'] === 'enqueued' || r['outcome'] === 'recovered');
    expect(decided.filter((r) => Number(r['time']) > downAt + 1000 && Number(r['time']) < upAt)).toEqual([]);
    // Liveness: ticks are claimed a contest lead ahead, so those contested in the outage are due a lead later; the
    // default start deadline (lease TTL + 10 s) outlasts the outage, so each is recovered when the nodes return. The runs
    // due in the outage wait for a quorum (their jobs deferred), then run or are skipped by a run (the report's rules).
    const lead = DEFAULT_CONTEST_LEAD_MS;
    for (const schedule of ['e2e/alpha', 'e2e/beta']) {
      for (let tick = Math.ceil((downAt + lead + 1000) / 1000) * 1000; tick < upAt + lead - 1000; tick += 1000) {
        const iso = new Date(tick).toISOString();
        const outcomes = cluster
          .records()
          .filter((r) => r['schedule'] === schedule && r['tick'] === iso && r['outcome'] === 'recovered');
        expect(outcomes.length, `${schedule} ${iso}`).toBeGreaterThan(0);
      }
    }
    expect(report.missed).toEqual([]);
    expectSafe(report);
  });
});
