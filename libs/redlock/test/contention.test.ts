import { describe, expect, it } from 'vitest';
import { LockTakenError, resourceKeys } from '../src/index.ts';
import { onEveryNode, redlockOn, sleep, useNodes } from './support.ts';

describe('20 contenders on one resource', () => {
  const cluster = useNodes(5);

  it('never two holders at once, and no contender starves (default retry settings)', async () => {
    const contenders = Array.from({ length: 20 }, () =>
      redlockOn(cluster.nodes.urls, { retryDelayMs: 200, retryJitterMs: 100 }),
    );
    let holders = 0;
    let violations = 0;
    let exhausted = 0;
    const wins = new Array<number>(20).fill(0);
    const until = performance.now() + 4000;
    await Promise.all(
      contenders.map(async (redlock, i) => {
        while (performance.now() < until) {
          try {
            const lease = await redlock.acquire('contended', 2000);
            if (++holders > 1) violations++;
            wins[i] = (wins[i] ?? 0) + 1;
            await sleep(2);
            holders--;
            await redlock.release(lease);
          } catch (error) {
            if (!(error instanceof LockTakenError)) throw error;
            exhausted++;
          }
        }
      }),
    );
    expect(violations).toBe(0);
    expect(exhausted).toBe(0);
    expect(wins.every((w) => w > 0)).toBe(true);
  });

  it('a lock reserved for a waiter never fails an acquire that will not retry (retryCount 0 gets it)', async () => {
    const holder = redlockOn(cluster.nodes.urls);
    // Not woken by the release: the lock stays reserved for it until its next attempt, 2 s on (the checks below take less).
    const waiter = redlockOn(cluster.nodes.urls, { retryDelayMs: 2000, retryJitterMs: 0, wakeOnRelease: false });
    const once = redlockOn(cluster.nodes.urls, { retryCount: 0 });
    await once.probe({ nodeTimeoutMs: 5000 }); // connected: its one attempt must not meet a slow first connect
    const lease = await holder.acquire('marked', 5000);
    const waiting = waiter.acquire('marked', 1000); // finds it taken, queues, retries later
    const keys = resourceKeys('tickwarden', 'marked');
    await onEveryNode(cluster.nodes.urls, (c) => c.zcard(keys.queue), 1);
    await holder.release(lease);
    // Decided at a quorum: the other nodes' reservations land after the call returned.
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.lock), '|');
    const got = await once.acquire('marked', 1000);
    await once.release(got);
    await waiter.release(await waiting);
  });
});
