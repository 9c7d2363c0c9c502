import { describe, expect, it } from 'vitest';
import { ClaimAlreadyGrantedError, LockTakenError, QuorumUnavailableError, resourceKeys } from '../src/index.ts';
import { waitUntil } from '@tickwarden/testkit';
import { inspect, redlockOn, sleep, useNodes } from './support.ts';

describe.each([1, 3, 5])('claim-once with %i node(s)', (count) => {
  const cluster = useNodes(count);

  it('a claim granted once cannot be granted again, even after a fast release', async () => {
    const replicaA = redlockOn(cluster.nodes.urls);
    const replicaB = redlockOn(cluster.nodes.urls);
    const lease = await replicaA.acquire('schedule-1', 1000, { claim: 'tick-1000' });
    await replicaA.release(lease);
    const late = await replicaB.acquire('schedule-1', 1000, { claim: 'tick-1000' }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(ClaimAlreadyGrantedError);
    expect((late as ClaimAlreadyGrantedError).code).toBe('CLAIM_ALREADY_GRANTED');
    expect((late as ClaimAlreadyGrantedError).claim).toBe('tick-1000');
    // The holder is the winner's value: acquiring with it and the claim takes the winner's lease over.
    expect((late as ClaimAlreadyGrantedError).holder).toBe(lease.value);
    const recovered = await replicaB.acquire('schedule-1', 1000, { claim: 'tick-1000', value: (late as ClaimAlreadyGrantedError).holder });
    expect(recovered.fence).toBeGreaterThan(lease.fence);
    await replicaB.release(recovered);
    // The next tick is a different claim.
    await replicaB.release(await replicaB.acquire('schedule-1', 1000, { claim: 'tick-2000' }));
  });

  it('concurrent contenders for one claim: exactly one is granted', async () => {
    const contenders = Array.from({ length: 6 }, () => redlockOn(cluster.nodes.urls, { retryCount: 20, retryDelayMs: 5, retryJitterMs: 10 }));
    const outcomes = await Promise.all(
      contenders.map(async (redlock) => {
        try {
          const lease = await redlock.acquire('schedule-2', 1000, { claim: 'tick-42' });
          await redlock.release(lease);
          return 'granted';
        } catch (error) {
          if (error instanceof ClaimAlreadyGrantedError || error instanceof LockTakenError) return error.code;
          throw error;
        }
      }),
    );
    expect(outcomes.filter((o) => o === 'granted')).toHaveLength(1);
  });

  it('a claim can be granted again once its retention expired', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { claimRetentionMs: 100 });
    await redlock.release(await redlock.acquire('schedule-3', 1000, { claim: 'tick-7' }));
    await sleep(150);
    await redlock.release(await redlock.acquire('schedule-3', 1000, { claim: 'tick-7' }));
  });

  it('a failed attempt does not leave its claim behind', async () => {
    const holder = redlockOn(cluster.nodes.urls);
    const blocked = redlockOn(cluster.nodes.urls, { retryCount: 0 });
    const lease = await holder.acquire('schedule-4', 5000);
    await expect(blocked.acquire('schedule-4', 1000, { claim: 'tick-9' })).rejects.toBeInstanceOf(LockTakenError);
    await holder.release(lease);
    await blocked.release(await blocked.acquire('schedule-4', 1000, { claim: 'tick-9' }));
  });
});

describe('claims split among contenders (5 nodes)', () => {
  const cluster = useNodes(5);
  const claimKey = resourceKeys('tickwarden', 'split', 'tick-1').claim;
  const setClaims = (values: (string | null)[]) =>
    Promise.all(cluster.nodes.urls.map((url, i) => inspect(url, async (c) => (values[i] ? await c.set(claimKey, values[i] as string, 'PX', 60_000) : await c.del(claimKey)))));

  it('a claim recorded by different contenders, none on a quorum, is not "already granted": the acquire keeps trying', async () => {
    // Two contenders of the same round each got two nodes (they would release them): no winner.
    await setClaims(['a'.repeat(40), 'a'.repeat(40), 'b'.repeat(40), 'b'.repeat(40), null]);
    const redlock = redlockOn(cluster.nodes.urls, { retryCount: 0 });
    const error = await redlock.acquire('split', 1000, { claim: 'tick-1' }).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(ClaimAlreadyGrantedError);
    expect(error).toBeInstanceOf(LockTakenError);
    await setClaims([null, null, null, null, null]);
    await redlock.release(await redlock.acquire('split', 1000, { claim: 'tick-1' }));
  });

  it('the failure names the split (claimHolders); with a node down a fresh value cannot win, and acquiring with the value on most nodes takes the claim over', async () => {
    // A contender died mid-contest holding two nodes; another round left one; node 4 hangs.
    const [dead, other] = ['d'.repeat(40), 'e'.repeat(40)];
    await setClaims([dead, dead, other, null, null]);
    await cluster.nodes.node(4).pause();
    try {
      const redlock = redlockOn(cluster.nodes.urls, { retryCount: 0, nodeTimeoutMs: 100 });
      const error = await redlock.acquire('split', 1000, { claim: 'tick-1' }).catch((e: unknown) => e);
      expect(error).not.toBeInstanceOf(ClaimAlreadyGrantedError);
      expect((error as LockTakenError | QuorumUnavailableError).claimHolders).toEqual(new Map([[dead, 2], [other, 1]]));
      const lease = await redlock.acquire('split', 1000, { claim: 'tick-1', value: dead });
      const keys = resourceKeys('tickwarden', 'split', 'tick-1');
      // Now granted to that value on a quorum: nodes 0, 1 and 3 (node 2 keeps the other part).
      const held = await Promise.all(cluster.nodes.urls.slice(0, 4).map((url) => inspect(url, (c) => c.get(keys.claim))));
      expect(held).toEqual([dead, dead, other, dead]);
      await redlock.release(lease);
    } finally {
      await cluster.nodes.node(4).resume();
      await setClaims([null, null, null, null, null]);
    }
  });

  it('one value holding the claim on a quorum is "already granted"', async () => {
    await setClaims(['c'.repeat(40), 'c'.repeat(40), 'c'.repeat(40), null, null]);
    await expect(redlockOn(cluster.nodes.urls).acquire('split', 1000, { claim: 'tick-1' })).rejects.toBeInstanceOf(ClaimAlreadyGrantedError);
    await setClaims([null, null, null, null, null]);
  });
});

describe.each([3, 5])('claim-once with a minority of %i nodes down', (count) => {
  const cluster = useNodes(count);

  it('a late contender gets ClaimAlreadyGrantedError, not QuorumUnavailableError: the verdict waits for the nodes that can tell', async () => {
    // Down nodes answer "error" at once, before the live ones: the attempt must not be settled then.
    for (let i = 0; i < (count - 1) / 2; i++) await cluster.nodes.node(count - 1 - i).stop();
    const replicaA = redlockOn(cluster.nodes.urls);
    const replicaB = redlockOn(cluster.nodes.urls);
    const lease = await replicaA.acquire('schedule-down', 1000, { claim: 'tick-1' });
    await replicaA.release(lease);
    const late = await replicaB.acquire('schedule-down', 1000, { claim: 'tick-1' }).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(ClaimAlreadyGrantedError);
    expect([...(late as ClaimAlreadyGrantedError).nodeCauses.values()].filter((cause) => cause === 'claimed')).toHaveLength((count + 1) / 2);
  });
});

describe('a takeover by value that fails', () => {
  const cluster = useNodes(5);

  it('leaves the owner\'s lease and claim on the nodes it reached (a failed attempt releases only a value it made up)', async () => {
    const owner = redlockOn(cluster.nodes.urls);
    const lease = await owner.acquire('taken-over', 10_000, { claim: 'tick-9' });
    // The taker reaches two nodes only: the attempt refreshes the owner's value there and fails for want of a quorum.
    const link = await cluster.nodes.link('partial-taker');
    link.partition([2, 3, 4]);
    const taker = redlockOn(link.urls, { retryCount: 0, nodeTimeoutMs: 100 });
    await expect(taker.acquire('taken-over', 10_000, { claim: 'tick-9', value: lease.value })).rejects.toBeInstanceOf(QuorumUnavailableError);
    const keys = resourceKeys('tickwarden', 'taken-over', 'tick-9');
    for (const url of cluster.nodes.urls) {
      expect(await inspect(url, (client) => client.mget(keys.lock, keys.claim))).toEqual([lease.value, lease.value]);
    }
    link.heal();
    await owner.release(lease);
  });

  it('releases what it set afresh where the owner\'s lease had lapsed (so it blocks no one for a TTL), and keeps the owner\'s claim there', async () => {
    const owner = redlockOn(cluster.nodes.urls);
    const lease = await owner.acquire('lapsed-takeover', 300, { claim: 'tick-10' });
    await sleep(400);
    const link = await cluster.nodes.link('lapsed-taker');
    link.partition([2, 3, 4]);
    const taker = redlockOn(link.urls, { retryCount: 0, nodeTimeoutMs: 100 });
    await expect(taker.acquire('lapsed-takeover', 10_000, { claim: 'tick-10', value: lease.value })).rejects.toBeInstanceOf(QuorumUnavailableError);
    const keys = resourceKeys('tickwarden', 'lapsed-takeover', 'tick-10');
    for (const url of cluster.nodes.urls.slice(0, 2)) {
      await waitUntil(async () => (await inspect(url, (client) => client.exists(keys.lock))) === 0, 'the fresh lock released');
      expect(await inspect(url, (client) => client.get(keys.claim))).toBe(lease.value);
    }
    link.heal();
  });

  it('a contender never refreshes its own made-up value: a recovery that took its claim over by that value owns it, and a failed attempt leaves it', async () => {
    // The contender's next made-up value, known to the test; a recovery took the claim over by it (ClaimAlreadyGrantedError.holder).
    const random = { bytes: (size: number) => Buffer.alloc(size, 7), fraction: () => 0.5 };
    const value = Buffer.alloc(20, 7).toString('hex');
    const recovered = await redlockOn(cluster.nodes.urls).acquire('recovered-value', 10_000, { claim: 'tick-11', value });
    const contender = redlockOn(cluster.nodes.urls, { retryCount: 0, random });
    await expect(contender.acquire('recovered-value', 10_000, { claim: 'tick-11' })).rejects.toBeInstanceOf(LockTakenError);
    // A slow contender reaching two nodes: its attempt fails, and its cleanup (fence-checked) leaves the recovery's lock and claim.
    const link = await cluster.nodes.link('slow-contender');
    link.partition([2, 3, 4]);
    const slow = redlockOn(link.urls, { retryCount: 0, nodeTimeoutMs: 100, random });
    await expect(slow.acquire('recovered-value', 10_000, { claim: 'tick-11' })).rejects.toBeInstanceOf(QuorumUnavailableError);
    await sleep(100); // its cleanup has landed on the nodes it reaches
    const keys = resourceKeys('tickwarden', 'recovered-value', 'tick-11');
    for (const url of cluster.nodes.urls) expect(await inspect(url, (client) => client.mget(keys.lock, keys.claim))).toEqual([value, value]);
    await expect(redlockOn(cluster.nodes.urls).extend(recovered)).resolves.toMatchObject({ value });
    link.heal();
    await contender.release(recovered);
  });

  it('does not delete, when it cleans up late, a lock another holder of the same value refreshed since it set it', async () => {
    const first = redlockOn(cluster.nodes.urls);
    const { value } = await first.acquire('shared-value', 300);
    await sleep(400);
    // A slow taker: its script sets the value afresh on nodes 0 and 1 (200 ms away), the others never answer.
    const link = await cluster.nodes.link('slow-taker');
    const slow = redlockOn(link.urls, { retryCount: 0, nodeTimeoutMs: 1000 });
    await slow.probe({ nodeTimeoutMs: 5000 });
    for (const node of [0, 1]) link.setFault(node, { kind: 'latency', ms: 200 });
    link.partition([2, 3, 4]);
    const failing = slow.acquire('shared-value', 5000, { value }).catch((error: unknown) => error);
    await sleep(300);
    // Meanwhile the value's other holder takes the lease over: it refreshes the lock on nodes 0 and 1.
    const other = await redlockOn(cluster.nodes.urls).acquire('shared-value', 5000, { value });
    expect(await failing).toBeInstanceOf(QuorumUnavailableError);
    await sleep(600); // the slow taker's cleanup lands on nodes 0 and 1 by now
    const keys = resourceKeys('tickwarden', 'shared-value');
    for (const url of cluster.nodes.urls) expect(await inspect(url, (client) => client.get(keys.lock))).toBe(value);
    link.heal();
    await first.release(other);
  });
});
