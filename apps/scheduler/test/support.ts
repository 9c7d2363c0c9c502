import type { Schedule } from '../src/index.ts';

/** A schedule with the config's defaults; tests override what they exercise. */
export function scheduleFixture(overrides: Partial<Schedule> & Pick<Schedule, 'id' | 'cron'>): Schedule {
  return {
    timezone: 'UTC',
    overlap: 'skip',
    leaseTtlMs: 30_000,
    jitterMs: 0,
    catchUpMs: 0,
    startDeadlineMs: undefined,
    maxRuntimeMs: undefined,
    attempts: 1,
    backoff: { type: 'fixed', delayMs: 0 },
    paused: false,
    queue: 'default',
    payload: null,
    ...overrides,
  };
}
