import { describe, expect, it } from 'vitest';
import { ReferenceClock, systemClock, type Clock } from '../src/index.ts';
import { betterAnchor, DRIFT_PER_MS, median, timeAtSend } from '../src/reference-clock.ts';
import { connectedRedlockOn, useNodes } from './support.ts';

/** The process clock with its wall time `skew.ms` off (a host whose NTP was down), its monotonic time untouched. */
function skewedHost(skew: { ms: number }): Clock {
  return { ...systemClock, wallMicros: () => systemClock.wallMicros() + skew.ms * 1000 };
}

/** How far a clock's wall time is off this host's true time, ms. */
const offTrueMs = (clock: Clock): number => clock.wallMicros() / 1000 - Date.now();

describe('ReferenceClock: wall time from the lock nodes, whatever the host clock says', () => {
  const cluster = useNodes(3);

  it("a host clock 29 s ahead: once sampled, the clock reads the nodes' time and says how far the host is off", async () => {
    const skew = { ms: 29_000 };
    const host = skewedHost(skew);
    const redlock = await connectedRedlockOn(cluster.nodes.urls, { clock: host });
    const reference = new ReferenceClock(redlock, host);
    expect([reference.anchored, reference.offsetMs]).toEqual([false, undefined]);
    // Before a first sample it is the host's clock.
    expect(offTrueMs(reference)).toBeGreaterThan(28_900);
    expect(await reference.sample()).toBe(true);
    expect(Math.abs(offTrueMs(reference))).toBeLessThan(100);
    expect(Math.abs((reference.offsetMs ?? 0) - 29_000)).toBeLessThan(100);
  });

  it('the host clock stepped after a sample changes nothing the clock reads, only the offset it reports', async () => {
    const skew = { ms: 0 };
    const host = skewedHost(skew);
    const redlock = await connectedRedlockOn(cluster.nodes.urls, { clock: host });
    const reference = new ReferenceClock(redlock, host);
    expect(await reference.sample()).toBe(true);
    skew.ms = -15_000;
    expect(Math.abs(offTrueMs(reference))).toBeLessThan(100);
    expect(Math.abs((reference.offsetMs ?? 0) + 15_000)).toBeLessThan(100);
    // Samples taken on a schedule follow the nodes; the step still changes nothing.
    const sampled: boolean[] = [];
    reference.start(20, (ok) => sampled.push(ok));
    await new Promise((resolve) => setTimeout(resolve, 200));
    reference.stop();
    expect(sampled.length).toBeGreaterThan(2);
    expect(sampled.every(Boolean)).toBe(true);
    expect(Math.abs(offTrueMs(reference))).toBeLessThan(100);
  });

  it('nodeTime: the median of the answers, with the slowest round trip counted', async () => {
    const redlock = await connectedRedlockOn(cluster.nodes.urls);
    const time = await redlock.nodeTime();
    expect(time).toBeDefined();
    expect(Math.abs((time?.micros ?? 0) / 1000 - Date.now())).toBeLessThan(100);
    expect(time?.roundTripMs).toBeGreaterThanOrEqual(0);
    expect(time?.roundTripMs).toBeLessThan(250);
  });

  it("a sample replaces the anchor only if its round trip is no worse than the anchor's, grown with its age", () => {
    const anchor = { micros: 1_000_000, atMono: 10_000, roundTripMs: 4 };
    expect(betterAnchor(undefined, { ...anchor, roundTripMs: 3000 })).toBe(true);
    // 2 s later: a sample as fast is taken, one slowed to 2 s (a loaded node) is not: it could be 1 s off.
    expect(betterAnchor(anchor, { micros: 3_000_000, atMono: 12_000, roundTripMs: 4 })).toBe(true);
    expect(betterAnchor(anchor, { micros: 3_000_000, atMono: 12_000, roundTripMs: 2000 })).toBe(false);
    // Once the anchor's own error, grown by the drift bound, is as large, the slower sample is better.
    const atMono = 10_000 + (1000 - 2) / DRIFT_PER_MS;
    expect(betterAnchor(anchor, { micros: 0, atMono, roundTripMs: 2000 })).toBe(true);
    expect(betterAnchor(anchor, { micros: 0, atMono: atMono - 1000, roundTripMs: 2000 })).toBe(false);
  });

  it('median and timeAtSend: a value a node gave; a reply taken back half its round trip', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2);
    expect(timeAtSend(['100', '500000'], 4)).toEqual({ micros: 100_498_000, roundTripMs: 4 });
  });
});

describe('ReferenceClock without a quorum of lock nodes', () => {
  const cluster = useNodes(3);

  it('no quorum answers: nodeTime is undefined, and the clock keeps following its last sample', async () => {
    const host = skewedHost({ ms: 20_000 });
    const redlock = await connectedRedlockOn(cluster.nodes.urls, { clock: host, nodeTimeoutMs: 200 });
    const reference = new ReferenceClock(redlock, host);
    expect(await reference.sample()).toBe(true);
    await Promise.all(cluster.nodes.nodes.slice(0, 2).map((node) => node.kill()));
    expect(await redlock.nodeTime()).toBeUndefined();
    expect(await reference.sample()).toBe(false);
    expect(Math.abs(offTrueMs(reference))).toBeLessThan(100);
  });
});
