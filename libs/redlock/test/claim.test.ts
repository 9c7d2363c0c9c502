import { describe, expect, it } from 'vitest';
import {
  ClaimAlreadyGrantedError,
  ClaimStartedError,
  InvalidSettingsError,
  isStartedClaim,
  LockTakenError,
  QuorumUnavailableError,
  resourceKeys,
} from '../src/index.ts';
import { waitUntil } from '@tickwarden/testkit';
import { connectedRedlockOn, inspect, onEveryNode, redlockOn, sleep, useNodes } from './support.ts';

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
    const recovered = await replicaB.acquire('schedule-1', 1000, {
      claim: 'tick-1000',
      value: (late as ClaimAlreadyGrantedError).holder,
    });
    expect(recovered.fence).toBeGreaterThan(lease.fence);
    await replicaB.release(recovered);
    // The next tick is a different claim.
    await replicaB.release(await replicaB.acquire('schedule-1', 1000, { claim: 'tick-2000' }));
  });

  it('concurrent contenders for one claim: exactly one is granted', async () => {
    const contenders = Array.from({ length: 6 }, () =>
      redlockOn(cluster.nodes.urls, { retryCount: 20, retryDelayMs: 5, retryJitterMs: 10 }),
    );
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
    const blocked = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const lease = await holder.acquire('schedule-4', 5000);
    await expect(blocked.acquire('schedule-4', 1000, { claim: 'tick-9' })).rejects.toBeInstanceOf(LockTakenError);
    // Each node took back, in the same step, the claim it recorded before it found the lock taken.
    const claim = resourceKeys('tickwarden', 'schedule-4', 'tick-9').claim;
    for (const url of cluster.nodes.urls) expect(await inspect(url, (c) => c.get(claim))).toBeNull();
    await holder.release(lease);
    await blocked.release(await blocked.acquire('schedule-4', 1000, { claim: 'tick-9' }));
  });
});

describe('claims split among contenders (5 nodes)', () => {
  const cluster = useNodes(5);
  const claimKey = resourceKeys('tickwarden', 'split', 'tick-1').claim;
  const setClaims = (values: (string | null)[]) =>
    Promise.all(
      cluster.nodes.urls.map((url, i) =>
        inspect(url, async (c) =>
          values[i] ? await c.set(claimKey, values[i] as string, 'PX', 60_000) : await c.del(claimKey),
        ),
      ),
    );

  it('a claim recorded by different contenders, none on a quorum, is not "already granted": the acquire keeps trying', async () => {
    // Two contenders of the same round each got two nodes (they would release them): no winner.
    await setClaims(['a'.repeat(40), 'a'.repeat(40), 'b'.repeat(40), 'b'.repeat(40), null]);
    const redlock = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
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
    const redlock = redlockOn(cluster.nodes.urls, { retryCount: 0, nodeTimeoutMs: 100 });
    // Connected first: a live node whose first connect outlasts the 100 ms would not be counted.
    await redlock.probe({ nodeTimeoutMs: 5000 });
    await cluster.nodes.node(4).pause();
    try {
      const error = await redlock.acquire('split', 1000, { claim: 'tick-1' }).catch((e: unknown) => e);
      expect(error).not.toBeInstanceOf(ClaimAlreadyGrantedError);
      expect((error as LockTakenError | QuorumUnavailableError).claimHolders).toEqual(
        new Map([
          [dead, 2],
          [other, 1],
        ]),
      );
      const lease = await redlock.acquire('split', 1000, { claim: 'tick-1', value: dead });
      const keys = resourceKeys('tickwarden', 'split', 'tick-1');
      // Now granted to that value on a quorum: nodes 0, 1 and 3 (node 2 keeps the other part).
      const held = await Promise.all(
        cluster.nodes.urls.slice(0, 4).map((url) => inspect(url, (c) => c.get(keys.claim))),
      );
      expect(held).toEqual([dead, dead, other, dead]);
      await redlock.release(lease);
    } finally {
      await cluster.nodes.node(4).resume();
      await setClaims([null, null, null, null, null]);
    }
  });

  it('one value holding the claim on a quorum is "already granted"', async () => {
    await setClaims(['c'.repeat(40), 'c'.repeat(40), 'c'.repeat(40), null, null]);
    await expect(redlockOn(cluster.nodes.urls).acquire('split', 1000, { claim: 'tick-1' })).rejects.toBeInstanceOf(
      ClaimAlreadyGrantedError,
    );
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
    expect(
      [...(late as ClaimAlreadyGrantedError).nodeCauses.values()].filter((cause) => cause === 'claimed'),
    ).toHaveLength((count + 1) / 2);
  });
});

describe('a takeover by value that fails', () => {
  const cluster = useNodes(5);

  it("leaves the owner's lease and claim on the nodes it reached (a failed attempt releases only a value it made up)", async () => {
    const owner = redlockOn(cluster.nodes.urls);
    const lease = await owner.acquire('taken-over', 10_000, { claim: 'tick-9' });
    const keys = resourceKeys('tickwarden', 'taken-over', 'tick-9');
    await onEveryNode(cluster.nodes.urls, (client) => client.mget(keys.lock, keys.claim), [lease.value, lease.value]);
    // The taker reaches two nodes only: the attempt refreshes the owner's value there and fails for want of a quorum.
    const link = await cluster.nodes.link('partial-taker');
    link.partition([2, 3, 4]);
    const taker = redlockOn(link.urls, { retryCount: 0, nodeTimeoutMs: 100 });
    await expect(taker.acquire('taken-over', 10_000, { claim: 'tick-9', value: lease.value })).rejects.toBeInstanceOf(
      QuorumUnavailableError,
    );
    for (const url of cluster.nodes.urls) {
      expect(await inspect(url, (client) => client.mget(keys.lock, keys.claim))).toEqual([lease.value, lease.value]);
    }
    link.heal();
    await owner.release(lease);
  });

  it("releases what it set afresh where the owner's lease had lapsed (so it blocks no one for a TTL), and keeps the owner's claim there", async () => {
    const owner = redlockOn(cluster.nodes.urls);
    const lease = await owner.acquire('lapsed-takeover', 300, { claim: 'tick-10' });
    await sleep(400);
    const link = await cluster.nodes.link('lapsed-taker');
    link.partition([2, 3, 4]);
    const taker = redlockOn(link.urls, { retryCount: 0, nodeTimeoutMs: 100 });
    await expect(
      taker.acquire('lapsed-takeover', 10_000, { claim: 'tick-10', value: lease.value }),
    ).rejects.toBeInstanceOf(QuorumUnavailableError);
    const keys = resourceKeys('tickwarden', 'lapsed-takeover', 'tick-10');
    for (const url of cluster.nodes.urls.slice(0, 2)) {
      await waitUntil(
        async () => (await inspect(url, (client) => client.exists(keys.lock))) === 0,
        'the fresh lock released',
      );
      expect(await inspect(url, (client) => client.get(keys.claim))).toBe(lease.value);
    }
    link.heal();
  });

  it('a contender never refreshes its own made-up value: a recovery that took its claim over by that value owns it, and a failed attempt leaves it', async () => {
    // The contender's next made-up value, known to the test; a recovery took the claim over by it (ClaimAlreadyGrantedError.holder).
    const random = { bytes: (size: number) => Buffer.alloc(size, 7), fraction: () => 0.5 };
    const value = Buffer.alloc(20, 7).toString('hex');
    const recovered = await redlockOn(cluster.nodes.urls).acquire('recovered-value', 10_000, {
      claim: 'tick-11',
      value,
    });
    const keys = resourceKeys('tickwarden', 'recovered-value', 'tick-11');
    await onEveryNode(cluster.nodes.urls, (client) => client.mget(keys.lock, keys.claim), [value, value]);
    const contender = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0, random });
    await expect(contender.acquire('recovered-value', 10_000, { claim: 'tick-11' })).rejects.toBeInstanceOf(
      LockTakenError,
    );
    // A slow contender reaching two nodes: its attempt fails, and its cleanup (fence-checked) leaves the recovery's lock and claim.
    const link = await cluster.nodes.link('slow-contender');
    link.partition([2, 3, 4]);
    const slow = redlockOn(link.urls, { retryCount: 0, nodeTimeoutMs: 100, random });
    await expect(slow.acquire('recovered-value', 10_000, { claim: 'tick-11' })).rejects.toBeInstanceOf(
      QuorumUnavailableError,
    );
    await sleep(100); // its cleanup has landed on the nodes it reaches
    for (const url of cluster.nodes.urls)
      expect(await inspect(url, (client) => client.mget(keys.lock, keys.claim))).toEqual([value, value]);
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
    // A late write of the other holder's acquire may land after the cleanup: it sets the value again.
    await onEveryNode(cluster.nodes.urls, (client) => client.get(keys.lock), value);
    link.heal();
    await first.release(other);
  });
});

describe.each([1, 3, 5])('starting a claim with %i node(s)', (count) => {
  const cluster = useNodes(count);
  const claimKey = (resource: string, claim: string): string => resourceKeys('tickwarden', resource, claim).claim;

  it('one start id per claim: a second publication of the same lease value cannot start it, a retry of the first can', async () => {
    const scheduler = redlockOn(cluster.nodes.urls);
    const worker = redlockOn(cluster.nodes.urls);
    await worker.probe({ nodeTimeoutMs: 5000 }); // connected: startClaim never retries, a slow first connect would fail it
    const lease = await scheduler.acquire('schedule-s', 1000, { claim: 'tick-1' });
    await worker.startClaim({
      resource: 'schedule-s',
      claim: 'tick-1',
      value: lease.value,
      start: String(lease.fence),
    });
    await worker.startClaim({
      resource: 'schedule-s',
      claim: 'tick-1',
      value: lease.value,
      start: String(lease.fence),
    });
    await onEveryNode(
      cluster.nodes.urls,
      (c) => c.get(claimKey('schedule-s', 'tick-1')),
      `${lease.value}|${lease.fence}`,
    );
    const second = await worker
      .startClaim({ resource: 'schedule-s', claim: 'tick-1', value: lease.value, start: String(lease.fence + 1) })
      .catch((e: unknown) => e);
    expect(second).toBeInstanceOf(ClaimStartedError);
    expect((second as ClaimStartedError).holder).toBe(`${lease.value}|${lease.fence}`);
    expect(isStartedClaim((second as ClaimStartedError).holder)).toBe(true);
  });

  it('a start that continues another (prior) accepts it; one that comes first seals the claim against the prior id arriving late', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const lease = await redlock.acquire('schedule-p', 1000, { claim: 'tick-p' });
    const request = { resource: 'schedule-p', claim: 'tick-p', value: lease.value };
    await redlock.startClaim({ ...request, start: 'first' });
    await redlock.startClaim({ ...request, start: 'retry', prior: 'first' });
    await onEveryNode(cluster.nodes.urls, (c) => c.get(claimKey('schedule-p', 'tick-p')), `${lease.value}|first`);
    // The retry came before the first start (its worker paused before starting, the job handed on): the first is refused.
    const other = await redlock.acquire('schedule-p2', 1000, { claim: 'tick-q' });
    await redlock.startClaim({
      resource: 'schedule-p2',
      claim: 'tick-q',
      value: other.value,
      start: 'retry',
      prior: 'first',
    });
    await expect(
      redlock.startClaim({ resource: 'schedule-p2', claim: 'tick-q', value: other.value, start: 'first' }),
    ).rejects.toBeInstanceOf(ClaimStartedError);
    await redlock.startClaim({
      resource: 'schedule-p2',
      claim: 'tick-q',
      value: other.value,
      start: 'retry',
      prior: 'first',
    });
  });

  it('a started claim is never granted again: a takeover by its value finds it claimed, even once the lease is released', async () => {
    const scheduler = redlockOn(cluster.nodes.urls, { retryCount: 0 });
    const lease = await scheduler.acquire('schedule-t', 1000, { claim: 'tick-2' });
    await scheduler.startClaim({ resource: 'schedule-t', claim: 'tick-2', value: lease.value, start: 'run-1' });
    await scheduler.release(lease);
    const takeover = await scheduler
      .acquire('schedule-t', 1000, { claim: 'tick-2', value: lease.value })
      .catch((e: unknown) => e);
    expect(takeover).toBeInstanceOf(ClaimAlreadyGrantedError);
    expect(isStartedClaim((takeover as ClaimAlreadyGrantedError).holder)).toBe(true);
    // Nor can anyone supply the started value itself.
    await expect(
      scheduler.acquire('schedule-t', 1000, { claim: 'tick-2', value: (takeover as ClaimAlreadyGrantedError).holder }),
    ).rejects.toThrow(/must not contain/);
  });

  it('a claim a node never recorded is recorded started there, for the claim retention', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { claimRetentionMs: 60_000 });
    // startClaim never retries: connected first, a slow first connect cannot leave node 0 out of it.
    await redlock.probe({ nodeTimeoutMs: 5000 });
    await redlock.startClaim({ resource: 'schedule-u', claim: 'tick-3', value: 'v1', start: 's1' });
    const [url] = cluster.nodes.urls;
    // Decided at a quorum: node 0's write may land after the call returned.
    await onEveryNode([url as string], (c) => c.get(claimKey('schedule-u', 'tick-3')), 'v1|s1');
    expect(await inspect(url as string, (c) => c.pttl(claimKey('schedule-u', 'tick-3')))).toBeGreaterThan(50_000);
    await expect(redlock.acquire('schedule-u', 1000, { claim: 'tick-3', value: 'v1' })).rejects.toBeInstanceOf(
      ClaimAlreadyGrantedError,
    );
  });
});

describe.each([1, 3, 5])('a takeover that starts the claim, with %i node(s)', (count) => {
  const cluster = useNodes(count);
  const keys = (resource: string, claim: string) => resourceKeys('tickwarden', resource, claim);

  it('one call starts the claim and takes the lease over; a retry of the same start succeeds again', async () => {
    const scheduler = redlockOn(cluster.nodes.urls);
    const worker = await connectedRedlockOn(cluster.nodes.urls);
    const lease = await scheduler.acquire('schedule-w', 1000, { claim: 'tick-1' });
    const start = { value: lease.value, claim: 'tick-1', start: String(lease.fence) };
    const taken = await worker.acquire('schedule-w', 2000, start);
    expect(taken.value).toBe(lease.value);
    expect(taken.fence).toBeGreaterThan(lease.fence);
    expect(taken.ttlMs).toBe(2000);
    await onEveryNode(
      cluster.nodes.urls,
      (c) => c.get(keys('schedule-w', 'tick-1').claim),
      `${lease.value}|${lease.fence}`,
    );
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('schedule-w', 'tick-1').lock), lease.value);
    // The lock's TTL is the takeover's, not what was left of the scheduler's.
    const ttls = await Promise.all(
      cluster.nodes.urls.map((url) => inspect(url, (c) => c.pttl(keys('schedule-w', 'tick-1').lock))),
    );
    expect(Math.max(...ttls)).toBeGreaterThan(1000);
    const again = await worker.acquire('schedule-w', 2000, start);
    expect(again.fence).toBeGreaterThan(taken.fence);
    await worker.release(again);
  });

  it('a second publication (another start id) is refused and leaves the running lease and its fence alone', async () => {
    const scheduler = redlockOn(cluster.nodes.urls);
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const lease = await scheduler.acquire('schedule-x', 1000, { claim: 'tick-2' });
    const running = await worker.acquire('schedule-x', 5000, {
      value: lease.value,
      claim: 'tick-2',
      start: String(lease.fence),
    });
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('schedule-x', 'tick-2').fence), String(running.fence));
    const second = await worker
      .acquire('schedule-x', 5000, { value: lease.value, claim: 'tick-2', start: String(lease.fence + 1) })
      .catch((e: unknown) => e);
    expect(second).toBeInstanceOf(ClaimStartedError);
    expect((second as ClaimStartedError).holder).toBe(`${lease.value}|${lease.fence}`);
    // Not raised: the running lease still extends. The claim is the first start's, with its retention.
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('schedule-x', 'tick-2').fence), String(running.fence));
    await onEveryNode(
      cluster.nodes.urls,
      (c) => c.get(keys('schedule-x', 'tick-2').claim),
      `${lease.value}|${lease.fence}`,
    );
    for (const url of cluster.nodes.urls)
      expect(await inspect(url, (c) => c.pttl(keys('schedule-x', 'tick-2').claim))).toBeGreaterThan(0);
    await worker.release(await worker.extend(running));
  });

  it('a claim granted to another value refuses the start; a claim no node recorded is started', async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    const other = await worker.acquire('schedule-y', 1000, { claim: 'tick-3' });
    const refused = await worker
      .acquire('schedule-y', 1000, { value: 'not-the-winner', claim: 'tick-3', start: 's1' })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ClaimStartedError);
    expect((refused as ClaimStartedError).holder).toBe(other.value);
    await worker.release(other);
    // Published without a contest (a backfilled tick): the start records the claim.
    const fresh = await worker.acquire('schedule-z', 1000, { value: 'v1', claim: 'tick-4', start: 's1' });
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys('schedule-z', 'tick-4').claim), 'v1|s1');
    await worker.release(fresh);
  });

  it('starts on many resources at once share one call per node', async () => {
    const worker = await connectedRedlockOn(cluster.nodes.urls);
    const resources = ['batch-a', 'batch-b', 'batch-c'];
    const leases = await Promise.all(
      resources.map((resource, i) => worker.acquire(resource, 1000, { value: `v${i}`, claim: 'tick', start: `s${i}` })),
    );
    for (const [i, resource] of resources.entries())
      await onEveryNode(cluster.nodes.urls, (c) => c.get(keys(resource, 'tick').claim), `v${i}|s${i}`);
    await Promise.all(leases.map((lease) => worker.release(lease)));
  });

  it('a start without a claim or a value, or with a bad fence range, is a settings error', async () => {
    const worker = redlockOn(cluster.nodes.urls);
    await expect(worker.acquire('r', 1000, { value: 'v', start: 's' })).rejects.toBeInstanceOf(InvalidSettingsError);
    await expect(worker.acquire('r', 1000, { claim: 'c', start: 's' })).rejects.toBeInstanceOf(InvalidSettingsError);
    await expect(worker.acquire('r', 1000, { value: 'v', claim: 'c', start: 'a|b' })).rejects.toBeInstanceOf(
      InvalidSettingsError,
    );
    await expect(
      worker.acquire('r', 1000, { value: 'v', claim: 'c', start: 's', fence: { from: 10, below: 10 } }),
    ).rejects.toBeInstanceOf(InvalidSettingsError);
    await expect(
      worker.acquire('r', 1000, { value: 'v', claim: 'c', start: 's', fence: { from: 1.5 } }),
    ).rejects.toBeInstanceOf(InvalidSettingsError);
  });
});

describe('starting a claim raced by two starts (5 nodes)', () => {
  const cluster = useNodes(5);

  it('at most one of many concurrent start ids reaches a quorum', async () => {
    const lease = await redlockOn(cluster.nodes.urls).acquire('schedule-r', 1000, { claim: 'tick-4' });
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        redlockOn(cluster.nodes.urls)
          .startClaim({ resource: 'schedule-r', claim: 'tick-4', value: lease.value, start: `s${i}` })
          .then(
            () => 'started',
            (error: unknown) =>
              error instanceof ClaimStartedError || error instanceof QuorumUnavailableError
                ? error.code
                : String(error),
          ),
      ),
    );
    expect(outcomes.filter((o) => o === 'started').length).toBeLessThanOrEqual(1);
    expect(outcomes.every((o) => o === 'started' || o === 'CLAIM_STARTED' || o === 'QUORUM_UNAVAILABLE')).toBe(true);
  });

  it('takeovers by one value with many start ids at once: at most one gets the lease, and its start holds the claim on a quorum', async () => {
    const lease = await redlockOn(cluster.nodes.urls).acquire('schedule-ts', 5000, { claim: 'tick-8' });
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        redlockOn(cluster.nodes.urls, { retryCount: 0 })
          .acquire('schedule-ts', 5000, { value: lease.value, claim: 'tick-8', start: `s${i}` })
          .then(
            () => `s${i}`,
            (error: unknown) =>
              error instanceof ClaimStartedError ||
              error instanceof QuorumUnavailableError ||
              error instanceof LockTakenError
                ? error.code
                : String(error),
          ),
      ),
    );
    const winners = outcomes.filter((o) => o.startsWith('s'));
    expect(winners.length).toBeLessThanOrEqual(1);
    expect(
      outcomes.every((o) => o.startsWith('s') || ['CLAIM_STARTED', 'QUORUM_UNAVAILABLE', 'LOCK_TAKEN'].includes(o)),
    ).toBe(true);
    if (winners[0] === undefined) return;
    // The winner's start is the one a quorum holds: no other start can ever reach one.
    const claim = resourceKeys('tickwarden', 'schedule-ts', 'tick-8').claim;
    const held = await Promise.all(cluster.nodes.urls.map((url) => inspect(url, (c) => c.get(claim))));
    expect(held.filter((h) => h === `${lease.value}|${winners[0]}`).length).toBeGreaterThanOrEqual(3);
  });

  it('with a minority of nodes down it still starts; with a majority down it fails as unavailable, naming the nodes', async () => {
    // Every live node must answer each start in time (a loaded machine may take more than 200 ms); paused ones never do.
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 1000 });
    const lease = await redlock.acquire('schedule-q', 1000, { claim: 'tick-5' });
    await cluster.nodes.node(0).pause();
    await cluster.nodes.node(1).pause();
    try {
      await redlock.startClaim({ resource: 'schedule-q', claim: 'tick-5', value: lease.value, start: 'a' });
      await cluster.nodes.node(2).pause();
      const error = await redlock
        .startClaim({ resource: 'schedule-q', claim: 'tick-6', value: lease.value, start: 'a' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(QuorumUnavailableError);
      expect((error as QuorumUnavailableError).nodeCauses.size).toBe(3);
    } finally {
      for (const i of [0, 1, 2]) await cluster.nodes.node(i).resume();
    }
  });
});
