import { describe, expect, it } from 'vitest';
import {
  HoldLimitReachedError,
  LeaseLostError,
  resourceKeys,
  type RedlockError,
  type RedlockEvents,
} from '../src/index.ts';
import { connectedRedlockOn, inspect, redlockOn, sleep, TestClock, useNodes } from './support.ts';

function abortedWith(signal: AbortSignal): Promise<RedlockError> {
  return new Promise((resolve) =>
    signal.addEventListener('abort', () => resolve(signal.reason as RedlockError), { once: true }),
  );
}

describe.each([3, 5])('watchdog with %i nodes', (count) => {
  const cluster = useNodes(count);
  const majority = Math.floor(count / 2) + 1;

  it('keeps a lease alive well past its TTL and releases it afterwards', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { abortMarginMs: 50 });
    let extensions = 0;
    redlock.on('extended', () => extensions++);
    // 1.5 s TTL, extended every 500 ms: a TTL of 600 ms is within reach of event-loop stalls in a loaded CI run.
    const result = await redlock.using('long-run', 1500, async (signal) => {
      await sleep(3500);
      expect(signal.aborted, `aborted: ${String(signal.reason)}`).toBe(false);
      return 'done';
    });
    expect(result).toBe('done');
    expect(extensions).toBeGreaterThanOrEqual(3);
    // Released: another holder gets it at once.
    const other = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    await other.release(await other.acquire('long-run', 600));
  });

  it('the majority paused: aborts before the validity ends, saying why, with per-node causes', async () => {
    // A 400 ms margin: an abort timer firing late on a loaded machine still leaves validity.
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 100, abortMarginMs: 400 });
    const aborts: { validityLeftMs: number }[] = [];
    redlock.on('aborted', (event) => aborts.push(event));
    const paused = cluster.nodes.nodes.slice(0, majority);
    let reason: RedlockError | undefined;
    try {
      await redlock.using('paused-majority', 1200, async (signal) => {
        await sleep(50);
        for (const node of paused) await node.pause();
        reason = await abortedWith(signal);
      });
    } finally {
      for (const node of paused) await node.resume();
    }
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(reason?.code).toBe('LEASE_LOST');
    expect(aborts).toHaveLength(1);
    expect(aborts[0]?.validityLeftMs).toBeGreaterThan(0);
  });

  it('a release that fails on a majority (paused as the routine ends) is told, with the validity left; a full one, or one the majority answered not-held, is not', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 100 });
    const events: RedlockEvents['unreleased'][0][] = [];
    redlock.on('unreleased', (event) => events.push(event));
    await redlock.using('released', 2000, () => Promise.resolve());
    expect(events).toEqual([]);
    const paused = cluster.nodes.nodes.slice(0, majority);
    let fence = 0;
    try {
      await redlock.using('unreleased', 2000, async (_signal, lease) => {
        fence = lease.fence;
        for (const node of paused) await node.pause();
      });
    } finally {
      for (const node of paused) await node.resume();
    }
    expect(events).toEqual([
      {
        resource: 'unreleased',
        fence,
        released: expect.any(Array) as string[],
        validityMs: expect.any(Number) as number,
      },
    ]);
    expect(events[0]?.released).toHaveLength(count - majority);
    expect(events[0]?.validityMs).toBeGreaterThan(0);
    expect(events[0]?.validityMs).toBeLessThan(2000);
    // Released on a minority while the majority no longer held it (lapsed there): nothing blocks, nothing is told.
    const { lock } = resourceKeys('tickwarden', 'lapsed');
    await redlock.using('lapsed', 2000, async () => {
      for (const node of paused) await inspect(node.url, (client) => client.del(lock));
    });
    expect(events).toHaveLength(1);
  });

  it('a partition leaving the holder a minority: abort fires while validity is left (measured)', async () => {
    const link = await cluster.nodes.link(`holder-${count}`);
    // A 300 ms margin: an abort timer firing late on a loaded machine still leaves validity, and comes within the TTL.
    const redlock = redlockOn(link.urls, { nodeTimeoutMs: 100, abortMarginMs: 300 });
    const aborts: { validityLeftMs: number }[] = [];
    redlock.on('aborted', (event) => aborts.push(event));
    let cutAt = 0;
    let validUntil = 0;
    let abortAt = 0;
    await redlock.using('partitioned', 900, async (signal, lease) => {
      await sleep(100);
      validUntil = lease.validUntil;
      link.partition(Array.from({ length: majority }, (_, i) => i));
      cutAt = performance.now();
      await abortedWith(signal);
      abortAt = performance.now();
    });
    link.heal();
    expect(aborts[0]?.validityLeftMs).toBeGreaterThan(0);
    // Losing the majority to the abort took less than the validity left at the cut (it may have been extended since).
    expect(abortAt - cutAt).toBeLessThan(Math.max(validUntil - cutAt, 0) + 900);
    expect(abortAt).toBeLessThan(cutAt + 900);
  });

  it('a node restarted empty during the hold: the run continues and the key is back on that node', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { abortMarginMs: 50 });
    const node = cluster.nodes.node(count - 1);
    const lock = resourceKeys('tickwarden', 'restart-during-hold').lock;
    // A 1.5 s TTL (extended every 500 ms): a shorter one was aborted by event-loop stalls in a loaded CI run, not by the restart.
    const outcome = await redlock.using('restart-during-hold', 1500, async (signal, lease) => {
      await node.restart({ keepData: false });
      await sleep(1600);
      return {
        aborted: signal.aborted,
        reason: signal.reason as unknown,
        onRestarted: await inspect(node.url, (c) => c.get(lock)),
        value: lease.value,
      };
    });
    expect(outcome.aborted, `aborted: ${String(outcome.reason)}`).toBe(false);
    expect(outcome.onRestarted).toBe(outcome.value);
  });

  it('caps the hold at maxHoldMs', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { maxHoldMs: 250, abortMarginMs: 50 });
    const reason = await redlock.using('capped', 600, (signal) => abortedWith(signal));
    expect(reason).toBeInstanceOf(HoldLimitReachedError);
  });

  it('returns the routine error as is, and still releases', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { abortMarginMs: 50 });
    const failure = new Error('job failed');
    await expect(redlock.using('throws', 600, async () => Promise.reject(failure))).rejects.toBe(failure);
    const other = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    await other.release(await other.acquire('throws', 600));
  });

  it('leaves no timer behind, also when an extension is in flight as the routine ends', async () => {
    const clock = new TestClock();
    const link = await cluster.nodes.link(`timers-${count}`);
    const redlock = redlockOn(link.urls, { clock, nodeTimeoutMs: 100, abortMarginMs: 50 });
    await redlock.using('timers', 300, async () => sleep(150));
    expect(clock.live.size).toBe(0);
    let extending = false;
    redlock.on('extended', () => (extending = false));
    redlock.on('extensionFailed', () => (extending = false));
    await redlock.using('timers-inflight', 300, async () => {
      // The first extension fires at 100 ms; slow every node so it is still in flight at 130 ms.
      for (let i = 0; i < count; i++) link.setFault(i, { kind: 'latency', ms: 60 });
      await sleep(130);
      extending = true;
    });
    link.heal();
    expect(extending).toBe(false);
    expect(clock.live.size).toBe(0);
  });
});
