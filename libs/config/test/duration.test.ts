import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from '../src/index.ts';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['0s', 0],
    ['0ms', 0],
    ['30s', 30_000],
    ['10m', 600_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    ['1h30m', 5_400_000],
    ['2m30s', 150_000],
    ['1d2h3m4s5ms', 93_784_005],
    ['1.5s', 1_500],
    ['0.25m', 15_000],
    ['1.5h', 5_400_000],
    ['05m', 300_000],
  ])('%s is %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each([
    [''],
    ['30'],
    ['-5s'],
    ['+5s'],
    [' 30s'],
    ['30s '],
    ['30 s'],
    ['30S'],
    ['1w'],
    ['30sec'],
    ['1m1m'],
    ['30m1h'],
    ['1.s'],
    ['.5s'],
    ['0.5ms'],
    ['1e3ms'],
    ['Infinityms'],
    ['99999999999999999d'],
  ])('%j is not a duration', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [500, '500ms'],
    [90_000, '1m30s'],
    [93_784_005, '1d2h3m4s5ms'],
  ])('%i ms is %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
    expect(parseDuration(text)).toBe(ms);
  });

  it('rejects what is not a whole, non-negative number of milliseconds', () => {
    expect(() => formatDuration(-1)).toThrow(RangeError);
    expect(() => formatDuration(1.5)).toThrow(RangeError);
  });
});
