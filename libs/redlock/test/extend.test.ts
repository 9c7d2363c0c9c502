import { describe, expect, it } from 'vitest';
import { LeaseExpiredError, LeaseLostError, QuorumUnavailableError, resourceKeys } from '../src/index.ts';
import { inspect, redlockOn, sleep, TestClock, useNodes } from './support.ts';

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
    const ttls = await Promise.all(cluster.nodes.urls.map((url) => inspect(url, (c) => c.pttl(resourceKeys('tickwarden', 'extend').lock))));
    expect(ttls.every((ttl) => ttl > 2000)).toBe(true);
    await redlock.release(extended);
  });

  it('extends each lease of a batch by its own TTL when none is given', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const short = await redlock.acquire('own-ttl-short', 2000);
    const long = await redlock.acquire('own-ttl-long', 8000);
    const results = await redlock.extendBatch([short, long]);
    expect(results.every((r) => r.ok)).toBe(true);
    const pttls = (resource: string) => Promise.all(cluster.nodes.urls.map((url) => inspect(url, (c) => c.pttl(resourceKeys('tickwarden', resource).lock))));
    for (const ttl of await pttls('own-ttl-short')) expect(ttl).toBeLessThanOrEqual(2000);
    for (const ttl of await pttls('own-ttl-long')) expect(ttl).toBeGreaterThan(6000);
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

describe('revoke', () => {
  const cluster = useNodes(3);

  it('takes a lease away: the holder watchdog aborts as lease lost, and the next grant has a greater fence', async () => {
    const holder = redlockOn(cluster.nodes.urls, { abortMarginMs: 50 });
    // A clock far ahead: its token is above anything the revoker would propose from its own clock.
    const ahead = Object.assign(new TestClock(), { wallOffsetMicros: 3_600_000_000 });
    const aheadHolder = redlockOn(cluster.nodes.urls, { clock: ahead, abortMarginMs: 50 });
    for (const [name, redlock] of [['revoked', holder], ['revoked-ahead', aheadHolder]] as const) {
      const revoker = redlockOn(cluster.nodes.urls);
      let fence = 0;
      const reason = await redlock.using(name, 600, async (signal, lease) => {
        fence = lease.fence;
        await revoker.revoke(name);
        return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
      });
      expect(reason).toBeInstanceOf(LeaseLostError);
      const next = await revoker.acquire(name, 1000);
      expect(next.fence).toBeGreaterThan(fence);
      await revoker.release(next);
    }
  });

  it('a revocation for a claim leaves the lease of that claim\'s winner alone', async () => {
    const winner = redlockOn(cluster.nodes.urls);
    const lease = await winner.acquire('claimed-revoke', 5000, { claim: 'tick-1' });
    await redlockOn(cluster.nodes.urls).revoke('claimed-revoke', { claim: 'tick-1' });
    await expect(winner.extend(lease)).resolves.toMatchObject({ value: lease.value });
    await redlockOn(cluster.nodes.urls).revoke('claimed-revoke', { claim: 'tick-2' });
    await expect(winner.extend(lease)).rejects.toBeInstanceOf(LeaseLostError);
  });
});
