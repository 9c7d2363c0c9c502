import { leaseResource, tickClaim, tickJobId } from '@tickwarden/contracts';
import { Redlock, resourceKeys, systemClock, type Claim, type Clock, type Lease } from '@tickwarden/redlock';
import { sleep, startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Scheduler, type OutcomeEvent, type Schedule, type TickObservation } from '../src/index.ts';
import { RedisReplicaStore } from '../src/replica-store.ts';
import { tickWindow } from '../src/tick-window.ts';
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

/** Claims a tick on the nodes at `urls` as a replica's contest does (a winner that then dies); the claim. */
async function claimAs(urls: string[], resource: string, tickMs: number): Promise<Claim> {
  const redlock = new Redlock(urls, { nodeTimeoutMs: 2000 });
  try {
    const [claimed] = await redlock.claimBatch([{ resource, claim: tickClaim(tickMs) }], { retryCount: 0 });
    if (!claimed?.ok) throw claimed?.error ?? new Error('no claim');
    return claimed.claim;
  } finally {
    await redlock.close();
  }
}

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
    // A short lead by default, so that a test places contests and faults within seconds (the default lead has its own tests).
    const { lockUrls = locks.urls, contestLeadMs = 1000, ...options } = extra;
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
      contestLeadMs,
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

  it('a publisher whose add finds another job of the tick stored (paused in its add) records lost-race', async () => {
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
    expect(publishers(schedule.id, tick - 1000)).toEqual(['q0']);
  });

  it('a starting replica contests its whole lead one due second after the other, the soonest first', async () => {
    // The default lead, 9.5 s: the start finds about ten due seconds at once.
    const schedules = Array.from({ length: 6 }, (_, i) =>
      scheduleFixture({ id: `team-lead/job-${i}`, cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 30_000 }),
    );
    const redlock = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
    const contests: number[][] = [];
    const claimBatch = redlock.claimBatch.bind(redlock);
    redlock.claimBatch = (requests, options) => {
      contests.push([...new Set(requests.map((request) => Number(request.claim.slice('tick:'.length))))]);
      return claimBatch(requests, options);
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

  it('every replica down, then two started 400 ms apart, the later one stopped first: each tick has its recorded outcome, the gap only what neither took', async () => {
    const schedule = everySecond('team-d/restarted', { overlap: 'skip' });
    const first = startReplica('g0', [schedule]);
    await sleep(2500);
    await stopReplica(first);
    const downAt = Date.now();
    // Back 3.8 s into the next whole second, then 0.4 s later: the second's first tick is one later than the first's.
    await sleep(Math.ceil(downAt / 1000) * 1000 + 3800 - Date.now());
    const second = startReplica('g1', [schedule]);
    await sleep(400);
    const third = startReplica('g2', [schedule]);
    // g2 stops before g1's gap check: its own check runs first, over a gap whose newest tick g1 took up.
    await sleep(3000);
    await stopReplica(third);
    await sleep(16_000);
    await stopReplica(second);
    const from = Math.floor(downAt / 1000) * 1000 - 1000;
    const to = Date.now() - 2000;
    const standing = records(schedule.id, from, to);
    for (let tick = from; tick < to; tick += 1000)
      expect(standing.get(tick) ?? [], `tick ${new Date(tick).toISOString()}`).not.toEqual([]);
    // What the gap recorded missed: ticks that neither of the two took up (none of them enqueued).
    const missed = outcomes.filter((o) => o.scheduleId === schedule.id && o.outcome === 'missed').map((o) => o.tickMs);
    expect(missed.length).toBeGreaterThanOrEqual(2);
    for (const tick of missed) expect(publishers(schedule.id, tick), `tick ${tick}`).toEqual([]);
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

  it('a winner that dies between claim and enqueue: another replica recovers the tick within a second or two, under its claim', async () => {
    const schedule = everySecond('team-e/orphan', { leaseTtlMs: 2000 });
    // Play the dead winner: claim the next tick and never enqueue.
    const tick = nextSecond(1500);
    const claimed = await claimAs(locks.urls, leaseResource(schedule.id, 'allow', tick), tick);
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
    // The claim is honoured: the job carries the claim's value (its worker takes the lease with it).
    expect((await storedJob('tickwarden-default', tickJobId(schedule.id, tick)))?.data.lease.value).toBe(claimed.value);
  });

  it("a contender that died mid-contest left the tick's claim on two of five nodes, and a third node hangs: recovery takes that claim over and the tick is recovered", async () => {
    const schedule = everySecond('team-k/split', { leaseTtlMs: 2000 });
    const tick = nextSecond(1500);
    // The dead contender got two nodes only (a split it never released).
    const partial = await claimAs(locks.urls.slice(0, 2), leaseResource(schedule.id, 'allow', tick), tick);
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
    const claimed = await claimAs(locks.urls, leaseResource(schedule.id, 'allow', tick), tick);
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

  it("a recoverer whose add finds the paused winner's job stored since its look records lost-race, and the winner's job stands", async () => {
    const schedule = everySecond('team-r/late-winner', { leaseTtlMs: 1000 });
    const tick = nextSecond(2000);
    const resource = leaseResource(schedule.id, 'allow', tick);
    const jobId = tickJobId(schedule.id, tick);
    // The winner: claims the tick and is paused (its add lands only later, below).
    const winnerLease = await claimAs(locks.urls, resource, tick);
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
            { lease: { value: winnerLease.value, fence: 1 }, enqueuedBy: 'the-winner' },
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
    await Promise.all([redlock.close(), queue.close()]);
    connection.disconnect();
    queueConnection.disconnect();
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

  it('a pause is decided at the due time, not when a tick is contested ahead: a tick due after a resume runs; one due while paused is skipped-paused then', async () => {
    const schedule = everySecond('team-z/resumed');
    const admin = new Redis(queueUrl());
    const store = new RedisReplicaStore(admin);
    await store.pause(schedule.id, { by: 'ops', atMs: Date.now(), note: 'freeze' });
    // A 3 s lead: each tick is contested while the schedule is still paused, three seconds before it is due.
    const replica = startReplica('p0', [schedule], systemClock, systemClock, { contestLeadMs: 3000 });
    await sleep(4500);
    const resumedAt = Date.now();
    await store.resume(schedule.id);
    await sleep(4000);
    await stopReplica(replica);
    admin.disconnect();
    const mine = outcomes.filter((o) => o.scheduleId === schedule.id && o.recorded);
    // Decided before the resume: paused. (Recovery decides a tick when it takes it up, its due time
    // or, on a loaded machine, later: one due just before the resume may be decided after it, and run.)
    const paused = mine.filter((o) => o.atMs < resumedAt);
    const resumed = mine.filter((o) => o.tickMs > resumedAt + 200 && o.tickMs < resumedAt + 3000);
    expect(paused.length).toBeGreaterThanOrEqual(2);
    for (const o of paused) expect(o.outcome, `tick ${o.tickMs}`).toBe('skipped-paused');
    // Every skip decided once due, not three seconds ahead.
    for (const o of mine.filter((o) => o.outcome === 'skipped-paused'))
      expect(o.atMs, `tick ${o.tickMs}`).toBeGreaterThanOrEqual(o.tickMs);
    // Contested ahead while paused, due after the resume: published and run, by recovery at the due time.
    expect(resumed.length).toBeGreaterThanOrEqual(2);
    for (const o of resumed) expect(o.outcome, `tick ${o.tickMs}`).toBe('recovered');
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
      const schedule = scheduleFixture({
        id: 'team-i/ahead',
        cron: '*/3 * * * * *',
        overlap: 'allow',
        leaseTtlMs: 6000,
      });
      const replica = startReplica('i0', [schedule], systemClock, systemClock, { contestLeadMs: 2000 });
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

    it("a long lead: the claim and the publish marker of a tick contested minutes ahead are kept the tick's retention past its due time", async () => {
      const schedule = scheduleFixture({ id: 'team-i/far', cron: '0 * * * * *', overlap: 'allow', leaseTtlMs: 6000 });
      const leadMs = 10 * 60_000;
      const replica = startReplica('i4', [schedule], systemClock, systemClock, { contestLeadMs: leadMs });
      // Every tick of the next ten minutes is due for its contest at once; the last one is the farthest ahead.
      const last = Math.floor((Date.now() + leadMs) / 60_000) * 60_000;
      await waitUntil(
        async () => outcomes.some((o) => o.scheduleId === schedule.id && o.tickMs === last && o.outcome === 'enqueued'),
        `the tick ${new Date(last).toISOString()} enqueued ahead`,
      );
      await stopReplica(replica);
      const { retentionMs } = tickWindow(schedule, last, last + 60_000);
      const atLeast = last - Date.now() + retentionMs - 5000;
      const resource = leaseResource(schedule.id, 'allow', last);
      const claimTtls = await Promise.all(
        locks.urls.map(async (url) => {
          const node = new Redis(url);
          try {
            return await node.pttl(resourceKeys('tickwarden', resource, tickClaim(last)).claim);
          } finally {
            node.disconnect();
          }
        }),
      );
      expect(claimTtls.filter((ttl) => ttl >= atLeast).length).toBeGreaterThanOrEqual(3);
      const queue = new Redis(queueUrl());
      const markerTtl = await queue.pttl(`bull:tickwarden-default:de:${tickJobId(schedule.id, last)}`);
      queue.disconnect();
      expect(markerTtl).toBeGreaterThanOrEqual(atLeast);
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

    it("overlap skip: a tick whose previous run holds the schedule's lease is still claimed and enqueued ahead; a queued job holds no lease", async () => {
      const schedule = scheduleFixture({ id: 'team-i/skip', cron: '*/2 * * * * *', overlap: 'skip', leaseTtlMs: 6000 });
      const resource = leaseResource(schedule.id, 'skip', 0);
      const holder = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
      const lease: Lease = await holder.acquire(resource, 30_000);
      const replica = startReplica('i1', [schedule], systemClock, systemClock, { contestLeadMs: 1500 });
      const tick = Math.ceil((Date.now() + 3000) / 2000) * 2000;
      await sleep(tick + 2500 - Date.now());
      await holder.release(lease);
      await holder.close();
      // The lease is free once the run released it, with two ticks' jobs queued: none holds it.
      const worker = new Redlock(locks.urls, { retryCount: 0, nodeTimeoutMs: 2000 });
      await expect(worker.acquire(resource, 1000)).resolves.toMatchObject({ resource });
      await worker.close();
      await stopReplica(replica);
      const seen = outcomes.filter(
        (o) => o.scheduleId === schedule.id && (o.tickMs === tick || o.tickMs === tick + 2000),
      );
      expect(seen.filter((o) => !o.found).map((o) => o.outcome)).toEqual(['enqueued', 'enqueued']);
      expect(seen.every((o) => o.found || o.lagMs <= -1000)).toBe(true);
    });
  });
});
