import { startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClaimAlreadyGrantedError, LOCK_CLIENT_OPTIONS, QuorumUnavailableError, Redlock } from '../src/index.ts';
import { resourceKeys } from '../src/keys.ts';

/** Redis Cluster's hash slots. */
const SLOTS = 16_384;

/**
 * Joins `nodes` into one Redis Cluster of masters (no replicas): each node takes an equal range
 * of the hash slots, meets the first, and the test waits until every node reports the cluster ok.
 */
async function formCluster(nodes: RedisNodes, count: number): Promise<void> {
  const clients = Array.from({ length: count }, (_, i) => new Redis(nodes.node(i).url, { maxRetriesPerRequest: 0 }));
  try {
    const first = nodes.node(0);
    await Promise.all(
      clients.map(async (client, i) => {
        const from = Math.floor((i * SLOTS) / count);
        const to = Math.floor(((i + 1) * SLOTS) / count) - 1;
        await client.call('CLUSTER', 'ADDSLOTSRANGE', String(from), String(to));
        if (i > 0) await client.call('CLUSTER', 'MEET', first.host, String(first.port));
      }),
    );
    await waitUntil(
      async () =>
        (await Promise.all(clients.map((client) => client.call('CLUSTER', 'INFO')))).every((info) =>
          String(info).includes('cluster_state:ok'),
        ),
      'every node to report cluster_state:ok',
      { timeoutMs: 20_000, intervalMs: 100 },
    );
  } finally {
    for (const client of clients) client.disconnect();
  }
}

/**
 * A real Redis Cluster as one of three lock nodes (the README's "a Cluster counts as one node"):
 * three cluster masters, plus two independent masters. With one independent master stopped, no
 * quorum is reached unless the Cluster node votes for the lease.
 */
describe('a Redis Cluster as one lock node', () => {
  let clusterNodes: RedisNodes;
  let plainNodes: RedisNodes;
  let cluster: Cluster;

  beforeAll(async () => {
    [clusterNodes, plainNodes] = await Promise.all([
      startRedisNodes({
        count: 3,
        aof: false,
        extraArgs: [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          '2000',
        ],
      }),
      startRedisNodes({ count: 2, aof: false }),
    ]);
    await formCluster(clusterNodes, 3);
    cluster = new Cluster([{ host: clusterNodes.node(0).host, port: clusterNodes.node(0).port }], {
      redisOptions: { ...LOCK_CLIENT_OPTIONS },
    });
    await new Promise((resolve) => cluster.once('ready', resolve));
    // The cluster must vote: one of the two independent masters is down for every test.
    await plainNodes.node(1).stop();
  });
  afterAll(async () => {
    cluster?.disconnect();
    await Promise.all([clusterNodes?.close(), plainNodes?.close()]);
  });

  /** The hash slot of `key`, as the cluster itself computes it. */
  const slotOf = async (key: string): Promise<number> => Number(await cluster.call('CLUSTER', 'KEYSLOT', key));

  const redlockOnCluster = (): Redlock =>
    new Redlock([cluster, plainNodes.node(0).url, plainNodes.node(1).url], {
      retryCount: 2,
      retryDelayMs: 20,
      retryJitterMs: 20,
      nodeTimeoutMs: 500,
    });

  it('grants, extends and releases leases whose keys fall on different masters; every key of a resource is in one slot', async () => {
    const redlock = redlockOnCluster();
    expect(redlock.nodes[0]?.singleSlot).toBe(true);
    const resources = Array.from({ length: 12 }, (_, i) => `cluster-job-${i}`);
    // The resources spread over the cluster's three masters (else the test would prove less).
    const masters = new Set(
      await Promise.all(
        resources.map(async (resource) => cluster.slots[await slotOf(resourceKeys('tickwarden', resource).lock)]?.[0]),
      ),
    );
    expect(masters.size).toBe(3);
    for (const resource of resources) {
      const lease = await redlock.acquire(resource, 5000, { claim: 'tick-1' });
      const keys = resourceKeys('tickwarden', resource, 'tick-1');
      expect(await cluster.get(keys.lock)).toBe(lease.value);
      expect(new Set(await Promise.all([keys.lock, keys.fence, keys.claim, keys.waiters].map(slotOf))).size).toBe(1);
      const extended = await redlock.extend(lease, 8000);
      expect(await cluster.pttl(keys.lock)).toBeGreaterThan(5000);
      const released = await redlock.release(extended);
      expect(released.released).toContain(redlock.nodes[0]?.id);
      expect(await cluster.get(keys.lock)).toBeNull();
    }
    await redlock.close();
  });

  it('fencing tokens grow across grants, and a claim granted once is refused after release', async () => {
    const redlock = redlockOnCluster();
    const first = await redlock.acquire('cluster-fenced', 5000, { claim: 'tick-7' });
    await redlock.release(first);
    const second = await redlock.acquire('cluster-fenced', 5000);
    expect(second.fence).toBeGreaterThan(first.fence);
    await redlock.release(second);
    await expect(redlock.acquire('cluster-fenced', 5000, { claim: 'tick-7' })).rejects.toBeInstanceOf(
      ClaimAlreadyGrantedError,
    );
    await redlock.close();
  });

  it("a batch of resources sharing a hash tag is one slot and is granted; a batch across slots gets the cluster's CROSSSLOT error", async () => {
    const redlock = redlockOnCluster();
    const tagged = await redlock.acquireBatch(
      ['{team-a}:job-1', '{team-a}:job-2', '{team-a}:job-3'].map((resource) => ({ resource })),
      5000,
    );
    expect(tagged.map((result) => result.ok)).toEqual([true, true, true]);
    await redlock.releaseBatch(tagged.flatMap((result) => (result.ok ? [result.lease] : [])));

    const spread = await redlock.acquireBatch(
      ['spread-1', 'spread-2', 'spread-3'].map((resource) => ({ resource })),
      5000,
      { retryCount: 0 },
    );
    for (const result of spread) {
      expect(result.ok).toBe(false);
      const error = result.ok ? undefined : result.error;
      expect(error).toBeInstanceOf(QuorumUnavailableError);
      const cause = (error as QuorumUnavailableError).nodeCauses.get(redlock.nodes[0]?.id ?? '');
      expect(cause).toBeInstanceOf(Error);
      expect((cause as Error).message).toMatch(/CROSSSLOT/);
    }
    await redlock.close();
  });
});
