import { describe, expect, it } from 'vitest';
import { systemRandom } from '../src/index.ts';

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
