import { queueName, tickClaim, tickJobId, type TickJobData } from '@tickwarden/contracts';
import { Redlock, resourceKeys } from '@tickwarden/redlock';
import { sleep, startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Scheduler, type OutcomeEvent, type Schedule, type SchedulerOptions } from '../src/index.ts';
import { RedisReplicaStore } from '../src/replica-store.ts';
import { PROGRESS_RESOURCE } from '../src/tick-marks.ts';
import { scheduleFixture } from './support.ts';

/**
 * The queue Redis down (killed, back from its AOF) for longer than half a lease TTL: the winner's
 * enqueue fails, and the ticks must be published once it is back, within their start deadline -
 * by the winner's retries or the other replicas' recovery. Back empty, what it lost is noticed.
 */
describe('the queue Redis down for a while, or back empty', () => {
  let locks: RedisNodes;
  let queueRedis: RedisNodes;
  beforeAll(async () => {
    [locks, queueRedis] = await Promise.all([
      startRedisNodes({ count: 3, aof: false }),
      startRedisNodes({ count: 1, aof: true }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([locks.close(), queueRedis.close()]);
  });

  /** A running replica as the scheduler's main starts one: its queue connection fails fast while the queue Redis is down. */
  async function startReplica(
    replicaId: string,
    schedules: Schedule[],
    options: Partial<SchedulerOptions> & Pick<SchedulerOptions, 'onOutcome'>,
  ) {
    const redlock = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
    const queue = new Redis(queueRedis.urls[0] as string, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
    queue.on('error', () => undefined);
    const scheduler = new Scheduler({
      replicaId,
      redlock,
      queueConnection: queue,
      logger: pino({ level: process.env['TEST_LOG'] ?? 'silent' }),
      ...options,
    });
    await scheduler.setSchedules(schedules);
    scheduler.start();
    return {
      redlock,
      async stop(): Promise<void> {
        await scheduler.stop();
        await redlock.close();
        queue.disconnect();
      },
    };
  }

  it('restarted empty while a schedule is paused: the replica says so (error), writes the pause back, and the schedule stays paused', async () => {
    const schedule = scheduleFixture({ id: 'team-q/paused', cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 3000 });
    const outcomes: OutcomeEvent[] = [];
    const { logger, lines } = capturingLogger();
    const admin = new Redis(queueRedis.urls[0] as string, { maxRetriesPerRequest: null });
    await new RedisReplicaStore(admin).pause(schedule.id, { by: 'ops', atMs: Date.now(), note: 'freeze' });
    const replica = await startReplica('p0', [schedule], { logger, onOutcome: (event) => outcomes.push(event) });
    try {
      await waitUntil(() => outcomes.some((o) => o.outcome === 'skipped-paused'), 'a paused tick');
      await queueRedis.nodes[0]?.restart({ keepData: false });
      const wipedAt = Date.now();
      await waitUntil(
        () =>
          lines.some((line) => line['level'] === 50 && String(line['msg']).startsWith('the queue Redis lost its data')),
        'the reset to be noticed',
        { timeoutMs: 10_000 },
      );
      expect(lines.find((line) => String(line['msg']).startsWith('the queue Redis lost its data'))).toMatchObject({
        restoredPauses: [schedule.id],
      });
      await waitUntil(
        async () => (await new RedisReplicaStore(admin).paused()).has(schedule.id),
        'the pause written back',
      );
      expect((await new RedisReplicaStore(admin).paused()).get(schedule.id)).toMatchObject({
        by: 'ops',
        note: 'freeze (restored after the queue Redis lost its data)',
      });
      await sleep(2000);
      expect(
        outcomes.filter((o) => o.tickMs > wipedAt && (o.outcome === 'enqueued' || o.outcome === 'recovered')),
      ).toEqual([]);
    } finally {
      await replica.stop();
      admin.disconnect();
    }
  });

  it('killed for 4 s and restarted from its AOF: every tick of the outage is published once, none lost', async () => {
    const schedule = scheduleFixture({ id: 'team-q/outage', cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 3000 });
    const outcomes: (OutcomeEvent & { replica: string })[] = [];
    const replicas = await Promise.all(
      ['q0', 'q1'].map((name) =>
        startReplica(name, [schedule], { onOutcome: (event) => outcomes.push({ ...event, replica: name }) }),
      ),
    );
    await sleep(2000);
    const node = queueRedis.nodes[0];
    if (!node) throw new Error('no queue Redis');
    await node.kill();
    const downFrom = Date.now();
    await sleep(4000);
    await node.restart({ keepData: true });
    const downTo = Date.now();
    // The default start deadline (leaseTtl + 10 s) leaves the recoveries time to run.
    await sleep(8000);
    await Promise.all(replicas.map((replica) => replica.stop()));

    const connection = new Redis(queueRedis.urls[0] as string, { maxRetriesPerRequest: null });
    const queue = new Queue(queueName(schedule.queue), { connection });
    try {
      const from = Math.floor(downFrom / 1000) * 1000 - 1000;
      const to = Math.ceil(downTo / 1000) * 1000 + 1000;
      for (let tick = from; tick <= to; tick += 1000) {
        const seen = `tick ${new Date(tick).toISOString()}: ${JSON.stringify(outcomes.filter((o) => o.tickMs === tick))}`;
        const publishing = outcomes.filter(
          (o) => o.tickMs === tick && (o.outcome === 'enqueued' || o.outcome === 'recovered'),
        );
        // One publisher at most; an add the kill cut off after it landed is found by recovery (its publisher never learnt it worked).
        expect(publishing.filter((o) => !o.found).length, seen).toBeLessThanOrEqual(1);
        expect(publishing.filter((o) => o.recorded).length, seen).toBe(1);
        expect(
          await queue.getJob(tickJobId(schedule.id, tick)),
          `the job of ${new Date(tick).toISOString()}`,
        ).toBeDefined();
      }
    } finally {
      await queue.close();
      connection.disconnect();
    }
  });

  it('restarted empty while jobs wait and after one started: each vanished tick is published again once, the started one never', async () => {
    // A 30 s lease: ticks are enqueued 9.5 s ahead, so several wait as delayed jobs when the data goes.
    const schedule = scheduleFixture({ id: 'team-q/wiped', cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 30_000 });
    // Its mark is only written at the gap check: after the loss, only the replica's memory has it.
    // Hourly at half an hour from now, so no tick of it is taken up while the test runs (that moves the mark).
    const minute = (new Date().getUTCMinutes() + 30) % 60;
    const hourly = scheduleFixture({
      id: 'team-q/hourly',
      cron: `0 ${minute} * * * *`,
      timezone: 'UTC',
      overlap: 'allow',
      leaseTtlMs: 30_000,
    });
    const outcomes: OutcomeEvent[] = [];
    const { logger, lines } = capturingLogger();
    const admin = new Redis(queueRedis.urls[0] as string, { maxRetriesPerRequest: null });
    const queue = new Queue(queueName(schedule.queue), { connection: admin });
    const published = (tickMs: number) =>
      outcomes.filter(
        (o) => o.tickMs === tickMs && (o.outcome === 'enqueued' || o.outcome === 'recovered') && !o.found,
      );
    const replica = await startReplica('w0', [schedule, hourly], {
      logger,
      gapCheckDelayMs: 0,
      onOutcome: (event) => outcomes.push(event),
    });
    const { redlock } = replica;
    const hourlyMark = () => admin.hget('tickwarden:control:marks', hourly.id);
    try {
      await waitUntil(() => outcomes.filter((o) => o.outcome === 'enqueued').length >= 4, 'ticks enqueued');
      await waitUntil(async () => (await hourlyMark()) !== null, "the gap check's marks written");
      const mark = await hourlyMark();
      // A worker starts the earliest published tick's job, as its first start does (takeOverLease).
      const startedTick = Math.min(...outcomes.filter((o) => o.outcome === 'enqueued').map((o) => o.tickMs));
      const job = await queue.getJob(tickJobId(schedule.id, startedTick));
      const data = job?.data as TickJobData;
      await redlock.startClaim({
        resource: data.lease.resource,
        claim: tickClaim(startedTick),
        value: data.lease.value,
        start: String(data.lease.fence),
      });
      const before = new Set(outcomes.filter((o) => o.outcome === 'enqueued').map((o) => o.tickMs));
      await queueRedis.nodes[0]?.restart({ keepData: false });
      await waitUntil(
        () => lines.some((line) => String(line['msg']).startsWith('ticks in flight opened again')),
        'the ticks in flight reopened',
        { timeoutMs: 10_000 },
      );
      await waitUntil(
        () => [...before].every((tickMs) => tickMs === startedTick || published(tickMs).length === 2),
        'every vanished tick published again',
        { timeoutMs: 15_000 },
      );
      for (const tickMs of before) {
        if (tickMs === startedTick) continue;
        expect(
          published(tickMs).map((o) => o.outcome),
          `tick ${new Date(tickMs).toISOString()}`,
        ).toEqual(['enqueued', 'recovered']);
        const again = (await queue.getJob(tickJobId(schedule.id, tickMs)))?.data as TickJobData | undefined;
        expect(again?.lease.fence, `the job of ${new Date(tickMs).toISOString()}`).toBeGreaterThan(0);
      }
      await waitUntil(
        () => outcomes.some((o) => o.tickMs === startedTick && o.found),
        'the started tick found on the lock nodes',
        { timeoutMs: 10_000 },
      );
      expect(published(startedTick).map((o) => o.outcome)).toEqual(['enqueued']);
      expect(await queue.getJob(tickJobId(schedule.id, startedTick))).toBeUndefined();
      expect(await hourlyMark()).toBe(mark);
    } finally {
      await replica.stop();
      await queue.close();
      admin.disconnect();
    }
  });

  it('every replica restarted, then restarted empty: the ticks the stopped replica enqueued ahead, due before the new one started, are published again once', async () => {
    // Ticks are enqueued 9.5 s ahead (the default lead).
    const schedule = everySecond('team-q/restart-all');
    const outcomes: (OutcomeEvent & { replica: string })[] = [];
    const { logger, lines } = capturingLogger();
    const published = (tickMs: number, replica: string) =>
      outcomes.filter(
        (o) =>
          o.tickMs === tickMs &&
          o.replica === replica &&
          (o.outcome === 'enqueued' || o.outcome === 'recovered') &&
          !o.found,
      );
    const onOutcome = (replica: string) => (event: OutcomeEvent) => outcomes.push({ ...event, replica });
    const first = await startReplica('r0', [schedule], { logger, gapCheckDelayMs: 0, onOutcome: onOutcome('r0') });
    // r0 enqueued (not only took up) each of the next 5 seconds' ticks.
    const enqueuedAhead = () => {
      const next = Math.ceil(Date.now() / 1000) * 1000;
      const ahead = [0, 1, 2, 3, 4].map((k) => next + k * 1000);
      return ahead.every((tickMs) => outcomes.some((o) => o.tickMs === tickMs && o.outcome === 'enqueued'));
    };
    await waitUntil(enqueuedAhead, 'ticks enqueued ahead');
    await first.stop();
    const stoppedMs = Date.now();
    // No replica runs for 2 s: the ticks due meanwhile were taken up by r0 alone, their jobs waiting.
    await sleep(2000);
    const second = await startReplica('r1', [schedule], { logger, gapCheckDelayMs: 5000, onOutcome: onOutcome('r1') });
    const startedMs = Date.now();
    try {
      await waitUntil(() => outcomes.some((o) => o.replica === 'r1'), 'r1 at work');
      await queueRedis.nodes[0]?.restart({ keepData: false });
      // Every second between: r0 took each up (9.5 s ahead), r1 none.
      const dueMeanwhile: number[] = [];
      for (let tickMs = Math.ceil(stoppedMs / 1000) * 1000; tickMs < startedMs; tickMs += 1000)
        dueMeanwhile.push(tickMs);
      expect(dueMeanwhile.length).toBeGreaterThanOrEqual(1);
      await waitUntil(
        () => dueMeanwhile.every((tickMs) => published(tickMs, 'r1').length > 0),
        'the ticks due while no replica ran published again',
        { timeoutMs: 15_000 },
      );
      for (const tickMs of dueMeanwhile)
        expect(
          published(tickMs, 'r1').map((o) => o.outcome),
          new Date(tickMs).toISOString(),
        ).toEqual(['recovered']);
      expect(lines.some((line) => String(line['msg']).startsWith('ticks in flight opened again'))).toBe(true);
    } finally {
      await second.stop();
    }
  });

  it("every replica stopped, then the queue Redis restarted empty before any came back: the replicas' progress on the lock nodes finds each tick", async () => {
    // A 1 s lead: the ticks due after the stopped replica's last ones, before the new one's first, were taken up by none.
    const schedule = everySecond('team-q/lost-while-down');
    const outcomes: (OutcomeEvent & { replica: string })[] = [];
    const { logger, lines } = capturingLogger();
    const onOutcome = (replica: string) => (event: OutcomeEvent) => outcomes.push({ ...event, replica });
    const of = (replica: string, tickMs: number) =>
      outcomes.filter((o) => o.replica === replica && o.tickMs === tickMs && !o.found).map((o) => o.outcome);
    const lead = { contestLeadMs: 1000, logger };
    // A fresh install: the earlier tests' replicas, with a longer lead, wrote progress past this test's start.
    const progressKey = resourceKeys('tickwarden', PROGRESS_RESOURCE).mark;
    for (const url of locks.urls) {
      const node = new Redis(url);
      await node.del(progressKey);
      node.disconnect();
    }
    const first = await startReplica('r0', [schedule], { ...lead, gapCheckDelayMs: 0, onOutcome: onOutcome('r0') });
    // r0's gap check ran and its progress went out (about once a second) for a few ticks.
    await waitUntil(() => outcomes.filter((o) => o.outcome === 'enqueued').length >= 4, 'r0 enqueued ticks');
    await first.stop();
    const enqueuedByR0 = outcomes.filter((o) => o.outcome === 'enqueued').map((o) => o.tickMs);
    const lastTakenUp = Math.max(...enqueuedByR0);
    await queueRedis.nodes[0]?.restart({ keepData: false });
    // No replica for 3 s: ticks due after r0's last ones were taken up by none.
    await sleep(3000);
    const second = await startReplica('r1', [schedule], { ...lead, gapCheckDelayMs: 1000, onOutcome: onOutcome('r1') });
    const startedMs = Date.now();
    try {
      const unseen: number[] = [];
      for (let tickMs = lastTakenUp + 1000; tickMs < startedMs - 1000; tickMs += 1000) unseen.push(tickMs);
      expect(unseen.length).toBeGreaterThanOrEqual(1);
      const decided = () =>
        enqueuedByR0.every((tickMs) => of('r1', tickMs).length > 0) &&
        unseen.every((tickMs) => of('r1', tickMs).length > 0);
      await waitUntil(decided, "r1 decided r0's ticks and those of the gap", { timeoutMs: 15_000 });
      // r0's jobs vanished before any worker started them: each published again, once.
      for (const tickMs of enqueuedByR0)
        expect(of('r1', tickMs), new Date(tickMs).toISOString()).toEqual(['recovered']);
      // The gap: recorded missed, not silent.
      for (const tickMs of unseen) expect(of('r1', tickMs), new Date(tickMs).toISOString()).toEqual(['missed']);
      expect(
        lines.some((line) => String(line['msg']).startsWith('the queue Redis lost its data while no replica ran')),
      ).toBe(true);
    } finally {
      await second.stop();
    }
  });
});

/** Every second, every other setting a team leaves out at its default; no worker takes the jobs here. */
function everySecond(id: string): Schedule {
  return scheduleFixture({ id, cron: '* * * * * *' });
}

/** An info-level logger whose records (parsed) are kept in `lines`. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}
