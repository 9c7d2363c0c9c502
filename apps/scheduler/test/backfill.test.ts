import { parseTickJob, queueName, tickClaim } from '@tickwarden/contracts';
import { ClaimStartedError, LockTakenError, Redlock } from '@tickwarden/redlock';
import { RunHistory, type RunRecord } from '@tickwarden/runtime';
import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { historyReachMs, planBackfill } from '../src/backfill-plan.ts';
import { BackfillRangeError, backfillSchedule, type ControlContext } from '../src/control-actions.ts';
import type { TickRecord } from '../src/ports.ts';
import { RedisReplicaStore } from '../src/replica-store.ts';
import { scheduleFixture } from './support.ts';

const MINUTE = 60_000;
const record = (tickMs: number, outcome: TickRecord['outcome'], extra: Partial<TickRecord> = {}): TickRecord => ({
  tickMs,
  outcome,
  lagMs: 5,
  jobId: undefined,
  replica: 'r1',
  ...extra,
});
const run = (tickMs: number, outcome: RunRecord['outcome']): RunRecord => ({
  tickMs,
  jobId: `ops/job@${tickMs}`,
  outcome,
  attempt: 1,
  worker: 'w1',
  fence: 7,
  startedAtMs: tickMs,
  endedAtMs: tickMs + 10,
});

describe('backfill: which ticks it fires', () => {
  const t = (minute: number) => 1_800_000_000_000 + minute * MINUTE;

  it('fires ticks skipped, missed (alone or in a gap) or whose every job ended unrun; leaves ticks that ran, wait, or have no record', () => {
    const records = [
      record(t(1), 'skipped-paused'),
      record(t(2), 'enqueued'),
      record(t(3), 'missed', { reason: 'no-lock-quorum' }),
      record(t(6), 'missed', { reason: 'no-replica', gap: { firstTickMs: t(4), count: 3, atLeast: false } }),
      record(t(7), 'recovered'),
      record(t(8), 'enqueued'),
      record(t(9), 'enqueued'),
      record(t(10), 'backfilled'),
      // A replica of an earlier version decided overlaps itself: its records stay in the history.
      record(t(11), 'skipped-overlap' as TickRecord['outcome']),
      record(t(11), 'backfilled'),
      record(t(13), 'triggered'),
    ];
    const runs = [
      run(t(2), 'succeeded'),
      run(t(7), 'missed-deadline'),
      run(t(8), 'missed-deadline'),
      run(t(8), 'already-started'),
      run(t(10), 'succeeded'),
    ];
    const plan = planBackfill([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13].map(t), records, runs);
    expect(plan.map(({ action }) => action)).toEqual([
      'fire',
      'skip',
      'fire',
      'fire',
      'fire',
      'fire',
      'fire',
      'skip',
      'skip',
      'skip',
      'skip',
      'skip',
      'skip',
    ]);
    expect(plan[0]?.why).toBe('skipped-paused');
    expect(plan[1]?.why).toBe('enqueued; its run succeeded');
    expect(plan[2]?.why).toBe('missed (no-lock-quorum)');
    expect(plan[3]?.why).toBe('missed while no replica ran');
    expect(plan[6]?.why).toBe('recovered; its job did not run (missed-deadline)');
    // Another start of the tick ran: not fired.
    expect(plan[7]?.why).toBe('enqueued; its run already-started');
    expect(plan[8]?.why).toMatch(/^enqueued; no run recorded/);
    expect(plan[9]?.why).toBe('backfilled before');
    expect(plan[10]?.why).toBe('backfilled before');
    expect(plan[11]?.why).toMatch(/^no outcome recorded/);
    // A manual trigger's record is no tick's.
    expect(plan[12]?.why).toMatch(/^no outcome recorded/);
  });

  it('the history answers back to its oldest record once it holds `keep` entries, else back to maxAge', () => {
    const now = t(100);
    const retention = { keep: 3, maxAgeMs: 60 * MINUTE };
    expect(historyReachMs([record(t(90), 'enqueued'), record(t(91), 'enqueued')], retention, now)).toBe(t(40));
    const full = [
      record(t(92), 'enqueued'),
      record(t(91), 'missed', { gap: { firstTickMs: t(88), count: 4, atLeast: false } }),
      record(t(93), 'enqueued'),
    ];
    expect(historyReachMs(full, retention, now)).toBe(t(88));
    expect(historyReachMs(full, { keep: 3, maxAgeMs: 5 * MINUTE }, now)).toBe(t(95));
  });
});

describe('backfill against the lock nodes and the queue Redis', () => {
  let locks: RedisNodes;
  let queueNode: RedisNodes;
  let redis: Redis;
  let redlock: Redlock;
  let ctx: ControlContext;
  const said = { note: 'after the outage', by: 'alice' };

  beforeAll(async () => {
    [locks, queueNode] = await Promise.all([
      startRedisNodes({ count: 3, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    redis = new Redis(queueNode.urls[0] ?? '', { maxRetriesPerRequest: null });
    // startClaim never retries: its quorum must answer within the node timeout (the default 100 ms is
    // too short on a busy machine, the first calls' connections included).
    redlock = new Redlock(locks.urls, { nodeTimeoutMs: 1000 });
    ctx = { redis, redlock, publisherId: 'cli', logger: pino({ level: 'silent' }), now: Date.now };
  });
  afterAll(async () => {
    await redlock.close();
    redis.disconnect();
    await Promise.all([locks.close(), queueNode.close()]);
  });

  /** The ticks of the last `minutes` minutes of a per-minute schedule, oldest first. */
  const lastTicks = (minutes: number) => {
    const latest = Math.floor(Date.now() / MINUTE) * MINUTE;
    return Array.from({ length: minutes }, (_, i) => latest - (minutes - 1 - i) * MINUTE);
  };

  it('fires each tick that did not run once, as a job that waits for the lease; a second backfill fires nothing; the audit trail has it', async () => {
    const schedule = scheduleFixture({
      id: 'ops/minutely',
      cron: '0 * * * * *',
      queue: 'q-backfill',
      leaseTtlMs: 5000,
    });
    const [paused, ran, unrun, unrunClaimed, open] = lastTicks(6).slice(0, 5) as [
      number,
      number,
      number,
      number,
      number,
    ];
    const store = new RedisReplicaStore(redis);
    const entry = (r: TickRecord) => ({
      scheduleId: schedule.id,
      record: r,
      keepMs: MINUTE,
      retention: schedule.history,
    });
    await store.record([
      entry(record(paused, 'skipped-paused')),
      entry(record(ran, 'enqueued')),
      entry(record(unrun, 'enqueued')),
      entry(record(unrunClaimed, 'enqueued')),
    ]);
    const runs = new RunHistory(redis);
    for (const [tickMs, outcome] of [
      [ran, 'succeeded'],
      [unrun, 'missed-deadline'],
      [unrunClaimed, 'missed-deadline'],
    ] as const)
      await runs.append(schedule.id, run(tickMs, outcome), schedule.history);
    // The scheduler's grant of one unrun tick is still on the lock nodes, never started (its job missed its deadline).
    const granted = await redlock.acquire(`run:${schedule.id}`, 5000, { claim: tickClaim(unrunClaimed) });
    await redlock.release(granted);
    // A run of the schedule holds its lease now: the backfill does not need it.
    const running = await redlock.acquire(`run:${schedule.id}`, 10_000);

    const range = { fromMs: paused, toMs: open + 30_000, max: 10, dryRun: true };
    const dry = await backfillSchedule(ctx, schedule, range, said);
    expect(dry.ticks.map(({ tickMs, action }) => [tickMs, action])).toEqual([
      [paused, 'fire'],
      [ran, 'skip'],
      [unrun, 'fire'],
      [unrunClaimed, 'fire'],
      [open, 'skip'],
    ]);
    expect(await store.audits(schedule.id, 5)).toEqual([]);

    const done = await backfillSchedule(ctx, schedule, { ...range, dryRun: false }, said);
    expect(done).toMatchObject({ fired: 3, skipped: 2, failed: 0 });
    const queue = new Queue(queueName('q-backfill'), { connection: redis });
    try {
      for (const tickMs of [paused, unrun, unrunClaimed]) {
        const jobId = `${schedule.id}@${tickMs}-backfill`;
        expect(done.ticks.find((tick) => tick.tickMs === tickMs)?.jobId).toBe(jobId);
        const job = (await Job.fromId(queue, jobId)) as Job;
        const data = parseTickJob(job.data);
        expect(data).toMatchObject({
          tickMs,
          backfill: true,
          startDeadlineMs: null,
          enqueuedBy: 'cli',
          lease: { resource: `run:${schedule.id}` },
        });
        // The tick's claim is started for this job's first start: no other start, nor another backfill, can take it.
        await expect(
          redlock.startClaim({
            resource: data.lease.resource,
            claim: tickClaim(tickMs),
            value: 'f'.repeat(40),
            start: '1',
          }),
        ).rejects.toBeInstanceOf(ClaimStartedError);
        if (tickMs === unrunClaimed) expect(data.lease.value).toBe(granted.value);
        await redlock.startClaim({
          resource: data.lease.resource,
          claim: tickClaim(tickMs),
          value: data.lease.value,
          start: String(data.lease.fence),
        });
      }
      expect(await queue.count()).toBe(3);
    } finally {
      await queue.close();
    }
    const history = await store.history(schedule.id, 20);
    expect(
      history
        .filter((r) => r.outcome === 'backfilled')
        .map((r) => r.tickMs)
        .sort(),
    ).toEqual([paused, unrun, unrunClaimed]);
    // The tick's own record stays beside the backfill's.
    expect(
      history
        .filter((r) => r.tickMs === paused)
        .map((r) => r.outcome)
        .sort(),
    ).toEqual(['backfilled', 'skipped-paused']);

    const again = await backfillSchedule(ctx, schedule, { ...range, dryRun: false }, said);
    expect(again).toMatchObject({ fired: 0, skipped: 5 });
    expect(again.ticks.filter((tick) => tick.why === 'backfilled before').map((tick) => tick.tickMs)).toEqual([
      paused,
      unrun,
      unrunClaimed,
    ]);
    const audits = await store.audits(schedule.id, 5);
    expect(audits.map((a) => [a.action, a.by, a.note])).toEqual([
      ['backfill', 'alice', 'after the outage'],
      ['backfill', 'alice', 'after the outage'],
    ]);
    expect(audits[1]?.detail).toMatch(/: 3 fired, 2 skipped$/);
    await redlock.release(running);
  });

  it("a tick its worker skipped for an overlap, whose start holds its claim, is fired: the backfill's start replaces that one", async () => {
    const schedule = scheduleFixture({ id: 'ops/skipped', cron: '0 * * * * *', queue: 'q-skipped', leaseTtlMs: 5000 });
    const [skipped, ran] = lastTicks(3).slice(0, 2) as [number, number];
    const resource = `run:${schedule.id}`;
    await new RedisReplicaStore(redis).record(
      [skipped, ran].map((tickMs) => ({
        scheduleId: schedule.id,
        record: record(tickMs, 'enqueued'),
        keepMs: MINUTE,
        retention: schedule.history,
      })),
    );
    const runs = new RunHistory(redis);
    await runs.append(schedule.id, run(skipped, 'skipped-overlap'), schedule.history);
    await runs.append(schedule.id, run(ran, 'succeeded'), schedule.history);
    // As a replica and the workers did: both ticks claimed; the first one's start found a run holding the lease, the second ran.
    const claims = await redlock.claimBatch([skipped, ran].map((tickMs) => ({ resource, claim: tickClaim(tickMs) })));
    const [skippedValue, ranValue] = claims.map((c) => (c.ok ? c.claim.value : ''));
    const holder = await redlock.acquire(resource, 10_000);
    const start = (tickMs: number, value: string | undefined, id: string) =>
      redlock.acquire(resource, 5000, { value, claim: tickClaim(tickMs), start: id, retryCount: 0 });
    await expect(start(skipped, skippedValue, '7')).rejects.toBeInstanceOf(LockTakenError);
    await redlock.release(holder);
    await redlock.release(await start(ran, ranValue, '8'));

    const done = await backfillSchedule(ctx, schedule, { fromMs: skipped, toMs: ran, max: 10, dryRun: false }, said);
    expect(done.ticks.map(({ tickMs, action }) => [tickMs, action])).toEqual([
      [skipped, 'fire'],
      [ran, 'skip'],
    ]);
    const queue = new Queue(queueName('q-skipped'), { connection: redis });
    try {
      const data = parseTickJob(((await Job.fromId(queue, `${schedule.id}@${skipped}-backfill`)) as Job).data);
      expect(data.lease.value).toBe(skippedValue);
      // The claim is the backfill job's now: its start goes, the skipped job's start id no longer holds it.
      const claimOf = { resource, claim: tickClaim(skipped), value: skippedValue as string };
      await redlock.startClaim({ ...claimOf, start: String(data.lease.fence) });
      await expect(redlock.startClaim({ ...claimOf, start: '7' })).rejects.toBeInstanceOf(ClaimStartedError);
      expect(await queue.getJob(`${schedule.id}@${ran}-backfill`)).toBeUndefined();
    } finally {
      await queue.close();
    }
  });

  it('two backfills of one range at once fire each tick once', async () => {
    const schedule = scheduleFixture({ id: 'ops/racing', cron: '0 * * * * *', queue: 'q-race', leaseTtlMs: 5000 });
    const ticks = lastTicks(5).slice(0, 4);
    await new RedisReplicaStore(redis).record(
      ticks.map((tickMs) => ({
        scheduleId: schedule.id,
        record: record(tickMs, 'missed', { reason: 'no-lock-quorum' }),
        keepMs: MINUTE,
        retention: schedule.history,
      })),
    );
    const range = { fromMs: ticks[0] as number, toMs: ticks[3] as number, max: 10, dryRun: false };
    const [a, b] = await Promise.all([
      backfillSchedule(ctx, schedule, range, said),
      backfillSchedule(ctx, schedule, range, said),
    ]);
    expect(a.fired + b.fired).toBe(4);
    const queue = new Queue(queueName('q-race'), { connection: redis });
    try {
      expect(await queue.count()).toBe(4);
    } finally {
      await queue.close();
    }
  });

  it('refuses a range in the future, backwards, longer than --max, or older than the kept history, and fires nothing', async () => {
    const schedule = scheduleFixture({
      id: 'ops/refused',
      cron: '0 * * * * *',
      queue: 'q-refused',
      history: { keep: 2, maxAgeMs: 86_400_000 },
    });
    const [first, second, third] = lastTicks(4) as [number, number, number];
    const store = new RedisReplicaStore(redis);
    await store.record(
      [second, third].map((tickMs) => ({
        scheduleId: schedule.id,
        record: record(tickMs, 'skipped-paused'),
        keepMs: 0,
        retention: schedule.history,
      })),
    );
    const now = Date.now();
    const refused = (fromMs: number, toMs: number, max = 10) =>
      backfillSchedule(ctx, schedule, { fromMs, toMs, max, dryRun: false }, said);
    await expect(refused(now - MINUTE, now + MINUTE)).rejects.toThrow(/the range ends in the future/);
    await expect(refused(now, now - MINUTE)).rejects.toThrow(/the range starts \(.*\) after it ends/);
    await expect(refused(now - 11 * MINUTE, now)).rejects.toThrow(
      /holds more than 10 ticks of ops\/refused: narrow the range, or raise the maximum \(--max/,
    );
    const beyond = refused(first, third);
    await expect(beyond).rejects.toBeInstanceOf(BackfillRangeError);
    await expect(beyond).rejects.toThrow(
      `the tick history of ops/refused reaches back to ${new Date(second).toISOString()} (history: { keep: 2, maxAge: 1d })`,
    );
    expect(await store.audits(schedule.id, 5)).toEqual([]);
    expect((await refused(second, third)).fired).toBe(2);
  });

  it('a tick whose job cannot be enqueued is reported failed, not fired, and its claim stays held', async () => {
    const schedule = scheduleFixture({
      id: 'ops/unwritable',
      cron: '0 * * * * *',
      queue: 'q-unwritable',
      leaseTtlMs: 2000,
    });
    const [tickMs] = lastTicks(2) as [number];
    await new RedisReplicaStore(redis).record([
      {
        scheduleId: schedule.id,
        record: record(tickMs, 'skipped-paused'),
        keepMs: MINUTE,
        retention: schedule.history,
      },
    ]);
    // The queue Redis refuses writes (out of memory, noeviction): BullMQ's add fails.
    await redis.config('SET', 'maxmemory', '1');
    try {
      const result = await backfillSchedule(
        ctx,
        schedule,
        { fromMs: tickMs, toMs: tickMs, max: 10, dryRun: false },
        said,
      );
      expect(result).toMatchObject({ fired: 0, skipped: 0, failed: 1 });
      expect(result.ticks[0]?.why).toMatch(
        /^skipped-paused; its job not enqueued \(failed\): its claim is held until /,
      );
    } finally {
      await redis.config('SET', 'maxmemory', '0');
    }
    await expect(
      redlock.startClaim({
        resource: `run:${schedule.id}`,
        claim: tickClaim(tickMs),
        value: 'e'.repeat(40),
        start: '1',
      }),
    ).rejects.toBeInstanceOf(ClaimStartedError);
  });
});
