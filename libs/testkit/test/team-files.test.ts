import { DEFAULT_HISTORY } from '@tickwarden/config';
import { describe, expect, it } from 'vitest';
import { scheduleConfig } from '../src/index.ts';

describe('scheduleConfig', () => {
  it("gives what a team file leaves out the config's defaults, the fields given on top; team and name follow the id", () => {
    expect(scheduleConfig({ id: 'ops/nightly', cron: '0 2 * * *', leaseTtlMs: 5000 })).toMatchObject({
      id: 'ops/nightly',
      team: 'ops',
      name: 'nightly',
      cron: '0 2 * * *',
      leaseTtlMs: 5000,
      timezone: 'UTC',
      overlap: 'skip',
      payload: null,
      attempts: 1,
      backoff: { type: 'fixed', delayMs: 0 },
      history: { keep: DEFAULT_HISTORY.keep, maxAgeMs: DEFAULT_HISTORY.maxAge },
      queue: 'default',
    });
  });

  it('hands out copies: a test that changes one schedule changes no other', () => {
    scheduleConfig({ id: 'a/b' }).backoff.delayMs = 5;
    expect(scheduleConfig({ id: 'a/b' }).backoff.delayMs).toBe(0);
  });
});
