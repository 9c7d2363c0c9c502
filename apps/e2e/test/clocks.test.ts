import { sleep } from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeClockOffset } from '../src/index.ts';
import { expectSafe, startLedgerSystem, type LedgerSystem } from './support.ts';

/** The offset the process's /metrics reports, seconds (undefined before a first sample). */
async function clockOffsetOf(port: number): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('tickwarden_clock_offset_seconds '));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

describe("wall clocks stepped tens of seconds on a scheduler and a worker: every decision is on the lock nodes' time", () => {
  let system: LedgerSystem;
  beforeAll(async () => {
    system = await startLedgerSystem({
      names: ['alpha', 'beta'],
      schedulers: 2,
      workers: 2,
      clocked: ['scheduler-2', 'worker-1'],
    });
  });
  afterAll(() => system?.close());

  it(
    'a scheduler 29 s ahead then 20 s behind, a worker 5 s ahead then 15 s behind: every tick ran once, none early, none recorded by the wrong clock',
    { timeout: 150_000 },
    async () => {
      const { cluster } = system;
      const step = (scheduler: number, worker: number): void => {
        writeClockOffset(cluster.app('scheduler-2').clockFile as string, scheduler);
        writeClockOffset(cluster.app('worker-1').clockFile as string, worker);
      };
      const from = Date.now() + 1000;
      await sleep(3000);
      step(29_000, 5000);
      await sleep(5000);
      const ahead = await clockOffsetOf(cluster.app('scheduler-2').httpPort);
      const workerAhead = await clockOffsetOf(cluster.app('worker-1').httpPort);
      await sleep(5000);
      step(0, 0);
      await sleep(3000);
      step(-20_000, -15_000);
      await sleep(10_000);
      step(0, 0);
      await sleep(4000);
      const to = Date.now() - 1500;
      const report = await system.settle(from, to);
      expect(report.run).toBe(report.expected);
      expect(report.missed).toEqual([]);
      expect(report.startedEarly).toEqual([]);
      expectSafe(report);
      expect(ahead).toBeGreaterThan(28.5);
      expect(ahead).toBeLessThan(29.5);
      expect(workerAhead).toBeGreaterThan(4.5);
      expect(workerAhead).toBeLessThan(5.5);
      // What the stepped processes logged: the offset, and no tick outcome but a run's, an enqueue or a skip (the
      // report explains each skip by a run that held the lease: expectSafe).
      const records = cluster.records();
      const of = (name: string) => records.filter((record) => record['process'] === name);
      expect(of('scheduler-2').some((r) => String(r['msg']).startsWith("this host's clock is off"))).toBe(true);
      expect(of('worker-1').some((r) => String(r['msg']).startsWith("this host's clock is off"))).toBe(true);
      const expectedOutcomes = ['enqueued', 'recovered', 'succeeded', 'skipped-overlap'];
      const wrong = records.filter(
        (r) => r['outcome'] !== undefined && !expectedOutcomes.includes(String(r['outcome'])),
      );
      expect(wrong.map((r) => `${String(r['process'])} ${String(r['outcome'])} ${String(r['tick'])}`)).toEqual([]);
      // No worker made a job ready before its tick (BullMQ's promotion runs on the lock nodes' time too), so none was put back.
      expect(records.filter((r) => String(r['msg']).startsWith('job ready before its due time'))).toEqual([]);
    },
  );
});
