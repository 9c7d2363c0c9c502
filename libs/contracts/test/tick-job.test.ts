import { describe, expect, it } from 'vitest';
import { InvalidTickJobError, leaseResource, parseTickJob, tickJobId, type TickJobData } from '../src/index.ts';

const job: TickJobData = {
  version: 1,
  schedule: 'payments/nightly-report',
  tickMs: 1_790_000_000_000,
  dueMs: 1_790_000_000_250,
  payload: { any: ['json'] },
  overlap: 'skip',
  lease: {
    resource: 'run:payments/nightly-report',
    value: 'a'.repeat(40),
    fence: 1_790_000_000_000_123,
    ttlMs: 30_000,
  },
  startDeadlineMs: null,
  maxRuntimeMs: 600_000,
  enqueuedBy: 'scheduler-0',
  enqueuedAtMs: 1_790_000_000_003,
};

describe('tick job contract', () => {
  it('job ids follow BullMQ rules: no colon, not all digits, one per schedule and tick', () => {
    const id = tickJobId('payments/nightly-report', job.tickMs);
    expect(id).toBe('payments/nightly-report@1790000000000');
    expect(id).not.toContain(':');
    expect(id).not.toMatch(/^\d+$/);
  });

  it('overlap allow gives each tick its own lease; skip and cancel-previous share one', () => {
    expect(leaseResource('t/a', 'allow', 1)).not.toBe(leaseResource('t/a', 'allow', 2));
    expect(leaseResource('t/a', 'skip', 1)).toBe(leaseResource('t/a', 'skip', 2));
    expect(leaseResource('t/a', 'cancel-previous', 1)).toBe(leaseResource('t/a', 'skip', 9));
  });

  it('parses a valid job and survives a JSON round trip', () => {
    expect(parseTickJob(JSON.parse(JSON.stringify(job)))).toEqual(job);
  });

  it.each([
    ['lease.value', { ...job, lease: { ...job.lease, value: 'short' } }],
    ['schedule', { ...job, schedule: 'no-slash' }],
    ['overlap', { ...job, overlap: 'sometimes' }],
    ['tickMs', { ...job, tickMs: -1 }],
    ['extra', { ...job, extra: true }],
  ])('names the bad field: %s', (field, data) => {
    const error = (() => {
      try {
        parseTickJob(data);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(InvalidTickJobError);
    expect((error as InvalidTickJobError).field).toBe(field === 'extra' ? '(root)' : field);
  });
});
