import { describe, expect, it } from 'vitest';
import {
  ClaimAlreadyGrantedError,
  LeaseExpiredError,
  LeaseLostError,
  LockTakenError,
  QuorumUnavailableError,
  resourceKeys,
  type Lease,
} from '../src/index.ts';
import { connectedRedlockOn, inspect, onEveryNode, redlockOn, sleep, TestClock, useNodes } from './support.ts';

describe.each([3, 5])('extend with %i nodes', (count) => {
  const cluster = useNodes(count);

  it('extends the keys and the validity, keeping value and fence', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    // A TTL long enough that a loaded CI machine still extends well inside it.
    const lease = await redlock.acquire('extend', 1000);
    await sleep(300);
    const extended = await redlock.extend(lease, 4000);
    expect(extended.value).toBe(lease.value);
    expect(extended.fence).toBe(lease.fence);
    expect(extended.validUntil).toBeGreaterThan(lease.validUntil + 2000);
    // Past the first TTL: the keys live on because of the extension.
    await sleep(1000);
    const ttls = await Promise.all(
      cluster.nodes.urls.map((url) => inspect(url, (c) => c.pttl(resourceKeys('tickwarden', 'extend').lock))),
    );
    expect(ttls.every((ttl) => ttl > 2000)).toBe(true);
    await redlock.release(extended);
  });

  it('extends each lease of a batch by its own TTL when none is given', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const short = await redlock.acquire('own-ttl-short', 2000);
    const long = await redlock.acquire('own-ttl-long', 8000);
    const results = await redlock.extendBatch([short, long]);
    expect(results.every((r) => r.ok)).toBe(true);
    const pttls = (resource: string) =>
      Promise.all(
        cluster.nodes.urls.map((url) => inspect(url, (c) => c.pttl(resourceKeys('tickwarden', resource).lock))),
      );
    for (const ttl of await pttls('own-ttl-short')) expect(ttl).toBeLessThanOrEqual(2000);
    // Decided at a quorum: a node the acquire or the extension reached late gets its key after the call returned.
    const longKey = resourceKeys('tickwarden', 'own-ttl-long').lock;
    await onEveryNode(cluster.nodes.urls, async (c) => (await c.pttl(longKey)) > 6000, true);
    await redlock.releaseBatch([short, long]);
  });

  it('refuses to extend a lease that already lapsed locally', async () => {
    const clock = new TestClock();
    const redlock = redlockOn(cluster.nodes.urls, { clock });
    const lease = await redlock.acquire('lapsed', 1000);
    clock.monotonicOffset += 1000;
    const error = await redlock.extend(lease).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseExpiredError);
    expect((error as LeaseExpiredError).code).toBe('LEASE_EXPIRED');
    await redlock.release(lease);
  });

  it('a majority reporting another value makes it LeaseLostError', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const lease = await redlock.acquire('stolen', 5000);
    const keys = resourceKeys('tickwarden', 'stolen');
    for (const url of cluster.nodes.urls) await inspect(url, (c) => c.set(keys.lock, 'someone-else'));
    const error = await redlock.extend(lease).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect([...(error as LeaseLostError).nodeCauses.values()].every((cause) => cause === 'taken')).toBe(true);
  });

  it('re-establishes the key (and the fence) on a node restarted empty', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const lease = await redlock.acquire('restarted', 5000);
    const node = cluster.nodes.node(0);
    await node.restart({ keepData: false });
    const keys = resourceKeys('tickwarden', 'restarted');
    // The client reconnects to the restarted node within a few extensions.
    let extended = lease;
    for (let i = 0; i < 40 && (await inspect(node.url, (c) => c.get(keys.lock))) !== lease.value; i++) {
      await sleep(25);
      extended = await redlock.extend(extended, 5000);
    }
    expect(await inspect(node.url, (c) => c.get(keys.lock))).toBe(lease.value);
    expect(await inspect(node.url, (c) => c.get(keys.fence))).toBe(String(lease.fence));
    await redlock.release(extended);
  });

  it('without re-establishing, keys gone on a majority make the lease lost', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { reestablish: false });
    const lease = await redlock.acquire('gone', 5000);
    const keys = resourceKeys('tickwarden', 'gone');
    for (const url of cluster.nodes.urls) await inspect(url, (c) => c.del(keys.lock));
    await expect(redlock.extend(lease)).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('a re-establish never overrides a later grant on that node', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const old = await redlock.acquire('later-grant', 5000);
    await redlock.release(old);
    const newer = await redlock.acquire('later-grant', 5000);
    await redlock.release(newer);
    // The old holder believes it still holds: every node has a fence above its token.
    const error = await redlock.extend(old).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect([...(error as LeaseLostError).nodeCauses.values()].every((cause) => cause === 'gone')).toBe(true);
  });

  it('a majority unreachable makes it QuorumUnavailableError; the lease keeps its old validity', async () => {
    const link = await cluster.nodes.link(`extend-partition-${count}`);
    const redlock = redlockOn(link.urls, { nodeTimeoutMs: 100 });
    const lease = await redlock.acquire('unreachable', 5000);
    link.partition(Array.from({ length: Math.floor(count / 2) + 1 }, (_, i) => i));
    const error = await redlock.extend(lease).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnavailableError);
    link.heal();
    await redlock.release(lease);
  });
});

describe('acquire with revoke', () => {
  const cluster = useNodes(3);

  it('takes a lease away in one step: the holder watchdog aborts as lease lost, and the new grant has a greater fence', async () => {
    const holder = redlockOn(cluster.nodes.urls, { abortMarginMs: 50 });
    // A clock far ahead: its token is above anything the revoker would propose from its own clock.
    const ahead = Object.assign(new TestClock(), { wallOffsetMicros: 3_600_000_000 });
    const aheadHolder = redlockOn(cluster.nodes.urls, { clock: ahead, abortMarginMs: 50 });
    for (const [name, redlock] of [
      ['revoked', holder],
      ['revoked-ahead', aheadHolder],
    ] as const) {
      const revoker = redlockOn(cluster.nodes.urls);
      let fence = 0;
      let next: Lease | undefined;
      const reason = await redlock.using(name, 600, async (signal, lease) => {
        fence = lease.fence;
        next = await revoker.acquire(name, 1000, { revoke: true });
        return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
      });
      expect(reason).toBeInstanceOf(LeaseLostError);
      expect(next?.fence).toBeGreaterThan(fence);
      // The revoked holder's release (at the end of `using`) left the new lease alone.
      await expect(revoker.extend(next as Lease)).resolves.toMatchObject({ value: next?.value });
      await revoker.release(next as Lease);
    }
  });

  it('no one slips in between: a takeover by the revoked value after the revocation finds the lock taken', async () => {
    const scheduler = redlockOn(cluster.nodes.urls);
    const queued = await scheduler.acquire('queued-run', 5000);
    const next = await redlockOn(cluster.nodes.urls).acquire('queued-run', 5000, { revoke: true });
    const worker = await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 });
    await expect(worker.acquire('queued-run', 5000, { value: queued.value })).rejects.toBeInstanceOf(LockTakenError);
    await scheduler.release(next);
  });

  it("grants only once the nodes' own clocks reach the not-before time: a revoker whose clock runs ahead can neither revoke nor take a free lock early", async () => {
    const holder = redlockOn(cluster.nodes.urls);
    const lease = await holder.acquire('not-before', 5000);
    const revoker = redlockOn(cluster.nodes.urls, { retryCount: 1 });
    // The revoker's own clock may say anything: the nodes read theirs (the host's, here).
    const early = await revoker
      .acquire('not-before', 5000, { revoke: true, notBeforeMs: Date.now() + 60_000 })
      .catch((error: unknown) => error);
    expect(early).toBeInstanceOf(LockTakenError);
    // Settled once a majority answered `early`.
    const causes = [...(early as LockTakenError).nodeCauses.values()];
    expect(causes.length).toBeGreaterThanOrEqual(2);
    expect(causes.every((cause) => cause === 'early')).toBe(true);
    await expect(holder.extend(lease)).resolves.toMatchObject({ value: lease.value });
    await expect(revoker.acquire('not-before-free', 5000, { notBeforeMs: Date.now() + 60_000 })).rejects.toBeInstanceOf(
      LockTakenError,
    );
    const next = await revoker.acquire('not-before', 5000, { revoke: true, notBeforeMs: Date.now() - 100 });
    await expect(holder.extend(lease)).rejects.toBeInstanceOf(LeaseLostError);
    await revoker.release(next);
  });

  it('a revoking grant says how long the revoked lock had left; over a free lock, with or without a start, it says nothing', async () => {
    const holder = redlockOn(cluster.nodes.urls);
    await holder.acquire('revoked-left', 5000);
    const revoker = redlockOn(cluster.nodes.urls);
    const next = await revoker.acquire('revoked-left', 3000, { revoke: true });
    // The holder's 5 s, less the moments between its grant and the revocation.
    expect(next.revokedMs).toBeGreaterThan(4000);
    expect(next.revokedMs).toBeLessThanOrEqual(5000);
    // A start revoking its predecessor says it too (beside the fence before, which a start's grant names).
    const started = await redlockOn(cluster.nodes.urls).acquire('revoked-left', 2000, {
      revoke: true,
      claim: 'tick-2',
      start: 'publication-1',
      value: 'a'.repeat(40),
    });
    expect(started.revokedMs).toBeGreaterThan(2000);
    expect(started.revokedMs).toBeLessThanOrEqual(3000);
    await revoker.release(started);
    const free = await revoker.acquire('revoked-left', 3000, { revoke: true });
    expect(free.revokedMs).toBeUndefined();
    const freeStart = await revoker.acquire('revoked-left-start', 3000, {
      revoke: true,
      claim: 'tick-1',
      start: 'publication-1',
      value: 'b'.repeat(40),
    });
    expect(freeStart.revokedMs).toBeUndefined();
  });

  it("a revocation for a claim leaves the lease of that claim's winner alone", async () => {
    const winner = redlockOn(cluster.nodes.urls);
    const lease = await winner.acquire('claimed-revoke', 5000, { claim: 'tick-1' });
    const late = await (
      await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 })
    )
      .acquire('claimed-revoke', 5000, { claim: 'tick-1', revoke: true })
      .catch((error: unknown) => error);
    expect(late).toBeInstanceOf(ClaimAlreadyGrantedError);
    await expect(winner.extend(lease)).resolves.toMatchObject({ value: lease.value });
    const next = await redlockOn(cluster.nodes.urls).acquire('claimed-revoke', 5000, { claim: 'tick-2', revoke: true });
    await expect(winner.extend(lease)).rejects.toBeInstanceOf(LeaseLostError);
    await winner.release(next);
  });
});
