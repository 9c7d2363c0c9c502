import { leaseResource, tickClaim, tickJobId } from '@tickwarden/contracts';
import { LeaseLostError, Redlock, systemClock, type Clock, type Lease } from '@tickwarden/redlock';
import { sleep, startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Scheduler, type OutcomeEvent, type Schedule, type TickObservation } from '../src/index.ts';
import { RedisReplicaStore } from '../src/replica-store.ts';
import { CLOCK_SKEW_TOLERANCE_MS } from '../src/tick-contest.ts';
import { scheduleFixture } from './support.ts';

function everySecond(id: string, overrides: Partial<Schedule> = {}): Schedule {
  return scheduleFixture({
    id,
    cron: '* * * * * *',
    overlap: 'allow',
    leaseTtlMs: 5000,
    payload: { id },
    ...overrides,
  });
}

/** A clock whose wall time is shifted by `offsetMs` (the replica's clock is skewed). */
function skewedClock(offsetMs: number): Clock {
  return { ...systemClock, wallMicros: () => systemClock.wallMicros() + offsetMs * 1000 };
}

/** The next whole second at least `aheadMs` from now. */
const nextSecond = (aheadMs: number) => Math.ceil((Date.now() + aheadMs) / 1000) * 1000;

interface Replica {
  scheduler: Scheduler;
  redlock: Redlock;
  queue: Redis;
}

/** An outcome as the test saw it: which replica told it, and when (the host clock, ms). */
type Seen = OutcomeEvent & { replica: string; atMs: number };

describe('replicated schedulers', () => {
  let locks: RedisNodes;
  let queueRedis: RedisNodes;
  const outcomes: Seen[] = [];
  const observations: { replica: string; observation: TickObservation; scheduleId: string; tickMs: number }[] = [];

  beforeAll(async () => {
    [locks, queueRedis] = await Promise.all([
      startRedisNodes({ count: 5, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([locks.close(), queueRedis.close()]);
  });

  const queueUrl = () => queueRedis.urls[0] ?? '';

  function startReplica(
    name: string,
    schedules: Schedule[],
    clock: Clock = systemClock,
    lockClock: Clock = clock,
    extra: { contestLeadMs?: number; lockUrls?: string[]; contestAll?: boolean } = {},
  ): Replica {
    const { lockUrls = locks.urls, ...options } = extra;
    const redlock = new Redlock(lockUrls, { clock: lockClock, nodeTimeoutMs: 250 });
    const queue = new Redis(queueUrl(), { maxRetriesPerRequest: null });
    const scheduler = new Scheduler({
      replicaId: name,
      redlock,
      queueConnection: queue,
      clock,
      logger: pino({ level: process.env['TEST_LOG'] ?? 'silent' }),
      onOutcome: (event) => outcomes.push({ ...event, replica: name, atMs: Date.now() }),
      onObservation: (observation, scheduleId, tickMs) =>
        observations.push({ replica: name, observation, scheduleId, tickMs }),
      ...options,
    });
    scheduler.setSchedules(schedules);
    scheduler.start();
    return { scheduler, redlock, queue };
  }

  async function stopReplica({ scheduler, redlock, queue }: Replica): Promise<void> {
    await scheduler.stop();
    await redlock.close();
    queue.disconnect();
  }

  /** The cluster's record of each tick in [from, to): per tick, the outcomes recorded (recorded = true), in order. */
  function records(schedule: string, from: number, to: number): Map<number, string[]> {
    const byTick = new Map<number, string[]>();
    for (const o of outcomes) {
      if (o.scheduleId !== schedule || !o.recorded || o.tickMs < from || o.tickMs >= to) continue;
      byTick.set(o.tickMs, [...(byTick.get(o.tickMs) ?? []), o.outcome]);
    }
    return byTick;
  }

  /** Replicas that enqueued or recovered each tick (their add made the job). */
  function publishers(schedule: string, tickMs: number): string[] {
    return outcomes
      .filter(
        (o) =>
          o.scheduleId === schedule &&
          o.tickMs === tickMs &&
          (o.outcome === 'enqueued' || o.outcome === 'recovered') &&
          !o.found,
      )
      .map((o) => o.replica);
  }

  async function storedJob(queueName: string, jobId: string) {
    const connection = new Redis(queueUrl(), { maxRetriesPerRequest: null });
    const queue = new Queue(queueName, { connection });
    try {
      const job = await queue.getJob(jobId);
      return job
        ? {
            data: job.data as {
              tickMs: number;
              dueMs: number;
              lease: { value: string; fence: number };
              enqueuedBy: string;
            },
            state: await job.getState(),
            readyAtMs: job.timestamp + job.delay,
          }
        : undefined;
    } finally {
      await queue.close();
      connection.disconnect();
    }
  }

  it('three replicas, clocks skewed by +-500 ms: 200 per-second ticks, each enqueued exactly once and recorded once', async () => {
    const schedules = Array.from({ length: 20 }, (_, i) => everySecond(`team-${i % 4}/job-${i}`));
    const replicas = [
      startReplica('r0', schedules, skewedClock(-500)),
      startReplica('r1', schedules),
      startReplica('r2', schedules, skewedClock(500)),
    ];
    const from = nextSecond(1500);
    await sleep(13_000);
    const to = Date.now() - 1500;
    await Promise.all(replicas.map(stopReplica));
    let ticks = 0;
    for (const schedule of schedules) {
      for (let tick = from; tick < to; tick += 1000) {
        ticks++;
        expect(publishers(schedule.id, tick), `${schedule.id} @ ${tick}`).toHaveLength(1);
        expect(records(schedule.id, tick, tick + 1).get(tick), `${schedule.id} @ ${tick}`).toEqual(['enqueued']);
      }
    }
    expect(ticks).toBeGreaterThanOrEqual(200);
  });

  it('the lock majority down for 6.5 s: nothing is enqueued meanwhile; once it is back the ticks of the outage are recovered, each once, within their start deadline', async () => {
    const schedule = everySecond('team-c/majority');
    const replicas = [startReplica('m0', [schedule]), startReplica('m1', [schedule])];
    await sleep(1500);
    const down = locks.nodes.slice(0, 3);
    for (const node of down) await node.kill();
    const downFrom = Date.now();
    await sleep(6500);
    const downTo = Date.now();
    for (const node of down) await node.restart({ keepData: false });
    await sleep(4000);
    await Promise.all(replicas.map(stopReplica));
    // Ticks contested wholly while the nodes were down (allow: 1.7 s ahead, a contest retries for up to
    // 2.5 s), and contested again at their due time at least a second before the nodes came back.
    const from = Math.ceil((downFrom + 2500) / 1000) * 1000;
    const to = Math.floor((downTo - 1000) / 1000) * 1000;
    expect(to - from).toBeGreaterThanOrEqual(1000);
    expect(
      observations.some(
        (o) => o.scheduleId === schedule.id && o.observation === 'lock-unavailable' && o.tickMs >= from,
      ),
    ).toBe(true);
    for (let tick = from; tick <= to; tick += 1000) {
      expect(records(schedule.id, tick, tick + 1).get(tick), `tick ${tick}`).toEqual(['recovered']);
      expect(publishers(schedule.id, tick)).toHaveLength(1);
    }
  });

  it('the lock majority down past the start deadline: each tick of the outage is recorded missed once, with why', async () => {
    const schedule = everySecond('team-c/deadline', { startDeadlineMs: 1500 });
    const replicas = [startReplica('d0', [schedule]), startReplica('d1', [schedule])];
    await sleep(1500);
    const down = locks.nodes.slice(0, 3);
    for (const node of down) await node.kill();
    const downFrom = Date.now();
    // Down past both ticks' start deadlines (the later one's is at most downFrom + 6 s): back earlier,
    // recovery could still publish it in time, as it should.
    await sleep(6500);
    for (const node of down) await node.restart({ keepData: false });
    await sleep(2500);
    await Promise.all(replicas.map(stopReplica));
    const from = Math.ceil((downFrom + 2500) / 1000) * 1000;
    // Each recorded once; the order they were recorded in is the replicas' (recovery takes open ticks in any order).
    const missed = [...records(schedule.id, from, from + 2000)].sort(([a], [b]) => a - b);
    expect(missed).toEqual([
      [from, ['missed']],
      [from + 1000, ['missed']],
    ]);
    const history = await new RedisReplicaStore(new Redis(queueUrl())).history(schedule.id, 100);
    expect(history.filter((r) => r.tickMs >= from && r.tickMs < from + 2000).map((r) => r.reason)).toEqual([
      'no-lock-quorum',
      'no-lock-quorum',
    ]);
  });

  it('a winner whose lease lapsed before its enqueue (paused between claim and enqueue) does not enqueue under it: the tick is recovered once', async () => {
    const schedule = everySecond('team-p/paused-winner', { leaseTtlMs: 1000 });
    // The lock library's monotonic time leaps a lease TTL right after each tick's first grant: as if the process was paused there.
    let leapMs = 0;
    const granted = new Set<string>();
    const lockClock: Clock = { ...systemClock, now: () => systemClock.now() + leapMs };
    const replica = startReplica('p0', [schedule], systemClock, lockClock);
    replica.redlock.on('acquired', ({ resource }) => {
      if (granted.has(resource)) return;
      granted.add(resource);
      leapMs += schedule.leaseTtlMs;
    });
    const from = nextSecond(500);
    await sleep(5000);
    await stopReplica(replica);
    const to = Date.now() - 2500;
    expect(
      observations.filter((o) => o.scheduleId === schedule.id && o.observation === 'lease-lapsed').length,
    ).toBeGreaterThan(0);
    for (let tick = from; tick < to; tick += 1000)
      expect(records(schedule.id, tick, tick + 1).get(tick), `tick ${tick}`).toEqual(['recovered']);
  });

  it('a publisher whose add finds another job of the tick stored (paused in its add) records lost-race and releases its lease', async () => {
    const schedule = everySecond('team-q/paused-in-add', { leaseTtlMs: 1000 });
    const tick = nextSecond(1500);
    const connection = new Redis(queueUrl(), { maxRetriesPerRequest: null });
    const queue = new Queue('tickwarden-default', { connection });
    await queue.add(
      schedule.id,
      { lease: { value: 'another-replicas-lease', fence: 1 }, enqueuedBy: 'q9' },
      { jobId: tickJobId(schedule.id, tick), delay: 60_000 },
    );
    const replica = startReplica('q0', [schedule]);
    await sleep(tick + 1500 - Date.now());
    await stopReplica(replica);
    await queue.close();
    connection.disconnect();
    expect(publishers(schedule.id, tick)).toEqual([]);
    expect(
      observations.filter((o) => o.scheduleId === schedule.id && o.tickMs === tick).map((o) => o.observation),
    ).toContain('lost-race');
    // Released: the stored job's worker can take the resource (no retry). Its clients connect first:
    // on a busy machine that can take longer than the default node timeout.
    const worker = new Redlock(locks.urls, { retryCount: 0, nodeTimeoutMs: 2000 });
    await expect(
      worker.acquire(leaseResource(schedule.id, 'allow', tick), 1000, { value: 'f'.repeat(40) }),
    ).resolves.toMatchObject({ fence: expect.any(Number) });
    await worker.close();
    expect(publishers(schedule.id, tick - 1000)).toEqual(['q0']);
  });

  it("a previous run's lease held on two nodes while a third is down: the tick is skipped for overlap, not lost as lock-unavailable", async () => {
    const schedule = everySecond('team-h/held', { overlap: 'skip' });
    // The holder holds the schedule's lease on nodes 0-2 only (4 and 5 reset: nothing lands there); then
    // node 2 goes down: the scheduler sees "taken" twice, one node unreachable, two nodes free.
    const link = await locks.link('held-holder');
    for (const node of [3, 4]) link.setFault(node, { kind: 'reset' });
    const holder = new Redlock(link.urls, { nodeTimeoutMs: 250, retryCount: 0 });
    // Its first call: nodes 0-2 must all connect (through the proxy) and grant, which on a busy machine
    // can take longer than 250 ms. Decided at the quorum: the reset nodes do not hold it up.
    const lease = await holder.acquire(leaseResource(schedule.id, 'skip', 0), 30_000, { nodeTimeoutMs: 2000 });
    await locks.node(2).kill();
    const replica = startReplica('h0', [schedule]);
    const from = nextSecond(500);
    await sleep(3000);
    await stopReplica(replica);
    const seen = [...records(schedule.id, from, Date.now() - 500).values()];
    expect(seen.length).toBeGreaterThan(0);
    expect(
      seen.every((recorded) => recorded.join() === 'skipped-overlap'),
      JSON.stringify(seen),
    ).toBe(true);
    await locks.node(2).restart({ keepData: false });
    await holder.release(lease);
    await holder.close();
  });

  it('a starting replica contests its whole lead one due second after the other, the soonest first', async () => {
    // A 30 s lease: the lead is the default 9.5 s, so the start finds about ten due seconds at once.
    const schedules = Array.from({ length: 6 }, (_, i) =>
      scheduleFixture({ id: `team-lead/job-${i}`, cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 30_000 }),
    );
    const redlock = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
    const contests: number[][] = [];
    const acquireBatch = redlock.acquireBatch.bind(redlock);
    redlock.acquireBatch = (requests, ttlMs, options) => {
      contests.push([...new Set(requests.map((request) => Number(request.claim?.slice('tick:'.length))))]);
      return acquireBatch(requests, ttlMs, options);
    };
    const queue = new Redis(queueUrl(), { maxRetriesPerRequest: null });
    const scheduler = new Scheduler({
      replicaId: 'lead',
      redlock,
      queueConnection: queue,
      logger: pino({ level: 'silent' }),
    });
    scheduler.setSchedules(schedules);
    scheduler.start();
    await sleep(500);
    await stopReplica({ scheduler, redlock, queue });
    // The start's backlog: one contest per due second (every schedule's tick of that second), in due order.
    const backlog = contests.slice(0, 9);
    expect(backlog.every((ticks) => ticks.length === 1)).toBe(true);
    const seconds = backlog.map((ticks) => ticks[0] as number);
    expect(seconds).toEqual([...seconds].sort((a, b) => a - b));
    expect(new Set(seconds).size).toBe(9);
  });

  it('catch-up after every replica was down: the missed tick inside the window fires once, late; without catch-up it is not fired', async () => {
    const withCatchUp = scheduleFixture({
      id: 'team-d/catch-up',
      cron: '*/5 * * * * *',
      overlap: 'allow',
      leaseTtlMs: 5000,
      catchUpMs: 10_000,
    });
    const without = scheduleFixture({
      id: 'team-d/no-catch-up',
      cron: '*/5 * * * * *',
      overlap: 'allow',
      leaseTtlMs: 5000,
    });
    // Stop the only replica before it contests a tick (the lead: a third of the 5 s lease TTL), and start again 1.5 s after it.
    const missedTick = Math.ceil((Date.now() + 4000) / 5000) * 5000;
    const first = startReplica('c0', [withCatchUp, without]);
    await sleep(missedTick - 2500 - Date.now());
    await stopReplica(first);
    await sleep(missedTick + 1500 - Date.now());
    const second = startReplica('c1', [withCatchUp, without]);
    // c1 catches the missed tick up (publishes it) before c2 starts.
    await waitUntil(() => publishers('team-d/catch-up', missedTick).length > 0, 'c1 to publish the missed tick', {
      timeoutMs: 5000,
    });
    // c2 contests every tick, as if it did not know c1 yet: the two race for the missed tick.
    const third = startReplica('c2', [withCatchUp, without], systemClock, systemClock, { contestAll: true });
    const c2Saw = (o: { replica: string; scheduleId: string; tickMs: number }) =>
      o.replica === 'c2' && o.scheduleId === 'team-d/catch-up' && o.tickMs === missedTick;
    // Until c2 contested it (what it made of it is checked below).
    await waitUntil(() => observations.some(c2Saw) || outcomes.some(c2Saw), 'c2 to contest the missed tick', {
      timeoutMs: 5000,
    });
    await Promise.all([stopReplica(second), stopReplica(third)]);
    expect(publishers('team-d/catch-up', missedTick)).toEqual(['c1']);
    expect(
      observations
        .filter((o) => o.scheduleId === 'team-d/catch-up' && o.tickMs === missedTick && o.replica === 'c2')
        .map((o) => o.observation),
    ).toEqual(['lost-race']);
    expect(publishers('team-d/no-catch-up', missedTick)).toEqual([]);
  });

  it('a completed tick is not run again when a replica restarts with catchUp after its job was removed: its publish marker says it ran', async () => {
    const tick = nextSecond(2000);
    // Once a minute, at the tick's second; catch-up reaches back over it.
    const schedule = scheduleFixture({
      id: 'team-k/nightly',
      cron: `${new Date(tick).getUTCSeconds()} * * * * *`,
      overlap: 'skip',
      leaseTtlMs: 2000,
      catchUpMs: 50_000,
    });
    const first = startReplica('k0', [schedule]);
    await sleep(tick + 1000 - Date.now());
    await stopReplica(first);
    expect(publishers(schedule.id, tick)).toEqual(['k0']);
    // The run completes and BullMQ removes the job by age (removeOnComplete), as it does minutes later in
    // production; the tick's history is gone too (trimmed). Only the publish marker is left.
    const connection = new Redis(queueUrl(), { maxRetriesPerRequest: null });
    const queue = new Queue('tickwarden-default', { connection });
    const jobId = tickJobId(schedule.id, tick);
    await connection.del(queue.toKey(jobId));
    await connection.zrem(queue.toKey('delayed'), jobId);
    await connection.lrem(queue.toKey('wait'), 0, jobId);
    await connection.del(`tickwarden:control:ticks:{${schedule.id}}`);
    const second = startReplica('k1', [schedule]);
    await sleep(3500);
    await stopReplica(second);
    expect(await queue.getJob(jobId)).toBeUndefined();
    await queue.close();
    connection.disconnect();
    expect(publishers(schedule.id, tick)).toEqual(['k0']);
    // k1 caught the tick up, found it published, and recorded that (not a run).
    expect(
      outcomes
        .filter((o) => o.scheduleId === schedule.id && o.tickMs === tick && o.replica === 'k1')
        .map((o) => [o.outcome, o.found]),
    ).toEqual([['enqueued', true]]);
  });

  it("a winner that dies between claim and enqueue: another replica recovers the tick within the lease TTL plus a second, under the claim's lease", async () => {
    const schedule = everySecond('team-e/orphan', { leaseTtlMs: 2000 });
    // Play the dead winner: claim the next tick (lease and claim granted) and never enqueue.
    const tick = nextSecond(1500);
    const deadWinner = new Redlock(locks.urls);
    const claimed = await deadWinner.acquire(leaseResource(schedule.id, 'allow', tick), 2000, {
      claim: tickClaim(tick),
    });
    await deadWinner.close();
    const replicas = [startReplica('o0', [schedule]), startReplica('o1', [schedule])];
    await waitUntil(() => publishers(schedule.id, tick).length > 0, 'the tick recovered', { timeoutMs: 10_000 });
    const recoveredAt = Date.now();
    await sleep(1500);
    await Promise.all(replicas.map(stopReplica));
    expect(recoveredAt - tick).toBeLessThanOrEqual(schedule.leaseTtlMs + 1000);
    // The tick's preferred contender found the claim granted (the other left the tick to it).
    expect(
      observations.filter((o) => o.scheduleId === schedule.id && o.tickMs === tick && o.observation === 'lost-race')
        .length,
    ).toBeGreaterThanOrEqual(1);
    expect(records(schedule.id, tick, tick + 1).get(tick)).toEqual(['recovered']);
    expect(publishers(schedule.id, tick)).toHaveLength(1);
    // The claim is honoured: the job carries the claim's lease value (a worker takes that lease over).
    expect((await storedJob('tickwarden-default', tickJobId(schedule.id, tick)))?.data.lease.value).toBe(claimed.value);
  });

  it("a contender that died mid-contest left the tick's claim on two of five nodes, and a third node hangs: recovery takes that claim over and the tick is recovered", async () => {
    const schedule = everySecond('team-k/split', { leaseTtlMs: 2000 });
    const tick = nextSecond(1500);
    // The dead contender got two nodes only (a split it never released).
    const deadContender = new Redlock(locks.urls.slice(0, 2));
    const partial = await deadContender.acquire(leaseResource(schedule.id, 'allow', tick), 2000, {
      claim: tickClaim(tick),
    });
    await deadContender.close();
    await locks.node(4).pause();
    let recoveredAt: number;
    try {
      const replicas = [startReplica('k0', [schedule]), startReplica('k1', [schedule])];
      // Only nodes 2 and 3 are free: no fresh value can win until node 4 answers again.
      // Before the tick's start deadline (leaseTtl + 10 s by default); recoverers retry about every second.
      await waitUntil(() => publishers(schedule.id, tick).length > 0, 'the tick recovered while node 4 hangs', {
        timeoutMs: tick + schedule.leaseTtlMs + 10_000 - Date.now(),
      });
      recoveredAt = Date.now();
      await sleep(1500);
      await Promise.all(replicas.map(stopReplica));
    } finally {
      await locks.node(4).resume();
    }
    // Within its start deadline (leaseTtl + 10 s by default), while node 4 still hung.
    expect(recoveredAt - tick).toBeLessThan(schedule.leaseTtlMs + 10_000);
    expect(records(schedule.id, tick, tick + 1).get(tick)).toEqual(['recovered']);
    expect(publishers(schedule.id, tick)).toHaveLength(1);
    expect((await storedJob('tickwarden-default', tickJobId(schedule.id, tick)))?.data.lease.value).toBe(partial.value);
  });

  it('every replica that took a tick up stopped before deciding it: a replica started later (no catch-up) recovers it', async () => {
    const schedule = everySecond('team-g/orphan', { leaseTtlMs: 2000 });
    const tick = nextSecond(1500);
    const deadWinner = new Redlock(locks.urls);
    const claimed = await deadWinner.acquire(leaseResource(schedule.id, 'allow', tick), 2000, {
      claim: tickClaim(tick),
    });
    await deadWinner.close();
    // The only replica takes the tick up (loses its claim to the dead winner) and stops before recovery looks at it.
    const first = startReplica('g0', [schedule]);
    await waitUntil(
      () => observations.some((o) => o.replica === 'g0' && o.tickMs === tick && o.observation === 'lost-race'),
      'the tick taken up',
      { timeoutMs: 5000 },
    );
    await stopReplica(first);
    expect(records(schedule.id, tick, tick + 1).get(tick)).toBeUndefined();
    await sleep(tick + 2500 - Date.now());
    const second = startReplica('g1', [schedule]);
    await waitUntil(() => publishers(schedule.id, tick).length > 0, 'the tick recovered by the new replica', {
      timeoutMs: 5000,
    });
    await stopReplica(second);
    expect(publishers(schedule.id, tick)).toEqual(['g1']);
    expect(records(schedule.id, tick, tick + 1).get(tick)).toEqual(['recovered']);
    expect((await storedJob('tickwarden-default', tickJobId(schedule.id, tick)))?.data.lease.value).toBe(claimed.value);
  });

  it("overlap skip: the lease taken on a minority of nodes at the due time while another node is silent (a moment's contender) is not a skip: recovery runs the tick once it is free", async () => {
    const tick = nextSecond(2000);
    const schedule = scheduleFixture({
      id: 'team-m/minority',
      cron: `${new Date(tick).getUTCSeconds()} * * * * *`,
      overlap: 'skip',
      leaseTtlMs: 1000,
    });
    // A replica cut off from the rest, recovering an older tick: its value on two nodes while the due-time contest runs.
    const contender = new Redlock(locks.urls.slice(0, 2));
    const held = await contender.acquire(leaseResource(schedule.id, 'skip', 0), 10_000);
    await locks.node(4).pause();
    // Contested at the due time only (no lead), as this test is about the due-time contest.
    const replica = startReplica('m0', [schedule], systemClock, systemClock, { contestLeadMs: 0 });
    try {
      await waitUntil(
        () =>
          observations.some((o) => o.replica === 'm0' && o.tickMs === tick && o.observation === 'lock-unavailable') ||
          records(schedule.id, tick, tick + 1).has(tick),
        'the due-time contest to end',
        // From now: the tick is at least 2 s away.
        { timeoutMs: tick - Date.now() + 5000 },
      );
      await contender.release(held);
      await waitUntil(() => records(schedule.id, tick, tick + 1).has(tick), 'the tick decided', { timeoutMs: 5000 });
    } finally {
      await locks.node(4).resume();
      await contender.close();
      await stopReplica(replica);
    }
    expect(records(schedule.id, tick, tick + 1).get(tick)).toEqual(['recovered']);
  });

  it('two replicas cut from different lock majorities, a third healthy: they stop contesting (no split claims), and every tick is published once by the healthy one', async () => {
    const schedules = [
      everySecond('team-x/allow', { leaseTtlMs: 3000 }),
      scheduleFixture({ id: 'team-x/cancel', cron: '*/2 * * * * *', overlap: 'cancel-previous', leaseTtlMs: 3000 }),
    ];
    const [cutA, cutB] = await Promise.all([locks.link('cut-a'), locks.link('cut-b')]);
    cutA.partition([0, 1, 2]);
    cutB.partition([2, 3, 4]);
    const healthy = startReplica('x-healthy', schedules);
    const cut = [
      startReplica('x-cut-a', schedules, systemClock, systemClock, { lockUrls: cutA.urls }),
      startReplica('x-cut-b', schedules, systemClock, systemClock, { lockUrls: cutB.urls }),
    ];
    // The cut replicas withdraw from the contenders a beat after their first contest fails; until
    // then the ticks they are preferred for go to recovery. Counted from a beat after the healthy
    // one is the only contender left (when that is depends on how fast the replicas start).
    const redis = new Redis(queueUrl());
    let from = 0;
    try {
      await waitUntil(
        async () => {
          const { live } = await new RedisReplicaStore(redis).beat('x-probe', false, 2000, 60_000);
          const contested = ['x-cut-a', 'x-cut-b'].every((name) => observations.some((o) => o.replica === name));
          return contested && live.join() === 'x-healthy';
        },
        'the cut replicas withdrew',
        { timeoutMs: 10_000 },
      );
      from = nextSecond(1000);
      await sleep(from + 7000 - Date.now());
    } finally {
      redis.disconnect();
      await Promise.all([healthy, ...cut].map(stopReplica));
      cutA.heal();
      cutB.heal();
    }
    const to = Date.now() - 3000;
    // On a failure, all that every replica said of the tick (a CI run once found a tick unpublished).
    const said = (id: string, tick: number): string =>
      JSON.stringify([
        ...outcomes.filter((o) => o.scheduleId === id && o.tickMs === tick),
        ...observations.filter((o) => o.scheduleId === id && o.tickMs === tick),
      ]);
    for (const schedule of schedules) {
      const step = schedule.overlap === 'cancel-previous' ? 2000 : 1000;
      for (let tick = Math.ceil(from / step) * step; tick < to; tick += step) {
        const context = `${schedule.id} @ ${tick} (from ${from}, to ${to}): ${said(schedule.id, tick)}`;
        expect(publishers(schedule.id, tick), context).toEqual(['x-healthy']);
      }
    }
  });

  it('a replica cut from a lock quorum leaves the open ticks to a replica that can win them, and takes them when none can', async () => {
    const beat = everySecond('team-y/beat', { leaseTtlMs: 3000 });
    const rare = scheduleFixture({ id: 'team-y/rare', cron: '0 0 0 1 1 *', overlap: 'allow', leaseTtlMs: 3000 });
    const link = await locks.link('cut-y');
    link.partition([0, 1, 2]);
    const cut = startReplica('y-cut', [beat, rare], systemClock, systemClock, { lockUrls: link.urls });
    const redis = new Redis(queueUrl());
    const store = new RedisReplicaStore(redis);
    // Another replica that can win contests, as far as the cut one can tell (it beats as a contender).
    const other = setInterval(() => void store.beat('y-other', true, 2000, 60_000), 300);
    await store.beat('y-other', true, 2000, 60_000);
    let healthy: Replica | undefined;
    const base = nextSecond(0) - 20_000;
    const ticks = [0, 1, 2, 3, 4, 5].map((i) => base + i * 1000);
    try {
      await waitUntil(
        () => observations.some((o) => o.replica === 'y-cut' && o.observation === 'lock-unavailable'),
        'the cut replica found itself cut',
        { timeoutMs: 5000 },
      );
      const now = Date.now();
      await store.open(
        ticks.map((tickMs) => ({ scheduleId: rare.id, tickMs, jobId: tickJobId(rare.id, tickMs), recoverAtMs: now })),
      );
      // Several of the cut replica's sweeps (every 500 ms): it takes none of the ticks.
      await sleep(2000);
      expect(outcomes.filter((o) => o.scheduleId === rare.id)).toEqual([]);
      expect(observations.filter((o) => o.scheduleId === rare.id)).toEqual([]);
      // A replica that reaches the quorum recovers them at its first sweeps.
      healthy = startReplica('y-healthy', [beat, rare]);
      await waitUntil(() => records(rare.id, base, base + 6000).size === ticks.length, 'the ticks recovered', {
        timeoutMs: 3000,
      });
      for (const tick of ticks) expect(publishers(rare.id, tick), String(tick)).toEqual(['y-healthy']);
      // With no replica in view that can win, the cut one recovers (here: fails, as it must).
      clearInterval(other);
      await Promise.all([store.leave('y-other'), stopReplica(healthy)]);
      healthy = undefined;
      const late = nextSecond(0) - 30_000;
      await store.open([{ scheduleId: rare.id, tickMs: late, jobId: tickJobId(rare.id, late), recoverAtMs: 0 }]);
      await waitUntil(
        () => observations.some((o) => o.replica === 'y-cut' && o.scheduleId === rare.id && o.tickMs === late),
        'the cut replica tried the tick',
        { timeoutMs: 5000 },
      );
    } finally {
      clearInterval(other);
      await Promise.all([stopReplica(cut), healthy && stopReplica(healthy)]);
      link.heal();
      redis.disconnect();
    }
  });

  it("a contest won late (this replica's links slow) for a tick another replica already recorded skipped: the skip stands, nothing is enqueued, the lease is released", async () => {
    const tick = nextSecond(2000);
    const schedule = scheduleFixture({
      id: 'team-w/late-win',
      cron: `${new Date(tick).getUTCSeconds()} * * * * *`,
      overlap: 'skip',
      leaseTtlMs: 10_000,
    });
    const resource = leaseResource(schedule.id, 'skip', 0);
    // A previous run holds the lease on two nodes until 2.5 s after the tick; node 4 hangs, so each of
    // this replica's tries waits a node timeout (1 s with this TTL) and its contest is won only seconds late.
    const previous = new Redlock(locks.urls.slice(0, 2));
    await previous.acquire(resource, tick + 2500 - Date.now());
    await locks.node(4).pause();
    // Contested at the due time only (no lead): this test is about the due-time contest won late.
    const replica = startReplica('w0', [schedule], systemClock, systemClock, { contestLeadMs: 0 });
    try {
      // Another replica, on time, found the lease taken and recorded the skip.
      await sleep(tick + 300 - Date.now());
      const other = new Redis(queueUrl());
      await new RedisReplicaStore(other).record([
        {
          scheduleId: schedule.id,
          keepMs: 600_000,
          retention: schedule.history,
          record: {
            tickMs: tick,
            outcome: 'skipped-overlap',
            reason: "another run holds the schedule's lease",
            lagMs: 300,
            fence: undefined,
            jobId: undefined,
            replica: 'w1',
          },
        },
      ]);
      other.disconnect();
      await sleep(tick + 7000 - Date.now());
    } finally {
      await locks.node(4).resume();
      await previous.close();
      await stopReplica(replica);
    }
    expect(publishers(schedule.id, tick)).toEqual([]);
    expect(await storedJob('tickwarden-default', tickJobId(schedule.id, tick))).toBeUndefined();
    // Released: a fresh acquire gets the lease at once (no retry). Its clients connect first: on a
    // busy machine that can take longer than the default node timeout.
    const check = new Redlock(locks.urls);
    await check.release(await check.acquire(resource, 1000, { retryCount: 0, nodeTimeoutMs: 2000 }));
    await check.close();
  });

  it("recovery that finds a later run holding the schedule's lease (overlap skip) records skipped-overlap, not missed", async () => {
    const tick = nextSecond(2000);
    const schedule = scheduleFixture({
      id: 'team-s/busy',
      cron: `${new Date(tick).getUTCSeconds()} * * * * *`,
      overlap: 'skip',
      leaseTtlMs: 2000,
    });
    const resource = leaseResource(schedule.id, 'skip', 0);
    // The dead winner claims the tick and never enqueues; a later run then holds the schedule's lease.
    const deadWinner = new Redlock(locks.urls);
    const claimed = await deadWinner.acquire(resource, 1000, { claim: tickClaim(tick) });
    const replica = startReplica('s0', [schedule]);
    await sleep(tick + 300 - Date.now());
    await deadWinner.release(claimed);
    const laterRun = await deadWinner.acquire(resource, 60_000);
    await waitUntil(() => records(schedule.id, tick, tick + 1).has(tick), 'the tick decided', { timeoutMs: 5000 });
    await stopReplica(replica);
    await deadWinner.release(laterRun);
    await deadWinner.close();
    expect(records(schedule.id, tick, tick + 1).get(tick)).toEqual(['skipped-overlap']);
  });

  it("a recoverer whose add finds the paused winner's job stored since its look records lost-race and leaves the shared lease to the job", async () => {
    const schedule = everySecond('team-r/late-winner', { leaseTtlMs: 1000 });
    const tick = nextSecond(2000);
    const resource = leaseResource(schedule.id, 'allow', tick);
    const jobId = tickJobId(schedule.id, tick);
    // The winner: claims the tick and is paused (its add lands only later, below).
    const winner = new Redlock(locks.urls);
    const winnerLease = await winner.acquire(resource, schedule.leaseTtlMs, { claim: tickClaim(tick) });
    const redlock = new Redlock(locks.urls);
    const connection = new Redis(queueUrl(), { maxRetriesPerRequest: null });
    const scheduler = new Scheduler({
      replicaId: 'r0',
      redlock,
      queueConnection: connection,
      logger: pino({ level: 'silent' }),
      onOutcome: (event) => outcomes.push({ ...event, replica: 'r0', atMs: Date.now() }),
      onObservation: (observation, scheduleId, tickMs) =>
        observations.push({ replica: 'r0', observation, scheduleId, tickMs }),
    });
    // The winner's add lands right after recovery found the tick unpublished: the test hooks recovery's
    // pipelined read of the job.
    const queueConnection = new Redis(queueUrl(), { maxRetriesPerRequest: null });
    const queue = new Queue('tickwarden-default', { connection: queueConnection });
    let winnerAdded: Promise<unknown> | undefined;
    const pipeline = connection.pipeline.bind(connection);
    connection.pipeline = ((commands?: unknown[][]) => {
      const started = pipeline(commands as never);
      const exec = started.exec.bind(started);
      started.exec = (async () => {
        const replies = await exec();
        const readsJob = started.length === 2 && !winnerAdded && replies?.[0]?.[1] === null && Date.now() > tick;
        if (readsJob) {
          winnerAdded = queue.add(
            schedule.id,
            { lease: { value: winnerLease.value, fence: winnerLease.fence }, enqueuedBy: 'the-winner' },
            { jobId, delay: 60_000 },
          );
          await winnerAdded;
        }
        return replies;
      }) as typeof started.exec;
      return started;
    }) as typeof connection.pipeline;
    scheduler.setSchedules([schedule]);
    scheduler.start();
    await sleep(tick + 3000 - Date.now());
    await scheduler.stop();
    expect(winnerAdded).toBeDefined();
    expect(publishers(schedule.id, tick)).toEqual([]);
    expect(observations.filter((o) => o.replica === 'r0' && o.tickMs === tick).map((o) => o.observation)).toEqual([
      'lost-race',
      'lost-race',
    ]);
    expect((await queue.getJob(jobId))?.data.lease.value).toBe(winnerLease.value);
    // Not released by the recoverer: the job's lease value holds the resource until it expires; then the worker takes it.
    await sleep(schedule.leaseTtlMs);
    // No retry; a node timeout that leaves its fresh clients time to connect (a busy machine).
    const worker = new Redlock(locks.urls, { retryCount: 0, nodeTimeoutMs: 2000 });
    await expect(worker.acquire(resource, 1000, { value: winnerLease.value })).resolves.toMatchObject({ resource });
    await Promise.all([worker.close(), winner.close(), redlock.close(), queue.close()]);
    connection.disconnect();
    queueConnection.disconnect();
  });

  it('overlap cancel-previous: the contest at the tick revokes the running run (its watchdog aborts it) and the new run is due at its tick', async () => {
    const schedule = scheduleFixture({
      id: 'team-f/cancel',
      cron: '* * * * * *',
      overlap: 'cancel-previous',
      leaseTtlMs: 1500,
    });
    const running = new Redlock(locks.urls, { abortMarginMs: 100 });
    const runStarted = Date.now();
    let held: () => void = () => undefined;
    const acquired = new Promise<void>((resolve) => (held = resolve));
    const abort = running.using(leaseResource(schedule.id, 'cancel-previous', 0), 1500, (signal) => {
      held();
      return new Promise<unknown>((resolve) =>
        signal.addEventListener('abort', () => resolve(signal.reason), { once: true }),
      );
    });
    await acquired;
    const replicas = [startReplica('x0', [schedule]), startReplica('x1', [schedule])];
    const reason = await abort;
    const abortedAt = Date.now();
    await sleep(1200);
    await Promise.all(replicas.map(stopReplica));
    await running.close();
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(abortedAt - runStarted).toBeLessThan(3000);
    // The adds: recovery may find a tick's job published before its record lands and record it on the
    // enqueuer's behalf (`found`), which adds nothing; one of the two records wins.
    const ofTicks = outcomes.filter(
      (o) => o.scheduleId === schedule.id && o.outcome === 'enqueued' && o.tickMs >= runStarted,
    );
    const enqueued = ofTicks.filter((o) => !o.found);
    expect(enqueued.length).toBeGreaterThan(0);
    expect(new Set(enqueued.map((o) => o.tickMs)).size).toBe(enqueued.length);
    for (const o of enqueued)
      expect(
        ofTicks.filter((r) => r.tickMs === o.tickMs && r.recorded),
        `tick ${o.tickMs}`,
      ).toHaveLength(1);
    // Contested when due (never ahead), and due at its tick: the worker waits for the revoked run to stop.
    expect(enqueued.every((o) => o.lagMs >= 0)).toBe(true);
    for (const o of enqueued)
      expect((await storedJob('tickwarden-default', tickJobId(schedule.id, o.tickMs)))?.data.dueMs).toBe(o.tickMs);
  });

  it("overlap cancel-previous, a replica's clock 3 s ahead (more than the period): it cannot revoke early, every tick is published once, none before it is due by the lock nodes' clocks", async () => {
    const schedule = scheduleFixture({
      id: 'team-f/cancel-skewed',
      cron: '*/2 * * * * *',
      overlap: 'cancel-previous',
      leaseTtlMs: 3000,
    });
    const replicas = [startReplica('k0', [schedule], skewedClock(3000)), startReplica('k1', [schedule])];
    const from = nextSecond(1000);
    await sleep(7000);
    await Promise.all(replicas.map(stopReplica));
    const to = Date.now() - 2000;
    const published = outcomes.filter(
      (o) =>
        o.scheduleId === schedule.id &&
        o.recorded &&
        (o.outcome === 'enqueued' || o.outcome === 'recovered') &&
        o.tickMs >= from &&
        o.tickMs < to,
    );
    // Without the lock nodes' clocks deciding, k0 revokes each tick 3 s early: every tick would be superseded by the next before it is due.
    const due = Array.from({ length: 5 }, (_, i) => Math.ceil(from / 2000) * 2000 + i * 2000).filter(
      (tick) => tick < to,
    );
    expect(due.length).toBeGreaterThanOrEqual(2);
    expect(published.map((o) => o.tickMs).sort((a, b) => a - b)).toEqual(due);
    // The replica on time publishes the ticks it is preferred for and recovers the others; k0's own
    // recovery may get there first, but only once the lock nodes' clocks say the tick is due.
    const k0Leads = published.filter((o) => o.replica === 'k0').map((o) => o.tickMs - o.atMs);
    expect(k0Leads.every((leadMs) => leadMs <= CLOCK_SKEW_TOLERANCE_MS)).toBe(true);
    expect(
      observations.some((o) => o.replica === 'k0' && o.scheduleId === schedule.id && o.observation === 'clock-ahead'),
    ).toBe(true);
  });

  it("three replicas: a paused schedule's ticks are each recorded skipped-paused once for the cluster, by the tick's contender", async () => {
    const schedule = everySecond('team-z/paused', { paused: true });
    const replicas = ['z0', 'z1', 'z2'].map((name) => startReplica(name, [schedule]));
    // Replicas started together see each other from their second beat: ticks contested before it may have two contenders.
    const from = nextSecond(3000);
    await sleep(6000);
    await Promise.all(replicas.map(stopReplica));
    const to = Math.floor((Date.now() - 1000) / 1000) * 1000;
    for (let tick = from; tick < to; tick += 1000) {
      expect(records(schedule.id, tick, tick + 1).get(tick), `tick ${tick}`).toEqual(['skipped-paused']);
      expect(
        outcomes.filter((o) => o.scheduleId === schedule.id && o.tickMs === tick).map((o) => o.replica),
        `tick ${tick}`,
      ).toHaveLength(1);
    }
    const history = await new RedisReplicaStore(new Redis(queueUrl())).history(schedule.id, 100);
    expect(history.filter((r) => r.tickMs >= from && r.tickMs < to)).toHaveLength((to - from) / 1000);
  });

  it('1,201 schedules due at the same instant: every job is added once, in round trips of at most 500 commands', async () => {
    const schedules = Array.from({ length: 1201 }, (_, i) =>
      scheduleFixture({
        id: `team-s/s${i}`,
        cron: '*/5 * * * * *',
        overlap: 'allow',
        leaseTtlMs: 6000,
        queue: 'slices',
      }),
    );
    const replica = startReplica('s0', schedules);
    const sizes: number[] = [];
    const pipeline = replica.queue.pipeline.bind(replica.queue);
    replica.queue.pipeline = ((commands?: unknown[][]) => {
      const started = pipeline(commands as never);
      const exec = started.exec.bind(started);
      started.exec = ((...args: Parameters<typeof exec>) => {
        sizes.push(started.length);
        return exec(...args);
      }) as typeof started.exec;
      return started;
    }) as typeof replica.queue.pipeline;
    const tick = Math.ceil((Date.now() + 4000) / 5000) * 5000;
    const ofTick = () => outcomes.filter((o) => o.scheduleId.startsWith('team-s/') && o.tickMs === tick);
    // Contested 2 s ahead: until every tick is recorded, however long a slow machine takes.
    await waitUntil(
      () =>
        new Set(
          ofTick()
            .filter((o) => o.recorded)
            .map((o) => o.scheduleId),
        ).size === 1201,
      'the 1,201 ticks recorded',
      { timeoutMs: tick + 20_000 - Date.now(), intervalMs: 100 },
    );
    await stopReplica(replica);
    const atTick = ofTick();
    // On a slow machine recovery may look at the open ticks before their records land: it finds
    // the jobs published (`found`) and adds nothing, and one of the two records wins.
    const added = atTick.filter((o) => !o.found);
    expect(added.length).toBe(1201);
    expect(new Set(added.map((o) => o.scheduleId)).size).toBe(1201);
    expect(atTick.every((o) => o.outcome === 'enqueued')).toBe(true);
    const recorded = atTick.filter((o) => o.recorded);
    expect(new Set(recorded.map((o) => o.scheduleId)).size).toBe(recorded.length);
    expect(recorded.length).toBe(1201);
    expect((await storedJob('tickwarden-slices', tickJobId('team-s/s0', tick)))?.data.tickMs).toBe(tick);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(500);
    expect(sizes.filter((size) => size > 1).length).toBeGreaterThanOrEqual(3);
  });

  describe('contest lead: ticks are contested and enqueued ahead of their due time', () => {
    it('overlap allow: the job is enqueued before its tick, as a delayed job that becomes ready at the due time', async () => {
      // Lease TTL 6 s: the lead is min(9.5 s default, a third of the TTL) = 2 s.
      const schedule = scheduleFixture({
        id: 'team-i/ahead',
        cron: '*/3 * * * * *',
        overlap: 'allow',
        leaseTtlMs: 6000,
      });
      const replica = startReplica('i0', [schedule]);
      // Connected first: a first connect slower than the node timeout (a loaded machine) would fail
      // the contest ahead, and the tick would be contested when due (a cold start has its own test).
      await replica.redlock.probe({ nodeTimeoutMs: 5000 });
      await replica.queue.ping();
      const tick = Math.ceil((Date.now() + 3000) / 3000) * 3000;
      await sleep(tick - 500 - Date.now());
      const stored = await storedJob('tickwarden-default', tickJobId(schedule.id, tick));
      await stopReplica(replica);
      const [enqueued] = outcomes.filter((o) => o.scheduleId === schedule.id && o.tickMs === tick);
      expect(enqueued?.outcome).toBe('enqueued');
      expect(enqueued?.lagMs).toBeLessThan(-1000);
      expect(enqueued?.lagMs).toBeGreaterThanOrEqual(-2000);
      expect(stored).toMatchObject({ data: { dueMs: tick }, state: 'delayed', readyAtMs: tick });
    });

    it('contestLeadMs 0 contests when due; a negative lead is refused naming the setting', async () => {
      const schedule = scheduleFixture({
        id: 'team-i/no-lead',
        cron: '* * * * * *',
        overlap: 'allow',
        leaseTtlMs: 6000,
      });
      expect(
        () =>
          new Scheduler({
            replicaId: 'i3',
            redlock: new Redlock(locks.urls),
            queueConnection: new Redis(queueUrl(), { lazyConnect: true }),
            logger: pino({ level: 'silent' }),
            contestLeadMs: -1,
          }),
      ).toThrow(/^contestLeadMs: expected a number of milliseconds >= 0, got -1$/);
      const replica = startReplica('i3', [schedule], systemClock, systemClock, { contestLeadMs: 0 });
      await sleep(2500);
      await stopReplica(replica);
      const enqueued = outcomes.filter((o) => o.scheduleId === schedule.id && o.outcome === 'enqueued');
      expect(enqueued.length).toBeGreaterThan(0);
      expect(enqueued.every((o) => o.lagMs >= 0)).toBe(true);
    });

    it('overlap skip: a contest ahead that finds the previous run holding the lease is contested again when due', async () => {
      const schedule = scheduleFixture({ id: 'team-i/skip', cron: '*/4 * * * * *', overlap: 'skip', leaseTtlMs: 6000 });
      const holder = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
      const lease: Lease = await holder.acquire(leaseResource(schedule.id, 'skip', 0), 30_000);
      const replica = startReplica('i1', [schedule]);
      // Contested ahead at tick - 2 s while the previous run holds the lease, which it releases 1 s before the tick.
      const tick = Math.ceil((Date.now() + 6500) / 4000) * 4000;
      await sleep(tick - 1000 - Date.now());
      await holder.release(lease);
      await holder.close();
      await sleep(tick + 1000 - Date.now());
      await stopReplica(replica);
      const seen = outcomes.filter((o) => o.scheduleId === schedule.id);
      expect(seen.filter((o) => o.tickMs < tick).map((o) => o.outcome)).toContain('skipped-overlap');
      // Recovery looks at the tick from its due time: it may find the job published before the add's
      // record lands and record it on the enqueuer's behalf (`found`, no add).
      const added = seen.filter((o) => o.tickMs === tick && !o.found);
      expect(added.map((o) => o.outcome)).toEqual(['enqueued']);
      expect(added[0]?.lagMs).toBeGreaterThanOrEqual(0);
      expect(records(schedule.id, tick, tick + 1).get(tick)).toEqual(['enqueued']);
    });

    it('overlap skip: a contest ahead waits for the due time while the tick before it, due within the late window, has no outcome', async () => {
      // Lease TTL 2.4 s: the lead is 0.8 s, and a run's lease (no worker releases it) lapses before
      // the next tick's contest ahead.
      const schedule = scheduleFixture({
        id: 'team-i/skip-after',
        cron: '*/4 * * * * *',
        overlap: 'skip',
        leaseTtlMs: 2400,
      });
      // Started after tick - 4 s, which no replica decided (as if its contender died after deferring it).
      const tick = Math.ceil((Date.now() + 4000) / 4000) * 4000;
      await sleep(tick - 3600 - Date.now());
      const replica = startReplica('i4', [schedule]);
      await sleep(tick + 4300 - Date.now());
      await stopReplica(replica);
      const added = (tickMs: number) =>
        outcomes.filter((o) => o.scheduleId === schedule.id && o.tickMs === tickMs && !o.found);
      expect(added(tick - 4000)).toEqual([]);
      // Contested when due: no contest ahead took the lease before that tick's recovery could.
      expect(added(tick).map((o) => o.outcome)).toEqual(['enqueued']);
      expect(added(tick)[0]?.lagMs).toBeGreaterThanOrEqual(0);
      // The tick before it recorded: contested ahead as usual.
      expect(added(tick + 4000).map((o) => o.outcome)).toEqual(['enqueued']);
      expect(added(tick + 4000)[0]?.lagMs).toBeLessThan(0);
    });

    it('overlap skip: a replica stopped after a contest ahead found the lease taken still contests the tick when due', async () => {
      // Left to recovery instead, a per-second schedule's tick met its successor's contest ahead,
      // which took the free lease first: the tick was recorded skipped though nothing ran.
      const schedule = scheduleFixture({
        id: 'team-i/skip-stop',
        cron: '*/4 * * * * *',
        overlap: 'skip',
        leaseTtlMs: 6000,
      });
      const holder = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
      const lease: Lease = await holder.acquire(leaseResource(schedule.id, 'skip', 0), 30_000);
      const replica = startReplica('i2', [schedule]);
      const tick = Math.ceil((Date.now() + 6500) / 4000) * 4000;
      await sleep(tick - 1500 - Date.now());
      const stopped = stopReplica(replica).then(() => Date.now());
      await sleep(tick - 1000 - Date.now());
      await holder.release(lease);
      await holder.close();
      const stoppedAtMs = await stopped;
      const added = outcomes.filter((o) => o.scheduleId === schedule.id && o.tickMs === tick && !o.found);
      expect(added.map((o) => [o.replica, o.outcome])).toEqual([['i2', 'enqueued']]);
      expect(added[0]?.lagMs).toBeGreaterThanOrEqual(0);
      expect(stoppedAtMs).toBeGreaterThanOrEqual(tick);
    });
  });
});
