import { describe, expect, it } from 'vitest';
import { handedLease, lostAttempt, type Handoff } from '../src/handoff.ts';
import { FencePassedError, IoredisLockNode, resourceKeys, scripts, type LockNode } from '../src/index.ts';
import type { Redis } from 'ioredis';
import { connectedRedlockOn, inspect, onEveryNode, sleep, useNodes } from './support.ts';

describe('lostAttempt: when an attempt can no longer win', () => {
  it('a node that handed the lock over is a possible win: the attempt waits for the silent nodes', () => {
    // 3 nodes, quorum 2: one handoff heard, one node silent (it may hand the lock over too).
    expect(lostAttempt(0, 1, 1, 2)).toBe(false);
    // Without the handoff, the same votes lose.
    expect(lostAttempt(0, 0, 1, 2)).toBe(true);
  });

  it('lost once neither grants nor handoffs can reach a quorum with the silent nodes', () => {
    expect(lostAttempt(1, 1, 0, 2)).toBe(true);
    expect(lostAttempt(1, 0, 1, 2)).toBe(false);
    expect(lostAttempt(1, 2, 1, 3)).toBe(false);
    expect(lostAttempt(2, 1, 0, 3)).toBe(true);
  });
});

describe('handedLease: the lease that nodes handing the lock over make', () => {
  const of = (entries: [number, Handoff][]) => new Map(entries);

  it('a quorum with one fence makes it; the validity starts at the quorum-th latest `since`', () => {
    const handed = of([
      [0, { fence: 7, since: 100 }],
      [1, { fence: 7, since: 300 }],
      [2, { fence: 7, since: 200 }],
    ]);
    expect(handedLease(handed, 2)).toEqual({ fence: 7, since: 200 });
    expect(handedLease(handed, 3)).toEqual({ fence: 7, since: 100 });
  });

  it('too few nodes, or a quorum only across different fences, make none', () => {
    expect(handedLease(of([[0, { fence: 7, since: 1 }]]), 2)).toBeUndefined();
    const mixed = of([
      [0, { fence: 7, since: 1 }],
      [1, { fence: 8, since: 1 }],
      [2, { fence: 9, since: 1 }],
    ]);
    expect(handedLease(mixed, 2)).toBeUndefined();
    mixed.set(3, { fence: 8, since: 5 });
    expect(handedLease(mixed, 2)).toEqual({ fence: 8, since: 1 });
  });
});

describe('a release hands the lock to the first waiter', () => {
  const cluster = useNodes(3);
  const evalshaCalls = async (): Promise<number> => {
    let calls = 0;
    for (const url of cluster.nodes.urls) {
      const stats = await inspect(url, (c) => c.info('commandstats'));
      calls += Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
    }
    return calls;
  };

  /**
   * Waits until one waiter is queued on every node and listens on its inbox: its first wait
   * subscribes it, and a release before that would reserve the lock instead of handing it over.
   */
  const queuedAndListening = async (queue: string): Promise<void> => {
    await onEveryNode(cluster.nodes.urls, (c) => c.zcard(queue), 1);
    await onEveryNode(
      cluster.nodes.urls,
      async (c) => ((await c.call('PUBSUB', 'CHANNELS', 'tickwarden:inbox:*')) as string[]).length,
      1,
    );
  };

  it('in the release itself: the waiter sends nothing more, and its token is the lease token + 1', async () => {
    const holder = await connectedRedlockOn(cluster.nodes.urls);
    // A retry delay far past the checks: only the handoff can give it the lock in time.
    const waiter = await connectedRedlockOn(cluster.nodes.urls, { retryDelayMs: 5000, retryJitterMs: 0 });
    const keys = resourceKeys('tickwarden', 'hand-over');
    for (let round = 0; round < 3; round++) {
      const lease = await holder.acquire('hand-over', 10_000);
      const waiting = waiter.acquire('hand-over', 10_000);
      await queuedAndListening(keys.queue);
      const before = await evalshaCalls();
      const releasedAt = performance.now();
      await holder.release(lease);
      const got = await waiting;
      expect(performance.now() - releasedAt).toBeLessThan(1000);
      expect(got.fence).toBe(lease.fence + 1);
      // The release on every node (each ran its handoff there) and the reads above: no acquire.
      await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.lock), got.value);
      expect((await evalshaCalls()) - before).toBe(3);
      expect(got.validUntil - performance.now()).toBeLessThanOrEqual(10_000);
      expect(got.validUntil - performance.now()).toBeGreaterThan(9_000);
      await waiter.release(got);
      await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.lock), null);
    }
    // Closed now, not after the file: the waiter's inbox would linger for its retry delay, and the
    // next test waits for exactly one inbox.
    await Promise.all([holder.close(), waiter.close()]);
  });

  it('a waiter with a fence limit is not handed a lock whose fence passed it: it ends FencePassedError, the lock free', async () => {
    const first = await connectedRedlockOn(cluster.nodes.urls);
    // A later tick's first start, which does not queue behind waiters.
    const later = await connectedRedlockOn(cluster.nodes.urls, { yieldToWaiters: false });
    const waiter = await connectedRedlockOn(cluster.nodes.urls, { retryDelayMs: 5000, retryJitterMs: 0 });
    const keys = resourceKeys('tickwarden', 'hand-over-limit');
    // An earlier attempt's lease, below the waiter's limit, lapses (its worker was cut off: no release).
    await first.acquire('hand-over-limit', 400, { fence: { from: 1_000_500 } });
    const waiting = waiter.acquire('hand-over-limit', 10_000, { fence: { from: 1_000_000, below: 1_500_000 } });
    await queuedAndListening(keys.queue);
    await sleep(500);
    // Then a later tick's run takes the lease, and releases it while the waiter is still queued.
    const lease = await later.acquire('hand-over-limit', 10_000, { fence: { from: 2_000_000 }, retryCount: 0 });
    await later.release(lease);
    await expect(waiting).rejects.toBeInstanceOf(FencePassedError);
    await Promise.all([first.close(), later.close(), waiter.close()]);
  });

  it("a takeover of a handed lease by its value is not undone by the first lease's release", async () => {
    const holder = await connectedRedlockOn(cluster.nodes.urls);
    const waiter = await connectedRedlockOn(cluster.nodes.urls, { retryDelayMs: 5000, retryJitterMs: 0 });
    const recovery = await connectedRedlockOn(cluster.nodes.urls);
    const keys = resourceKeys('tickwarden', 'handed-taken-over');
    const lease = await holder.acquire('handed-taken-over', 10_000);
    const waiting = waiter.acquire('handed-taken-over', 10_000);
    await queuedAndListening(keys.queue);
    await holder.release(lease);
    const handed = await waiting;
    const record = resourceKeys('tickwarden', 'handed-taken-over', undefined, handed.value).waiter;
    await onEveryNode(cluster.nodes.urls, (c) => c.get(record), 'handed');
    // A recovery takes the lease over by its value (as a worker takes over a tick's lease): a new fence.
    const takenOver = await recovery.acquire('handed-taken-over', 10_000, { value: handed.value });
    expect(takenOver.fence).toBeGreaterThan(handed.fence);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.fence), String(takenOver.fence));
    // The first lease's release, with its older fence, must leave the takeover's lock alone.
    await waiter.release(handed);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.lock), handed.value);
    await recovery.release(takenOver);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.lock), null);
    await Promise.all([holder.close(), waiter.close(), recovery.close()]);
  });

  it('an attempt that nodes answered `handed` waits for a late node that hands the lock over too', async () => {
    // Its lease value is known in advance (fixed random bytes), so the nodes can be set up for it.
    const value = 'ab'.repeat(20);
    const random = { bytes: (size: number) => Buffer.alloc(size, 0xab), fraction: () => 0.5 };
    const resource = 'handed-late';
    const keys = resourceKeys('tickwarden', resource, undefined, value);
    // Nodes 0 and 1 handed it the lock with fence 700; node 2 holds another lease.
    for (const [i, url] of cluster.nodes.urls.entries())
      await inspect(url, async (c) => {
        await c.set(keys.lock, i < 2 ? value : 'c'.repeat(40), 'PX', 10_000);
        await c.set(keys.fence, '700', 'PX', 60_000);
        if (i < 2) await c.set(keys.waiter, 'handed', 'PX', 10_000);
      });
    // Node 1 answers 150 ms late: deciding at the first two answers (one handed, one taken) would
    // give node 0's handoff back and leave node 1 held for nobody until the retry, 1 s on.
    const nodes = cluster.nodes.urls.map((url, i): LockNode => {
      const inner = IoredisLockNode.fromUrl(url);
      if (i !== 1) return inner;
      return {
        id: inner.id,
        run: async (...args) => {
          const reply = await inner.run(...args);
          await sleep(150);
          return reply;
        },
        close: () => inner.close(),
      };
    });
    const waiter = await connectedRedlockOn(nodes, { random, retryDelayMs: 1000, retryJitterMs: 0 });
    const started = performance.now();
    const lease = await waiter.acquire(resource, 10_000);
    expect(performance.now() - started).toBeLessThan(800);
    expect(lease.fence).toBe(700);
    expect(lease.value).toBe(value);
    await waiter.release(lease);
  });

  it('a waiter that asked for no notifications gets a reservation, which its retry takes', async () => {
    const holder = await connectedRedlockOn(cluster.nodes.urls);
    const waiter = await connectedRedlockOn(cluster.nodes.urls, {
      retryDelayMs: 300,
      retryJitterMs: 0,
      wakeOnRelease: false,
    });
    const keys = resourceKeys('tickwarden', 'no-inbox');
    const lease = await holder.acquire('no-inbox', 10_000);
    const waiting = waiter.acquire('no-inbox', 10_000);
    await onEveryNode(cluster.nodes.urls, (c) => c.zcard(keys.queue), 1);
    await holder.release(lease);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.lock), '|');
    const got = await waiting;
    expect(got.fence).toBeGreaterThan(lease.fence);
    await waiter.release(got);
  });
});

describe('release.lua and leave.lua hand the lock over', () => {
  const cluster = useNodes(1);
  const url = () => cluster.nodes.urls[0] ?? '';
  const base = 'tickwarden:{scripted}:';
  const keys = resourceKeys('tickwarden', 'scripted');
  const inboxes = ['tickwarden:inbox:a', 'tickwarden:inbox:b'];
  const values = ['a'.repeat(40), 'b'.repeat(40)];

  const holder = 'h'.repeat(40);
  const recordOf = (value: string | undefined) => resourceKeys('tickwarden', 'scripted', undefined, value).waiter;

  /**
   * `holder` holds the lock with fence 100; `waiting` lease values queue behind it through acquire.lua
   * itself (a plain call: ttl 5 s, wait 10 s, fence retention 60 s), each with its inbox and a ticket
   * in order.
   */
  async function seed(c: Redis, waiting: readonly { value: string; inbox: string }[]): Promise<void> {
    await c.del(keys.lock, keys.fence, keys.queue, keys.waiters, ...values.map(recordOf));
    await c.set(keys.lock, holder, 'PX', 10_000);
    await c.set(keys.fence, '100', 'PX', 60_000);
    for (const [i, { value, inbox }] of waiting.entries()) {
      const args = ['5000', '10000', '60000', inbox, value, '1', String(i + 1)];
      expect(await c.evalsha(scripts.acquire.sha, 1, base, ...args)).toBe(0);
    }
  }

  /** Two waiters queued in order, each heard on its inbox. */
  async function withQueue<T>(use: (heard: string[]) => Promise<T>): Promise<T> {
    const heard: string[] = [];
    return inspect(url(), async (subscriber) => {
      subscriber.on('message', (_channel: string, message: string) => heard.push(message));
      await subscriber.subscribe(...inboxes);
      return inspect(url(), async (c) => {
        await c.script('LOAD', scripts.acquire.source);
        await seed(
          c,
          values.map((value, i) => ({ value, inbox: inboxes[i] ?? '' })),
        );
        return use(heard);
      });
    });
  }

  const release = (mode: string, value: string, fence: string) =>
    inspect(url(), (c) => c.eval(scripts.release.source, 1, base, mode, value, '', fence));
  const state = () =>
    inspect(url(), async (c) => {
      const lock = await c.get(keys.lock);
      return {
        lock,
        fence: await c.get(keys.fence),
        handed: lock === null || lock === '|' ? null : await c.get(recordOf(lock)),
        queued: (await c.zrange(keys.queue, '0', '-1')).length,
      };
    });

  it("a lease's release hands the first waiter its token + 1, and tells it first", async () => {
    await withQueue(async (heard) => {
      expect(await release('0', holder, '100')).toBe(1);
      expect(await state()).toEqual({ lock: values[0], fence: '101', handed: 'handed', queued: 1 });
      await expect.poll(() => heard).toEqual([`${values[0]}|101`]);
    });
  });

  it('a waiter nobody hears on its inbox (its connection is gone) gets a reservation instead', async () => {
    await inspect(url(), async (c) => {
      await c.script('LOAD', scripts.acquire.source);
      await seed(c, [{ value: values[0] ?? '', inbox: 'tickwarden:inbox:nobody' }]);
    });
    expect(await release('0', holder, '100')).toBe(1);
    expect(await state()).toEqual({ lock: '|', fence: '100', handed: null, queued: 1 });
  });

  it('a waiter whose record expired (it died, or gave up without leaving) is passed over', async () => {
    await withQueue(async () => {
      await inspect(url(), (c) => c.del(recordOf(values[0])));
      expect(await release('0', holder, '100')).toBe(1);
      expect(await state()).toEqual({ lock: values[1], fence: '101', handed: 'handed', queued: 0 });
    });
  });

  it('a handoff given back unused (an acquire that failed) hands the next waiter the same token', async () => {
    await withQueue(async () => {
      await release('0', holder, '100');
      expect(await release('3', values[0] ?? '', '101')).toBe(1);
      expect(await state()).toEqual({ lock: values[1], fence: '101', handed: 'handed', queued: 0 });
    });
  });

  it("a failed attempt's cleanup of a handoff reserves the lock for the next waiter instead", async () => {
    await withQueue(async () => {
      await release('0', holder, '100');
      expect(await release('2', values[0] ?? '', '101')).toBe(1);
      expect((await state()).lock).toBe('|');
    });
  });

  it('a lease releases a node that handed it the lock late, whatever fence the lease holds', async () => {
    await withQueue(async () => {
      await release('0', holder, '100');
      // The value won elsewhere with its own token; this node handed it the lock since (fence 101).
      expect(await release('0', values[0] ?? '', '555')).toBe(1);
      expect((await state()).lock).toBe(values[1]);
    });
  });

  it('a waiter that leaves after it was handed the lock passes it on with the same token', async () => {
    await withQueue(async () => {
      await release('0', holder, '100');
      expect(await inspect(url(), (c) => c.eval(scripts.leave.source, 1, base, values[0] ?? ''))).toBe(1);
      expect(await state()).toEqual({ lock: values[1], fence: '101', handed: 'handed', queued: 0 });
    });
  });

  it('a waiter costs a node under 340 bytes (its queue place and record), 200 waiting, and the mark under 100', async () => {
    const memory = 'tickwarden:{memory}:';
    const keys = resourceKeys('tickwarden', 'memory');
    const waiting = Array.from({ length: 200 }, (_, i) => `${i.toString(36)}`.padEnd(40, 'w'));
    let mark = 0;
    const bytes = await inspect(url(), async (c) => {
      await c.set(keys.lock, holder, 'PX', 60_000);
      for (const [i, value] of waiting.entries()) {
        const args = ['5000', '60000', '60000', 'tickwarden:inbox:0123456789abcdef', value, '1', String(i + 1)];
        expect(await c.eval(scripts.acquire.source, 1, memory, ...args)).toBe(0);
      }
      const usage = (key: string) => c.call('MEMORY', 'USAGE', key, 'SAMPLES', '0') as Promise<number>;
      mark = await usage(keys.waiters);
      let total = await usage(keys.queue);
      for (const value of waiting) total += await usage(resourceKeys('tickwarden', 'memory', undefined, value).waiter);
      await c.del(
        keys.lock,
        keys.queue,
        keys.waiters,
        ...waiting.map((v) => resourceKeys('tickwarden', 'memory', undefined, v).waiter),
      );
      return total;
    });
    expect(bytes / waiting.length).toBeLessThan(340);
    // The waiter mark, one per resource however many wait.
    expect(mark).toBeGreaterThan(0);
    expect(mark).toBeLessThan(100);
  });
});
