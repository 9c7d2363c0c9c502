import { waitUntil } from '@tickwarden/testkit';
import { describe, expect, it } from 'vitest';
import {
  ClaimAlreadyGrantedError,
  ClaimStartedError,
  FencePassedError,
  isStartedClaim,
  LockTakenError,
  QuorumUnavailableError,
  resourceKeys,
} from '../src/index.ts';
import { connectedRedlockOn, inspect, onEveryNode, useNodes } from './support.ts';

/** A tick's slot of fencing tokens, as the worker proposes them: its time in µs up to the next tick's. */
const slot = (tickMs: number, nextMs: number) => ({ from: tickMs * 1000, below: nextMs * 1000 });

describe.each([1, 3, 5])('claims without a lock, with %i node(s)', (count) => {
  const cluster = useNodes(count);
  const keys = (resource: string, claim: string) => resourceKeys('tickwarden', resource, claim);

  it('records only the claim, once: a second contender is refused with the holder, a takeover by its value is granted', async () => {
    const replicaA = await connectedRedlockOn(cluster.nodes.urls);
    const replicaB = await connectedRedlockOn(cluster.nodes.urls);
    const [won] = await replicaA.claimBatch([{ resource: 'claims-1', claim: 'tick:1' }], { claimRetentionMs: 60_000 });
    expect(won?.ok).toBe(true);
    const value = won?.ok ? won.claim.value : '';
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('claims-1', 'tick:1').claim), value);
    // No lock and no fence: a claim alone.
    await onEveryNode(cluster.nodes.urls, (c) => c.keys('tickwarden:{claims-1}:*'), [keys('claims-1', 'tick:1').claim]);
    const [lost] = await replicaB.claimBatch([{ resource: 'claims-1', claim: 'tick:1' }]);
    expect(lost?.ok).toBe(false);
    expect(!lost?.ok && lost?.error).toBeInstanceOf(ClaimAlreadyGrantedError);
    expect(!lost?.ok && (lost?.error as ClaimAlreadyGrantedError).holder).toBe(value);
    const [takenOver] = await replicaB.claimBatch([{ resource: 'claims-1', claim: 'tick:1', value }]);
    expect(takenOver?.ok && takenOver.claim.value).toBe(value);
    for (const url of cluster.nodes.urls)
      expect(await inspect(url, (c) => c.pttl(keys('claims-1', 'tick:1').claim))).toBeGreaterThan(50_000);
  });

  it('a started claim is refused with its start: its holder reads as started', async () => {
    const replica = await connectedRedlockOn(cluster.nodes.urls);
    const [won] = await replica.claimBatch([{ resource: 'claims-2', claim: 'tick:2' }]);
    const value = won?.ok ? won.claim.value : '';
    await replica.startClaim({ resource: 'claims-2', claim: 'tick:2', value, start: 'p1' });
    const [again] = await replica.claimBatch([{ resource: 'claims-2', claim: 'tick:2', value }]);
    expect(!again?.ok && again?.error).toBeInstanceOf(ClaimAlreadyGrantedError);
    expect(isStartedClaim(!again?.ok ? (again?.error as ClaimAlreadyGrantedError).holder : '')).toBe(true);
  });

  it('a start that replaces another start id takes the claim from it; without it, or replacing another, it is refused', async () => {
    const replica = await connectedRedlockOn(cluster.nodes.urls);
    const [won] = await replica.claimBatch([{ resource: 'claims-4', claim: 'tick:4' }]);
    const request = { resource: 'claims-4', claim: 'tick:4', value: won?.ok ? won.claim.value : '' };
    await replica.startClaim({ ...request, start: 'skipped' });
    await expect(replica.startClaim({ ...request, start: 'backfill' })).rejects.toBeInstanceOf(ClaimStartedError);
    await expect(replica.startClaim({ ...request, start: 'backfill', replaces: 'other' })).rejects.toBeInstanceOf(
      ClaimStartedError,
    );
    await replica.startClaim({ ...request, start: 'backfill', replaces: 'skipped' });
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('claims-4', 'tick:4').claim), `${request.value}|backfill`);
    await expect(replica.startClaim({ ...request, start: 'skipped' })).rejects.toBeInstanceOf(ClaimStartedError);
  });

  it('many claims in one call per node, each decided on its own', async () => {
    const replica = await connectedRedlockOn(cluster.nodes.urls);
    const [first] = await replica.claimBatch([{ resource: 'claims-3', claim: 'tick:1' }]);
    const results = await replica.claimBatch(
      ['tick:1', 'tick:2', 'tick:3'].map((claim) => ({ resource: 'claims-3', claim })),
    );
    expect(results.map((r) => r.ok)).toEqual([false, true, true]);
    expect(first?.ok).toBe(true);
  });
});

describe('claims split among contenders (5 nodes)', () => {
  const cluster = useNodes(5);
  const keys = (claim: string) => resourceKeys('tickwarden', 'claims-split', claim);

  it('a split no value can win is retried after a made-up value takes its part back; a supplied value keeps its part', async () => {
    // Two values hold the claim on two nodes each, the fifth is free: no quorum for either.
    for (const [i, url] of cluster.nodes.urls.entries())
      if (i < 4) await inspect(url, (c) => c.set(keys('tick:9').claim, i < 2 ? 'a' : 'b', 'PX', 60_000));
    const replica = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 1 });
    const [fresh] = await replica.claimBatch([{ resource: 'claims-split', claim: 'tick:9' }]);
    expect(!fresh?.ok && fresh?.error).toBeInstanceOf(LockTakenError);
    expect(Object.fromEntries((fresh as unknown as { error: LockTakenError }).error.claimHolders)).toEqual({
      a: 2,
      b: 2,
    });
    // The made-up value took back what it recorded on the fifth node.
    expect(await inspect(cluster.nodes.urls[4] as string, (c) => c.get(keys('tick:9').claim))).toBeNull();
    // A supplied value may be the claim's owner's: what a failed attempt of it recorded stays.
    const [stranger] = await replica.claimBatch([{ resource: 'claims-split', claim: 'tick:9', value: 'c' }]);
    expect(!stranger?.ok && stranger?.error).toBeInstanceOf(LockTakenError);
    expect(await inspect(cluster.nodes.urls[4] as string, (c) => c.get(keys('tick:9').claim))).toBe('c');
    // The value on most nodes takes the split over (a recovery's takeover).
    await inspect(cluster.nodes.urls[4] as string, (c) => c.del(keys('tick:9').claim));
    const [takeover] = await replica.claimBatch([{ resource: 'claims-split', claim: 'tick:9', value: 'a' }]);
    expect(takeover?.ok && takeover.claim.value).toBe('a');
  });

  it('with a majority of nodes down it fails as unavailable, naming them', async () => {
    const replica = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    await Promise.all([0, 1, 2].map((i) => cluster.nodes.node(i).pause()));
    try {
      const [result] = await replica.claimBatch([{ resource: 'claims-down', claim: 'tick:1' }]);
      expect(!result?.ok && result?.error).toBeInstanceOf(QuorumUnavailableError);
      expect(!result?.ok && result?.error.nodeCauses.size).toBe(3);
    } finally {
      await Promise.all([0, 1, 2].map((i) => cluster.nodes.node(i).resume()));
    }
  });
});

describe.each([1, 3, 5])('a run started in tick order, with %i node(s)', (count) => {
  const cluster = useNodes(count);
  const keys = (resource: string, claim = '') => resourceKeys('tickwarden', resource, claim);
  const T = 1_800_000_000_000;

  /** Claims ticks of `resource` as a replica does; their values by tick. */
  async function claim(resource: string, ...ticks: number[]): Promise<string[]> {
    const replica = await connectedRedlockOn(cluster.nodes.urls);
    const results = await replica.claimBatch(ticks.map((tick) => ({ resource, claim: `tick:${tick}` })));
    return results.map((r) => (r.ok ? r.claim.value : ''));
  }

  it("proposes the tick's fence; a later tick's run once granted passes an earlier tick, free or held", async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const [v1, v2, v3] = await claim('order-1', T, T + 1000, T + 2000);
    const start = (tick: number, value: string | undefined) => ({
      value,
      claim: `tick:${tick}`,
      start: `p${tick}`,
      fence: slot(tick, tick + 1000),
    });
    const second = await worker.acquire('order-1', 5000, start(T + 1000, v2));
    expect(second.fence).toBe((T + 1000) * 1000);
    // Held by the later tick's run: the earlier tick is passed, not taken.
    const held = await worker.acquire('order-1', 5000, start(T, v1)).catch((e: unknown) => e);
    expect(held).toBeInstanceOf(FencePassedError);
    expect((held as FencePassedError).fence).toBe((T + 1000) * 1000);
    await worker.release(second);
    // Free again: still passed.
    await expect(worker.acquire('order-1', 5000, start(T, v1))).rejects.toBeInstanceOf(FencePassedError);
    const third = await worker.acquire('order-1', 5000, start(T + 2000, v3));
    expect(third.fence).toBe((T + 2000) * 1000);
    await worker.release(third);
  });

  it('a start whose own earlier attempt raised the fence proposes above it, inside its slot', async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const [v1] = await claim('order-2', T);
    for (const url of cluster.nodes.urls) await inspect(url, (c) => c.set(keys('order-2').fence, String(T * 1000 + 7)));
    const lease = await worker.acquire('order-2', 5000, {
      value: v1,
      claim: `tick:${T}`,
      start: 'p',
      fence: slot(T, T + 1000),
    });
    expect(lease.fence).toBe(T * 1000 + 8);
    await worker.release(lease);
  });

  it('waits behind the tick before while it is granted and not started; changes nothing meanwhile', async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const [v1, v2] = await claim('order-3', T, T + 1000);
    const second = {
      value: v2,
      claim: `tick:${T + 1000}`,
      start: 'p2',
      fence: slot(T + 1000, T + 2000),
      after: { claim: `tick:${T}`, untilMs: Date.now() + 60_000 },
    };
    const behind = await worker.acquire('order-3', 5000, second).catch((e: unknown) => e);
    expect(behind).toBeInstanceOf(LockTakenError);
    expect([...(behind as LockTakenError).nodeCauses.values()]).toContain('behind');
    // Nothing left of the try: no lock, no fence, its claim as the replica left it.
    await onEveryNode(cluster.nodes.urls, (c) => c.mget(keys('order-3').lock, keys('order-3').fence), [null, null]);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('order-3', `tick:${T + 1000}`).claim), v2);
    // The tick before starts, runs and ends: now the second goes.
    const first = await worker.acquire('order-3', 5000, {
      value: v1,
      claim: `tick:${T}`,
      start: 'p1',
      fence: slot(T, T + 1000),
    });
    await worker.release(first);
    const run = await worker.acquire('order-3', 5000, second);
    expect(run.fence).toBe((T + 1000) * 1000);
    await worker.release(run);
  });

  it('does not wait for a tick before that was never claimed, or past its time', async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const [v2] = await claim('order-4', T + 1000);
    const unclaimed = await worker.acquire('order-4', 5000, {
      value: v2,
      claim: `tick:${T + 1000}`,
      start: 'p2',
      fence: slot(T + 1000, T + 2000),
      after: { claim: `tick:${T}`, untilMs: Date.now() + 60_000 },
    });
    await worker.release(unclaimed);
    const [, v4] = await claim('order-4', T + 2000, T + 3000);
    const late = await worker.acquire('order-4', 5000, {
      value: v4,
      claim: `tick:${T + 3000}`,
      start: 'p4',
      fence: slot(T + 3000, T + 4000),
      after: { claim: `tick:${T + 2000}`, untilMs: Date.now() - 1 },
    });
    expect(late.fence).toBe((T + 3000) * 1000);
    await worker.release(late);
  });

  it("does not wait behind the tick before, nor read its claim, on nodes where a run of that tick's slot or a later one was granted", async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const [, v2] = await claim('order-7', T, T + 1000);
    // The tick before is claimed and not started, but a run with a token of its slot was granted everywhere.
    for (const url of cluster.nodes.urls) await inspect(url, (c) => c.set(keys('order-7').fence, String(T * 1000 + 3)));
    const second = { value: v2, claim: `tick:${T + 1000}`, start: 'p2', fence: slot(T + 1000, T + 2000) };
    const after = { claim: `tick:${T}`, untilMs: Date.now() + 60_000 };
    const behind = await worker.acquire('order-7', 5000, { ...second, after }).catch((e: unknown) => e);
    expect([...(behind as LockTakenError).nodeCauses.values()]).toContain('behind');
    const getsBefore = await getCalls(cluster.nodes.urls);
    const run = await worker.acquire('order-7', 5000, { ...second, after: { ...after, fence: T * 1000 } });
    expect(run.fence).toBe((T + 1000) * 1000);
    expect(await getCalls(cluster.nodes.urls)).toBe(getsBefore);
    await worker.release(run);
  });

  it('a refused start leaves its claim as it found it; a granted one starts it', async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const [v1, v2] = await claim('order-6', T, T + 1000);
    const holder = await worker.acquire('order-6', 5000, { fence: { from: T * 1000 - 10 } });
    const start = { value: v2, claim: `tick:${T + 1000}`, start: 'p2', fence: slot(T + 1000, T + 2000) };
    await expect(worker.acquire('order-6', 5000, start)).rejects.toBeInstanceOf(LockTakenError);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('order-6', `tick:${T + 1000}`).claim), v2);
    await worker.release(holder);
    const run = await worker.acquire('order-6', 5000, start);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('order-6', `tick:${T + 1000}`).claim), `${v2}|p2`);
    await worker.release(run);
    expect(v1).not.toBe('');
  });

  it('an early start changes nothing and is refused until the nodes reach its time; revocation takes the lock', async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const now = Date.now();
    const [v1, v2] = await claim('order-5', now, now + 1000);
    const start = (tick: number, value: string | undefined, notBeforeMs: number) =>
      worker.acquire('order-5', 5000, {
        value,
        claim: `tick:${tick}`,
        start: `p${tick}`,
        fence: slot(tick, tick + 1000),
        notBeforeMs,
        revoke: true,
      });
    const first = await start(now, v1, now);
    const early = await start(now + 1000, v2, Date.now() + 60_000).catch((e: unknown) => e);
    expect(early).toBeInstanceOf(LockTakenError);
    expect([...(early as LockTakenError).nodeCauses.values()]).toContain('early');
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('order-5', `tick:${now + 1000}`).claim), v2);
    // Due: it revokes the run before it.
    const second = await start(now + 1000, v2, Date.now());
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('order-5').lock), v2);
    await expect(worker.extend(first)).rejects.toThrow();
    await worker.release(second);
  });
});

describe('a start that fails on a quorum (5 nodes)', () => {
  const cluster = useNodes(5);
  const keys = (resource: string, claim = '') => resourceKeys('tickwarden', resource, claim);
  const T = 1_900_000_000_000;

  it("puts its claim and fence back where it was granted (so a later claim waits for it there), and a node or two whose fence a later claim's attempt raised only refuse it", async () => {
    const replica = await connectedRedlockOn(cluster.nodes.urls);
    const [c1, c2] = await replica.claimBatch(
      [T, T + 1000].map((tick) => ({ resource: 'partial', claim: `tick:${tick}` })),
    );
    const [v1, v2] = [c1, c2].map((c) => (c?.ok ? c.claim.value : ''));
    // Another run holds the lock on three nodes: the start is granted on two, refused (taken) on three.
    const [n0, n1, n2, n3, n4] = cluster.nodes.urls as [string, string, string, string, string];
    for (const url of [n2, n3, n4]) await inspect(url, (c) => c.set(keys('partial').lock, 'other', 'PX', 60_000));
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const first = { value: v1, claim: `tick:${T}`, start: 'p1', fence: slot(T, T + 1000) };
    await expect(worker.acquire('partial', 5000, first)).rejects.toBeInstanceOf(LockTakenError);
    // Cleaned up where granted: the lock released, the claim and the fence put back (none before): no trace.
    await onEveryNode(
      [n0, n1],
      (c) => c.mget(keys('partial').lock, keys('partial', `tick:${T}`).claim, keys('partial').fence),
      [null, v1, null],
    );
    // The next tick waits for it there: behind.
    const second = {
      value: v2,
      claim: `tick:${T + 1000}`,
      start: 'p2',
      fence: slot(T + 1000, T + 2000),
      after: { claim: `tick:${T}`, untilMs: Date.now() + 60_000 },
    };
    // The round settles once three nodes refused (taken), maybe before n0 and n1 answered: asked
    // again (behind changes nothing) until both did.
    await waitUntil(async () => {
      const behind = await worker.acquire('partial', 5000, second).catch((e: unknown) => e);
      expect(behind).toBeInstanceOf(LockTakenError);
      const causes = [...(behind as LockTakenError).nodeCauses.values()];
      expect(causes.filter((cause) => cause !== 'behind' && cause !== 'taken')).toEqual([]);
      return causes.filter((cause) => cause === 'behind').length === 2;
    }, 'n0 and n1 to answer behind');
    // A later claim's attempt raised the fence on two nodes and failed: they refuse the first start (passed), the other three grant it.
    for (const url of [n0, n1]) await inspect(url, (c) => c.set(keys('partial').fence, String((T + 1000) * 1000)));
    for (const url of [n2, n3, n4]) await inspect(url, (c) => c.del(keys('partial').lock));
    const run = await worker.acquire('partial', 5000, first);
    expect(run.fence).toBe(T * 1000);
    await worker.release(run);
  });

  it('held up by the network past the node timeout, then granted where it lands: let go there once the late grant is heard, not held for the TTL', async () => {
    const replica = await connectedRedlockOn(cluster.nodes.urls);
    const [claimed] = await replica.claimBatch([{ resource: 'held-up', claim: `tick:${T}` }]);
    const value = claimed?.ok ? claimed.claim.value : '';
    const link = await cluster.nodes.link('held-up');
    const worker = await connectedRedlockOn(link.urls, { retryCount: 0, nodeTimeoutMs: 200 });
    // Nodes 2-4 get nothing until healed (a partition): the attempt times out there, granted on 0 and 1 only.
    link.partition([2, 3, 4]);
    const start = { value, claim: `tick:${T}`, start: 'p1', fence: slot(T, T + 1000) };
    await expect(worker.acquire('held-up', 60_000, start)).rejects.toBeInstanceOf(QuorumUnavailableError);
    // Healed, the held requests land and grant a quorum; their replies, late, get it let go: no
    // lock, the claim not started, no fence (none before), long before the 60 s TTL.
    link.heal();
    // A probe on the same connections lands after the held requests, and answers after their replies.
    await worker.probe({ nodeTimeoutMs: 5000 });
    await onEveryNode(
      cluster.nodes.urls,
      (c) => c.mget(keys('held-up').lock, keys('held-up', `tick:${T}`).claim, keys('held-up').fence),
      [null, value, null],
    );
  });
});

/** GET commands the nodes ran so far, scripts' included (INFO commandstats). */
async function getCalls(urls: readonly string[]): Promise<number> {
  let calls = 0;
  for (const url of urls) {
    const stats = await inspect(url, (c) => c.info('commandstats'));
    calls += Number(/^cmdstat_get:calls=(\d+)/m.exec(stats)?.[1] ?? 0);
  }
  return calls;
}
