import { sleep } from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLedgerSystem, expectSafe, type LedgerSystem } from './support.ts';

describe('3 schedulers, 2 workers, 5 lock nodes, undisturbed', () => {
  let system: LedgerSystem;
  beforeAll(async () => {
    system = await startLedgerSystem({ names: ['alpha', 'beta'], schedulers: 3, workers: 2 });
  });
  afterAll(() => system?.close());

  it(
    '60 ticks per schedule: each ran exactly once, no overlap, fences strictly increase',
    { timeout: 150_000 },
    async () => {
      const from = Date.now() + 1000;
      await sleep(61_000);
      const to = Date.now() - 1500;
      const report = await system.settle(from, to);
      expect(report.expected).toBeGreaterThanOrEqual(2 * 58);
      expect(report.run).toBe(report.expected);
      expect(report.enqueued).toBe(report.expected);
      expect(report.missed).toEqual([]);
      expectSafe(report);
      // Every process drains on SIGTERM.
      for (const app of system.cluster.running())
        expect((await system.cluster.stopApp(app.name)).code, app.name).toBe(0);
    },
  );
});
