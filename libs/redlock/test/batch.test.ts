import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { waitUntil } from '@tickwarden/testkit';
import {
  ClaimAlreadyGrantedError,
  IoredisLockNode,
  LockTakenError,
  Redlock,
  resourceKeys,
  type Lease,
  type LockNode,
  type ReleaseResult,
} from '../src/index.ts';
import { inspect, onEveryNode, redlockOn, useNodes } from './support.ts';

/** Wraps the nodes of `redlock` to count script calls per node. */
function countCalls(redlock: Redlock): Map<string, number> {
  const calls = new Map<string, number>();
  for (const node of redlock.nodes as LockNode[]) {
    const run = node.run.bind(node);
    node.run = (...args) => {
      calls.set(node.id, (calls.get(node.id) ?? 0) + 1);
      return run(...args);
    };
  }
  return calls;
}

describe.each([3, 5])('batch calls with %i nodes', (count) => {
  const cluster = useNodes(count);

  it('acquires, extends and releases 1,000 resources in script calls of maxBatchSize (200): five per node each', async () => {
    // Call counts are the point here: a node timeout on a loaded CI machine would add a retry round.
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000 });
    const calls = countCalls(redlock);
    const requests = Array.from({ length: 1000 }, (_, i) => ({ resource: `batch-${i}`, claim: 'tick-1' }));
    const results = await redlock.acquireBatch(requests, 5000);
    expect(results.every((r) => r.ok)).toBe(true);
    expect([...calls.values()]).toEqual(Array(count).fill(5));
    const leases = results.flatMap((r) => (r.ok ? [r.lease] : []));
    expect(new Set(leases.map((l) => l.value)).size).toBe(1000);
    const extended = await redlock.extendBatch(leases, 5000);
    expect(extended.every((r) => r.ok)).toBe(true);
    expect([...calls.values()]).toEqual(Array(count).fill(10));
    const released = await redlock.releaseBatch(leases);
    expect(released.every((r) => r.released.length >= Math.floor(count / 2) + 1 && r.failed.size === 0)).toBe(true);
    expect([...calls.values()]).toEqual(Array(count).fill(15));
  });

  it('merges the calls of one event-loop turn into one script call per node, each caller getting its own result', async () => {
    const other = redlockOn(cluster.nodes.urls);
    const held = await other.acquire('merged-taken', 5000);
    // Decided at a quorum: on the other nodes too before the contender comes, so it is taken everywhere.
    const keys = resourceKeys(other.settings.keyPrefix, 'merged-taken');
    await waitUntil(
      async () =>
        (await Promise.all(cluster.nodes.urls.map((url) => inspect(url, (c) => c.get(keys.lock))))).every(
          (value) => value === held.value,
        ),
      'the lock held on every node',
    );
    const redlock = redlockOn(cluster.nodes.urls, { retryCount: 0, nodeTimeoutMs: 10_000 });
    const calls = countCalls(redlock);
    const resources = Array.from({ length: 20 }, (_, i) => `merged-${i}`);
    const [taken, ...won] = await Promise.allSettled([
      redlock.acquire('merged-taken', 5000),
      ...resources.map((resource) => redlock.acquire(resource, 5000)),
    ]);
    // One merged acquire; taken on every node, the failed contender set nothing: no cleanup.
    expect([...calls.values()]).toEqual(Array(count).fill(1));
    expect(taken?.status === 'rejected' && taken.reason).toBeInstanceOf(LockTakenError);
    const leases = won.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : undefined));
    expect(leases.map((lease) => lease?.resource)).toEqual(resources);
    const released = await Promise.all(leases.map((lease) => redlock.release(lease as NonNullable<typeof lease>)));
    expect(released.every((r) => r.released.length + r.unconfirmed.length === count && r.failed.size === 0)).toBe(true);
    expect([...calls.values()]).toEqual(Array(count).fill(2));
    await other.release(held);
  });

  it('merges only calls of one shape: another TTL in the same turn goes as a call of its own', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000 });
    const calls = countCalls(redlock);
    const leases = await Promise.all([
      redlock.acquire('shape-short-1', 5000),
      redlock.acquire('shape-long', 60_000),
      redlock.acquire('shape-short-2', 5000),
    ]);
    expect([...calls.values()]).toEqual(Array(count).fill(2));
    const ttls = await inspect(cluster.nodes.urls[0] as string, (c) =>
      Promise.all(leases.map((lease) => c.pttl(resourceKeys(redlock.settings.keyPrefix, lease.resource).lock))),
    );
    // Each lock set on the node (a PTTL above 0), with its own call's TTL.
    expect(ttls[0]).toBeGreaterThan(0);
    expect(ttls[0]).toBeLessThanOrEqual(5000);
    expect(ttls[1]).toBeGreaterThan(5000);
    expect(ttls[2]).toBeGreaterThan(0);
    expect(ttls[2]).toBeLessThanOrEqual(5000);
    await Promise.all(leases.map((lease) => redlock.release(lease)));
    expect([...calls.values()]).toEqual(Array(count).fill(3));
  });

  describe('a merged release deletes only the locks its leases hold', () => {
    const key = (resource: string, part: 'lock' | 'queue' = 'lock') => resourceKeys('tickwarden', resource)[part];

    /** Releases `lease` merged with a lease of its own that is released, in one script call per node. */
    async function releaseMerged(redlock: Redlock, lease: Lease): Promise<ReleaseResult | undefined> {
      const clean = await redlock.acquire(`${lease.resource}-clean`, 5000);
      const calls = countCalls(redlock);
      const [released, other] = await Promise.all([redlock.release(clean), redlock.release(lease)]);
      expect([...calls.values()]).toEqual(Array(count).fill(1));
      expect(released?.failed.size).toBe(0);
      return other;
    }

    it("not another value's", async () => {
      const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000 });
      const lease = await redlock.acquire('mr-stale', 5000);
      for (const url of cluster.nodes.urls)
        await inspect(url, (c) => c.set(key('mr-stale'), 'another-value', 'PX', 5000));
      expect((await releaseMerged(redlock, lease))?.released).toEqual([]);
      await onEveryNode(cluster.nodes.urls, (c) => c.get(key('mr-stale')), 'another-value');
    });

    it("not a takeover's by the same value since (fence-checked)", async () => {
      const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000 });
      const old = await redlock.acquire('mr-takeover', 5000);
      const takeover = await redlock.acquire('mr-takeover', 5000, { value: old.value });
      expect((await releaseMerged(redlock, old))?.released).toEqual([]);
      await onEveryNode(cluster.nodes.urls, (c) => c.get(key('mr-takeover')), old.value);
      await redlock.release(takeover);
    });

    it('and hands one a waiter waits for on to it', async () => {
      const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000 });
      const lease = await redlock.acquire('mr-waited', 5000);
      const waiter = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000 });
      const handed = waiter.acquire('mr-waited', 5000);
      // Queued and listening on its inbox (its record names it): a release before would only reserve.
      const listening = async (c: Redis) => {
        const [value] = await c.zrange(key('mr-waited', 'queue'), '0', '0');
        const record = value && (await c.get(resourceKeys('tickwarden', 'mr-waited', '', value).waiter));
        const inbox = record?.split('|')[0];
        return inbox ? ((await c.call('PUBSUB', 'NUMSUB', inbox)) as [string, number])[1] : 0;
      };
      await onEveryNode(cluster.nodes.urls, listening, 1);
      expect((await releaseMerged(redlock, lease))?.failed.size).toBe(0);
      // Handed on by the release (its token + 1), not taken on the waiter's retry.
      expect((await handed).fence).toBe(lease.fence + 1);
      await waiter.release(await handed);
    });
  });

  it('a merged release of one lease twice releases it once on each node', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000 });
    const twice = await redlock.acquire('mr-twice', 5000);
    const other = await redlock.acquire('mr-other', 5000);
    const calls = countCalls(redlock);
    const [first, second, third] = await Promise.all([twice, twice, other].map((lease) => redlock.release(lease)));
    expect([...calls.values()]).toEqual(Array(count).fill(1));
    expect(first?.failed.size).toBe(0);
    expect(third?.failed.size).toBe(0);
    expect(second?.released).toEqual([]);
    expect([...(second?.failed.values() ?? [])].every((cause) => cause === 'not-held')).toBe(true);
  });

  it('merges nothing when a node is a Redis Cluster (a merged call would span hash slots)', async () => {
    const nodes = cluster.nodes.urls.map((url): LockNode => {
      const inner = IoredisLockNode.fromUrl(url);
      return { id: inner.id, singleSlot: true, run: (...args) => inner.run(...args), close: () => inner.close() };
    });
    const redlock = new Redlock(nodes, { nodeTimeoutMs: 10_000 });
    try {
      const calls = countCalls(redlock);
      const leases = await Promise.all(Array.from({ length: 5 }, (_, i) => redlock.acquire(`unmerged-${i}`, 5000)));
      expect([...calls.values()]).toEqual(Array(count).fill(5));
      await Promise.all(leases.map((lease) => redlock.release(lease)));
    } finally {
      await redlock.close();
    }
  });

  it('a node whose run throws synchronously votes an error; the others still grant', async () => {
    const nodes = cluster.nodes.urls.map((url, i): LockNode => {
      const inner = IoredisLockNode.fromUrl(url);
      const run: LockNode['run'] = (...args) => {
        if (i === 0) throw new Error('custom node broke');
        return inner.run(...args);
      };
      return { id: inner.id, run, close: () => inner.close() };
    });
    const redlock = new Redlock(nodes, { nodeTimeoutMs: 250 });
    const errors: string[] = [];
    redlock.on('nodeError', ({ node, error }) => errors.push(`${node}: ${error.message}`));
    try {
      // Connected first: a node the grant missed (slow first connect) would fail the release there.
      await redlock.probe({ nodeTimeoutMs: 5000 });
      const lease = await redlock.acquire('sync-throw', 5000);
      expect(errors).toContain(`${nodes[0]?.id}: custom node broke`);
      const released = await redlock.release(lease);
      expect(released.failed.get(nodes[0]?.id ?? '')).toMatchObject({ message: 'custom node broke' });
      expect(released.released.length + released.unconfirmed.length).toBe(count - 1);
    } finally {
      await redlock.close();
    }
  });

  it('splits a batch above maxBatchSize into script calls of at most that many resources', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000 });
    const calls = countCalls(redlock);
    const requests = Array.from({ length: 10_000 }, (_, i) => ({ resource: `big-${i}`, claim: 'tick-2' }));
    const results = await redlock.acquireBatch(requests, 10_000);
    expect(results.map((r) => r.resource)).toEqual(requests.map((r) => r.resource));
    expect(results.every((r) => r.ok)).toBe(true);
    expect([...calls.values()]).toEqual(Array(count).fill(50));
    await redlock.releaseBatch(results.flatMap((r) => (r.ok ? [r.lease] : [])));
  });

  it('releases 3,000 resources in one script call per node when maxBatchSize allows it', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 10_000, maxBatchSize: 3000 });
    const requests = Array.from({ length: 3000 }, (_, i) => ({ resource: `huge-${i}` }));
    const leases = (await redlock.acquireBatch(requests, 10_000)).flatMap((r) => (r.ok ? [r.lease] : []));
    expect(leases).toHaveLength(3000);
    const calls = countCalls(redlock);
    const released = await redlock.releaseBatch(leases);
    expect(released.every((r) => r.failed.size === 0)).toBe(true);
    expect([...calls.values()]).toEqual(Array(count).fill(1));
  });

  it('reports a result per resource: some won, some taken, some already claimed', async () => {
    const other = redlockOn(cluster.nodes.urls);
    const held = await other.acquire('mixed-taken', 5000);
    await other.release(await other.acquire('mixed-claimed', 5000, { claim: 'tick-5' }));
    const redlock = redlockOn(cluster.nodes.urls, { retryCount: 1 });
    const results = await redlock.acquireBatch(
      [{ resource: 'mixed-free' }, { resource: 'mixed-taken' }, { resource: 'mixed-claimed', claim: 'tick-5' }],
      1000,
    );
    expect(results.map((r) => r.resource)).toEqual(['mixed-free', 'mixed-taken', 'mixed-claimed']);
    expect(results[0]?.ok).toBe(true);
    expect(results[1]?.ok === false && results[1].error).toBeInstanceOf(LockTakenError);
    expect(results[2]?.ok === false && results[2].error).toBeInstanceOf(ClaimAlreadyGrantedError);
    await other.release(held);
  });
});
