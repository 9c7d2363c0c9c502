import { describe, expect, it } from 'vitest';
import { ClaimAlreadyGrantedError, LockTakenError, resourceKeys } from '../src/index.ts';
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
