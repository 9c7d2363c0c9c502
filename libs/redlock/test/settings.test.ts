import { describe, expect, it } from 'vitest';
import { DEFAULT_SETTINGS, InvalidSettingsError, Redlock, type LockNode } from '../src/index.ts';

const fakeNodes = (n: number): LockNode[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `node-${i}`,
    run: () => Promise.reject(new Error('unused')),
    close: async () => undefined,
  }));

function settingError(make: () => unknown): InvalidSettingsError {
  try {
    make();
  } catch (error) {
    if (error instanceof InvalidSettingsError) return error;
    throw error;
  }
  throw new Error('expected an InvalidSettingsError');
}

describe('settings', () => {
  it('defaults the quorum to a majority and accepts a stricter one', () => {
    expect(new Redlock(fakeNodes(1)).quorum).toBe(1);
    expect(new Redlock(fakeNodes(4)).quorum).toBe(3);
    expect(new Redlock(fakeNodes(5)).quorum).toBe(3);
    expect(new Redlock(fakeNodes(5), { quorum: 4 }).quorum).toBe(4);
    expect(new Redlock(fakeNodes(5), { quorum: 5 }).quorum).toBe(5);
  });

  it.each([
    [5, 2],
    [4, 2],
    [5, 6],
    [3, 2.5],
    [3, 0],
  ])('with %i nodes rejects quorum %s', (nodes, quorum) => {
    const error = settingError(() => new Redlock(fakeNodes(nodes), { quorum }));
    expect(error.setting).toBe('quorum');
    expect(error.code).toBe('INVALID_SETTINGS');
    expect(error.message).toContain('quorum');
  });

  it('rejects an empty node list', () => {
    expect(settingError(() => new Redlock([])).setting).toBe('nodes');
  });

  it.each([
    ['nodeTimeoutMs', 0],
    ['retryCount', -1],
    ['retryCount', 1.5],
    ['retryDelayMs', -1],
    ['retryJitterMs', Number.NaN],
    ['driftFactor', 0.5],
    ['minValidityMs', -5],
    ['claimRetentionMs', 0],
    ['reestablish', 'yes'],
    ['extendRatio', 1],
    ['maxBatchSize', 0],
    ['abortMarginMs', -1],
    ['maxHoldMs', Number.POSITIVE_INFINITY],
    ['keyPrefix', 'a{b}'],
    ['keyPrefix', 'a|b'],
  ])('names %s in the error when it is %s', (setting, value) => {
    const error = settingError(() => new Redlock(fakeNodes(3), { [setting]: value }));
    expect(error.setting).toBe(setting);
    expect(error.message).toContain(`"${setting}"`);
  });

  it('validates per-call overrides too', async () => {
    const redlock = new Redlock(fakeNodes(3));
    await expect(redlock.acquire('r', 1000, { retryCount: -2 })).rejects.toMatchObject({
      code: 'INVALID_SETTINGS',
      setting: 'retryCount',
    });
    await expect(redlock.acquire('r', 0)).rejects.toMatchObject({ code: 'INVALID_SETTINGS', setting: 'ttlMs' });
  });

  it('has one frozen defaults object', () => {
    expect(Object.isFrozen(DEFAULT_SETTINGS)).toBe(true);
    expect(DEFAULT_SETTINGS.extendRatio).toBeCloseTo(1 / 3);
  });
});
