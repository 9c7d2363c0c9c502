import { afterEach, describe, expect, it, vi } from 'vitest';
import { systemClock, systemRandom } from '../src/index.ts';

describe('systemRandom', () => {
  it('hands out each pooled byte once: values stay distinct and unchanged across refills', () => {
    const first = systemRandom.bytes(20);
    const copy = Buffer.from(first);
    // 1,000 values of 20 bytes cross several 4 KiB refills.
    const values = Array.from({ length: 1000 }, () => systemRandom.bytes(20).toString('hex'));
    expect(new Set(values).size).toBe(1000);
    expect(values.every((value) => value.length === 40)).toBe(true);
    expect(first.equals(copy)).toBe(true);
  });

  it('serves sizes larger than the pool, and fractions in [0, 1)', () => {
    expect(systemRandom.bytes(10_000)).toHaveLength(10_000);
    const fractions = Array.from({ length: 100 }, () => systemRandom.fraction());
    expect(fractions.every((f) => f >= 0 && f < 1)).toBe(true);
  });
});

describe('systemClock', () => {
  afterEach(() => vi.useRealTimers());

  it('wall time follows the host clock, steps included; monotonic time does not', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const wall = Date.now();
    vi.setSystemTime(wall);
    const before = { wall: systemClock.wallMicros(), mono: systemClock.now() };
    expect(Math.abs(before.wall - wall * 1000)).toBeLessThan(1000);
    // The host clock steps an hour forward, then two hours back (NTP step, VM resume).
    vi.setSystemTime(wall + 3_600_000);
    expect(systemClock.wallMicros() - before.wall).toBeGreaterThan(3_599_000_000);
    vi.setSystemTime(wall - 3_600_000);
    expect(before.wall - systemClock.wallMicros()).toBeGreaterThan(3_599_000_000);
    expect(systemClock.now() - before.mono).toBeLessThan(1000);
  });
});
