import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { LeaseLostError, Redlock, resourceKeys, systemClock, type Clock } from '@tickwarden/redlock';
import { leaseResource, tickClaim, tickJobId } from '@tickwarden/contracts';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORPHAN_CHECK_DELAY_MS, Scheduler, type Schedule, type TickOutcome } from '../src/index.ts';
import { ControlState, HISTORY_LENGTH, type TickRecord } from '../src/control.ts';
import { scheduleFixture } from './support.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function everySecond(id: string): Schedule {
  return scheduleFixture({ id, cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 5000, payload: { id } });
}

/** A clock whose wall time is shifted by `offsetMs` (the replica's clock is skewed). */
function skewedClock(offsetMs: number): Clock {
  return { ...systemClock, wallMicros: () => systemClock.wallMicros() + offsetMs * 1000 };
}

interface Replica {
  scheduler: Scheduler;
  redlock: Redlock;
  queue: Redis;
}

describe('replicated schedulers', () => {
  let locks: RedisNodes;
  let queueRedis: RedisNodes;
  const outcomes: { replica: string; outcome: TickOutcome; schedule: string; tickMs: number; lagMs: number }[] = [];

  beforeAll(async () => {
    [locks, queueRedis] = await Promise.all([startRedisNodes({ count: 5, aof: false }), startRedisNodes({ count: 1, aof: false })]);
  });
  afterAll(async () => {
    await Promise.all([locks.close(), queueRedis.close()]);
  });

  function startReplica(name: string, schedules: Schedule[], clock: Clock = systemClock, lockClock: Clock = clock): Replica {
    const redlock = new Redlock(locks.urls, { clock: lockClock, nodeTimeoutMs: 250 });
    const queue = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const scheduler = new Scheduler({
      replicaId: name,
      redlock,
      queueConnection: queue,
      clock,
      logger: pino({ level: 'silent' }),
      onOutcome: (outcome, schedule, tickMs, lagMs) => outcomes.push({ replica: name, outcome, schedule: schedule.id, tickMs, lagMs }),
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

  /** Ticks in [from, to) of `schedule`, each with how many replicas enqueued it. */
  function enqueuedPerTick(schedule: string, from: number, to: number): Map<number, number> {
    const counts = new Map<number, number>();
    for (let tick = Math.ceil(from / 1000) * 1000; tick < to; tick += 1000) counts.set(tick, 0);
    for (const o of outcomes) if (o.schedule === schedule && o.outcome === 'enqueued' && counts.has(o.tickMs)) counts.set(o.tickMs, (counts.get(o.tickMs) ?? 0) + 1);
    return counts;
  }

  it('three replicas, clocks skewed by +-500 ms: 200 per-second ticks, each enqueued exactly once', async () => {
    const schedules = Array.from({ length: 20 }, (_, i) => everySecond(`team-${i % 4}/job-${i}`));
    const replicas = [startReplica('r0', schedules, skewedClock(-500)), startReplica('r1', schedules), startReplica('r2', schedules, skewedClock(500))];
    const from = Date.now() + 1500;
    await sleep(13_000);
    const to = Date.now() - 1500;
    await Promise.all(replicas.map(stopReplica));
    let ticks = 0;
    for (const schedule of schedules) {
      const counts = enqueuedPerTick(schedule.id, from, to);
      ticks += counts.size;
      expect([...counts.values()].every((n) => n === 1), `${schedule.id}: ${JSON.stringify([...counts])}`).toBe(true);
    }
    expect(ticks).toBeGreaterThanOrEqual(200);
  });

  it('with the majority of lock nodes down nothing is enqueued; when they return, ticks are enqueued again', async () => {
    const schedule = everySecond('team-c/majority');
    const down = locks.nodes.slice(0, 3);
    for (const node of down) await node.kill();
    const replicas = [startReplica('m0', [schedule]), startReplica('m1', [schedule])];
    const downFrom = Date.now();
    await sleep(5000);
    const downTo = Date.now();
    for (const node of down) await node.restart({ keepData: false });
    await sleep(3500);
    const upTo = Date.now() - 1200;
    await Promise.all(replicas.map(stopReplica));
    // A contest still retrying (5 tries of about 500 ms, contestNodeTimeoutMs) when the nodes come back may rightly win then: only ticks contested wholly while they were down count.
    const whileDown = outcomes.filter((o) => o.schedule === schedule.id && o.tickMs >= downFrom && o.tickMs < downTo - 3000);
    expect(whileDown.filter((o) => o.outcome === 'enqueued')).toEqual([]);
    expect(whileDown.some((o) => o.outcome === 'lock-unavailable')).toBe(true);
    const recovered = [...enqueuedPerTick(schedule.id, upTo - 1500, upTo).values()];
    expect(recovered.length).toBeGreaterThan(0);
    expect(recovered.every((n) => n === 1)).toBe(true);
  });

  it('a winner whose lease lapsed before its enqueue (paused between claim and enqueue) does not enqueue under it: the tick is recovered once', async () => {
    // A 1 s lease: the leases this replica skips enqueueing under are really gone from the nodes a second later.
    const schedule = { ...everySecond('team-p/paused-winner'), leaseTtlMs: 1000 };
    // The lock library's monotonic time leaps a lease TTL ahead right after each grant: as if the process was paused there.
    let leapMs = 0;
    const lockClock: Clock = { ...systemClock, now: () => systemClock.now() + leapMs };
    const replica = startReplica('p0', [schedule], systemClock, lockClock);
    replica.redlock.on('acquired', () => (leapMs += schedule.leaseTtlMs));
    const from = Date.now() + 500;
    await sleep(6000);
    await stopReplica(replica);
    const seen = outcomes.filter((o) => o.schedule === schedule.id && o.tickMs >= from && o.tickMs < Date.now() - 4000);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((o) => o.outcome === 'enqueued')).toEqual([]);
    const recovered = new Map<number, number>();
    for (const o of seen) if (o.outcome === 'recovered') recovered.set(o.tickMs, (recovered.get(o.tickMs) ?? 0) + 1);
    expect(recovered.size).toBeGreaterThan(0);
    expect([...recovered.values()].every((n) => n === 1)).toBe(true);
  });

  it('a winner paused during its enqueue, whose tick another replica recovered meanwhile, records lost-race, not a second enqueue', async () => {
    const schedule = { ...everySecond('team-q/paused-in-add'), leaseTtlMs: 1000 };
    // The recovered job is already stored when the winner's add lands (a no-op for an existing job id).
    const tick = Math.ceil((Date.now() + 1500) / 1000) * 1000;
    const connection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const queue = new Queue('tickwarden-default', { connection });
    await queue.add(schedule.id, { lease: { value: 'another-replicas-lease' } }, { jobId: tickJobId(schedule.id, tick), delay: 60_000 });
    // The lock clock leaps a lease TTL right after the winner's validity check: as if paused in the add.
    let leapMs = 0;
    let granted = false;
    const lockClock: Clock = {
      ...systemClock,
      now: () => {
        const now = systemClock.now() + leapMs;
        if (granted) [granted, leapMs] = [false, leapMs + schedule.leaseTtlMs];
        return now;
      },
    };
    const replica = startReplica('q0', [schedule], systemClock, lockClock);
    replica.redlock.on('acquired', () => (granted = true));
    await sleep(tick + 1500 - Date.now());
    await stopReplica(replica);
    await queue.close();
    connection.disconnect();
    const atTick = outcomes.filter((o) => o.schedule === schedule.id && o.tickMs === tick).map((o) => o.outcome);
    expect(atTick).toEqual(['lost-race']);
    // The ticks before it had no job yet: enqueued as usual although the lease lapsed during their add.
    expect(outcomes.some((o) => o.schedule === schedule.id && o.tickMs < tick && o.outcome === 'enqueued')).toBe(true);
  });

  it('a previous run\'s lease held on two nodes while a third is down: the tick is skipped for overlap, not lost as lock-unavailable', async () => {
    const schedule = { ...everySecond('team-h/held'), overlap: 'skip' as const };
    // The holder holds the schedule's lease on nodes 0-2 only (4 and 5 reset: nothing lands there); then
    // node 2 goes down: the scheduler sees "taken" twice, one node unreachable, two nodes free.
    const link = await locks.link('held-holder');
    for (const node of [3, 4]) link.setFault(node, { kind: 'reset' });
    const holder = new Redlock(link.urls, { nodeTimeoutMs: 250, retryCount: 0 });
    const lease = await holder.acquire(leaseResource(schedule.id, 'skip', 0), 30_000);
    await locks.node(2).kill();
    const replica = startReplica('h0', [schedule]);
    const from = Date.now() + 500;
    await sleep(3000);
    await stopReplica(replica);
    const seen = outcomes.filter((o) => o.schedule === schedule.id && o.tickMs >= from);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((o) => o.outcome === 'skipped-overlap'), JSON.stringify(seen)).toBe(true);
    await locks.node(2).restart({ keepData: false });
    await holder.release(lease);
    await holder.close();
  });

  it('a starting replica contests its whole lead one due second after the other, the soonest first', async () => {
    // A 30 s lease: the lead is the default 9.5 s, so the start finds about ten due seconds at once.
    const schedules = Array.from({ length: 6 }, (_, i) => scheduleFixture({ id: `team-lead/job-${i}`, cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 30_000 }));
    const redlock = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
    const contests: number[][] = [];
    const acquireBatch = redlock.acquireBatch.bind(redlock);
    redlock.acquireBatch = (requests, ttlMs, options) => {
      contests.push([...new Set(requests.map((request) => Number(request.claim?.slice('tick:'.length))))]);
      return acquireBatch(requests, ttlMs, options);
    };
    const queue = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const scheduler = new Scheduler({ replicaId: 'lead', redlock, queueConnection: queue, logger: pino({ level: 'silent' }) });
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

  it('catch-up after every replica was down: the missed tick inside the window fires once, late; without catch-up it is missed', async () => {
    const withCatchUp = scheduleFixture({ id: 'team-d/catch-up', cron: '*/5 * * * * *', overlap: 'allow', leaseTtlMs: 5000, catchUpMs: 10_000 });
    const without = scheduleFixture({ id: 'team-d/no-catch-up', cron: '*/5 * * * * *', overlap: 'allow', leaseTtlMs: 5000 });
    // Stop the only replica before it contests a tick (the lead: a third of the 5 s lease TTL), and start again 1.5 s after it.
    const missedTick = Math.ceil((Date.now() + 4000) / 5000) * 5000;
    const first = startReplica('c0', [withCatchUp, without]);
    await sleep(missedTick - 2500 - Date.now());
    await stopReplica(first);
    await sleep(missedTick + 1500 - Date.now());
    const second = startReplica('c1', [withCatchUp, without]);
    await sleep(500);
    const third = startReplica('c2', [withCatchUp, without]);
    await sleep(1000);
    await Promise.all([stopReplica(second), stopReplica(third)]);
    const at = (schedule: string) => outcomes.filter((o) => o.schedule === schedule && o.tickMs === missedTick);
    expect(at('team-d/catch-up').filter((o) => o.outcome === 'enqueued').map((o) => o.replica)).toEqual(['c1']);
    expect(at('team-d/catch-up').filter((o) => o.replica === 'c2').map((o) => o.outcome)).toEqual(['lost-race']);
    expect(at('team-d/no-catch-up').filter((o) => o.outcome === 'enqueued')).toEqual([]);
  });

  it('a winner that dies between claim and enqueue: another replica enqueues the tick once its job is missing', async () => {
    const schedule = scheduleFixture({ id: 'team-e/orphan', cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 2000 });
    // Play the dead winner: claim the next tick (lease and claim granted) and never enqueue.
    const tick = Math.ceil((Date.now() + 1500) / 1000) * 1000;
    const deadWinner = new Redlock(locks.urls);
    await deadWinner.acquire(leaseResource(schedule.id, 'allow', tick), 2000, { claim: tickClaim(tick) });
    await deadWinner.close();
    const replicas = [startReplica('o0', [schedule]), startReplica('o1', [schedule])];
    await sleep(tick + ORPHAN_CHECK_DELAY_MS + 3500 - Date.now());
    await Promise.all(replicas.map(stopReplica));
    const forTick = outcomes.filter((o) => o.schedule === schedule.id && o.tickMs === tick);
    expect(forTick.filter((o) => o.outcome === 'lost-race')).toHaveLength(2);
    expect(forTick.filter((o) => o.outcome === 'recovered')).toHaveLength(1);
    const connection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const queue = new Queue('tickwarden-default', { connection });
    const job = await queue.getJob(tickJobId(schedule.id, tick));
    await queue.close();
    connection.disconnect();
    expect(job?.data.tickMs).toBe(tick);
  });

  it('a recovery that gives up while two lock nodes are down and a later run holds the schedule on a node that answers records skipped-overlap, not missed', async () => {
    // One tick a minute, 2-3 s from now: no later tick of its own gets in the way within the test.
    const tick = Math.ceil((Date.now() + 2000) / 1000) * 1000;
    const schedule = scheduleFixture({ id: 'team-s/busy', cron: `${new Date(tick).getUTCSeconds()} * * * * *`, overlap: 'skip', leaseTtlMs: 2000 });
    const resource = leaseResource(schedule.id, 'skip', 0);
    // The dead winner claims the tick and never enqueues; a later run then holds the schedule's lease.
    const deadWinner = new Redlock(locks.urls);
    const claimed = await deadWinner.acquire(resource, 1000, { claim: tickClaim(tick) });
    const replica = startReplica('s0', [schedule]);
    await sleep(tick + 500 - Date.now());
    await deadWinner.release(claimed);
    const laterRun = await deadWinner.acquire(resource, 60_000);
    // Before the recovery gives up (10 s after the tick): the later run's lease is left on node 0
    // alone (1 and 2 lost it) and nodes 3 and 4 are down - no quorum either way, but a lease that may be valid.
    await sleep(tick + 8500 - Date.now());
    const lockKey = resourceKeys('tickwarden', resource).lock;
    for (const i of [1, 2]) {
      const client = new Redis(locks.node(i).url, { maxRetriesPerRequest: 0 });
      await client.del(lockKey);
      client.disconnect();
    }
    await Promise.all([locks.node(3).kill(), locks.node(4).kill()]);
    try {
      await sleep(tick + 13_000 - Date.now());
    } finally {
      await stopReplica(replica);
      await Promise.all([locks.node(3).restart({ keepData: false }), locks.node(4).restart({ keepData: false })]);
      await deadWinner.release(laterRun);
      await deadWinner.close();
    }
    const forTick = outcomes.filter((o) => o.schedule === schedule.id && o.tickMs === tick).map((o) => o.outcome);
    expect(forTick).toEqual(['lost-race', 'skipped-overlap']);
  }, 60_000);

  it('a recoverer whose add finds the paused winner\'s job stored since its check releases its lease and records lost-race, not recovered', async () => {
    const schedule = scheduleFixture({ id: 'team-r/late-winner', cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 1000 });
    const tick = Math.ceil((Date.now() + 2000) / 1000) * 1000;
    const resource = leaseResource(schedule.id, 'allow', tick);
    const jobId = tickJobId(schedule.id, tick);
    // The winner: claims the tick and is paused (its add lands only later, below).
    const winner = new Redlock(locks.urls);
    const winnerLease = await winner.acquire(resource, schedule.leaseTtlMs, { claim: tickClaim(tick) });
    const redlock = new Redlock(locks.urls);
    const connection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const scheduler = new Scheduler({
      replicaId: 'r0',
      redlock,
      queueConnection: connection,
      logger: pino({ level: 'silent' }),
      onOutcome: (outcome, s, tickMs, lagMs) => outcomes.push({ replica: 'r0', outcome, schedule: s.id, tickMs, lagMs }),
    });
    // The winner's add lands right after the recoverer found the job missing: the test hooks the
    // recoverer's pipelined EXISTS round trip (MONITOR would do, but ioredis 6 trips over it).
    const queueConnection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const queue = new Queue('tickwarden-default', { connection: queueConnection });
    let winnerAdded: Promise<unknown> | undefined;
    const pipeline = connection.pipeline.bind(connection);
    connection.pipeline = ((commands?: unknown[][]) => {
      const started = pipeline(commands as never);
      if (winnerAdded || !commands?.some(([name, key]) => name === 'exists' && key === queue.toKey(jobId))) return started;
      const exec = started.exec.bind(started);
      started.exec = (async () => {
        const replies = await exec();
        winnerAdded = queue.add(schedule.id, { lease: { value: winnerLease.value } }, { jobId, delay: 60_000 });
        await winnerAdded;
        return replies;
      }) as typeof started.exec;
      return started;
    }) as typeof connection.pipeline;
    scheduler.setSchedules([schedule]);
    scheduler.start();
    await sleep(tick + ORPHAN_CHECK_DELAY_MS + 2500 - Date.now());
    await scheduler.stop();
    expect(winnerAdded).toBeDefined();
    await winnerAdded;
    const forTick = outcomes.filter((o) => o.schedule === schedule.id && o.tickMs === tick).map((o) => o.outcome);
    expect(forTick).toEqual(['lost-race', 'lost-race']);
    expect((await queue.getJob(jobId))?.data.lease.value).toBe(winnerLease.value);
    // Released: the stored job's worker can take the resource (the winner's lease has expired).
    const worker = new Redlock(locks.urls, { retryCount: 0 });
    await expect(worker.acquire(resource, 1000, { value: winnerLease.value })).resolves.toMatchObject({ resource });
    await Promise.all([worker.close(), winner.close(), redlock.close(), queue.close()]);
    connection.disconnect();
    queueConnection.disconnect();
  });

  it('overlap cancel-previous: the running run is revoked (its watchdog aborts it) and the tick runs one lease TTL later', async () => {
    const schedule = scheduleFixture({ id: 'team-f/cancel', cron: '* * * * * *', overlap: 'cancel-previous', leaseTtlMs: 1500 });
    // A run of the schedule that would go on for a long time, under its lease's watchdog.
    const running = new Redlock(locks.urls, { abortMarginMs: 100 });
    const runStarted = Date.now();
    let held: () => void = () => undefined;
    const acquired = new Promise<void>((resolve) => (held = resolve));
    const abort = running.using(leaseResource(schedule.id, 'cancel-previous', 0), 1500, (signal) => {
      held();
      return new Promise<unknown>((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));
    });
    // The replicas start once the run holds the lease: a tick before that would just win it (seen on a loaded machine).
    await acquired;
    const replicas = [startReplica('x0', [schedule]), startReplica('x1', [schedule])];
    const reason = await abort;
    const abortedAt = Date.now();
    await sleep(1200);
    await Promise.all(replicas.map(stopReplica));
    await running.close();
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(abortedAt - runStarted).toBeLessThan(3000);
    const enqueued = outcomes.filter((o) => o.schedule === schedule.id && o.outcome === 'enqueued' && o.tickMs >= runStarted);
    expect(enqueued.length).toBeGreaterThan(0);
    expect(new Set(enqueued.map((o) => o.tickMs)).size).toBe(enqueued.length);
    // The tick that revoked the run is due one lease TTL after it (later ticks may find the lease free
    // and run on time, so which enqueue comes first depends on timing; the delayed one must exist).
    const connection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const queue = new Queue('tickwarden-default', { connection });
    const delays = await Promise.all(enqueued.map(async (o) => ((await queue.getJob(tickJobId(schedule.id, o.tickMs)))?.data.dueMs ?? 0) - o.tickMs));
    expect(Math.max(...delays)).toBeGreaterThanOrEqual(1400);
    await queue.close();
    connection.disconnect();
  });

  it('1,201 schedules due at the same instant: every job is added once, in round trips of at most 500 commands (jobs added in slices, history in script calls)', async () => {
    const schedules = Array.from({ length: 1201 }, (_, i) => scheduleFixture({ id: `team-s/s${i}`, cron: '*/5 * * * * *', overlap: 'allow', leaseTtlMs: 6000, queue: 'slices' }));
    const replica = startReplica('s0', schedules);
    // Round trips on the queue connection, by size: addBulk sends one pipeline of one add per job;
    // the tick history one of one script call per 500 ticks.
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
    await sleep(tick + 500 - Date.now());
    await stopReplica(replica);
    const atTick = outcomes.filter((o) => o.schedule.startsWith('team-s/') && o.tickMs === tick);
    expect(atTick.length).toBe(1201);
    expect(new Set(atTick.map((o) => o.schedule)).size).toBe(1201);
    expect(atTick.every((o) => o.outcome === 'enqueued')).toBe(true);
    const connection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const queue = new Queue('tickwarden-slices', { connection });
    expect(await Promise.all(schedules.slice(0, 3).map(async (s) => (await queue.getJob(tickJobId(s.id, tick)))?.data.tickMs))).toEqual([tick, tick, tick]);
    // BullMQ does not close a connection it was given.
    await queue.close();
    connection.disconnect();
    expect(Math.max(...sizes)).toBeLessThanOrEqual(500);
    expect(sizes.filter((size) => size > 1).length).toBeGreaterThanOrEqual(3);
  });

  it('tick history: 1,100 ticks of 2 schedules, interleaved, recorded in one call keep each schedule\'s newest 20, newest first', async () => {
    const connection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const control = new ControlState(connection);
    const tick = (tickMs: number): TickRecord => ({ tickMs, outcome: 'enqueued', lagMs: 1, fence: tickMs, jobId: `j${tickMs}`, replica: 'h0' });
    await control.record(Array.from({ length: 1100 }, (_, i) => ({ scheduleId: `team-h/h${i % 2}`, tick: tick(i) })));
    const newest = (parity: number) => Array.from({ length: HISTORY_LENGTH }, (_, i) => tick(1100 - 2 + parity - 2 * i));
    expect(await control.history('team-h/h0')).toEqual(newest(0));
    expect(await control.history('team-h/h1')).toEqual(newest(1));
    connection.disconnect();
  });

  describe('contest lead: ticks are contested and enqueued ahead of their due time', () => {
    async function storedDueMs(scheduleId: string, tickMs: number): Promise<{ dueMs: number; state: string; readyAtMs: number }> {
      const connection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
      const queue = new Queue('tickwarden-default', { connection });
      const job = await queue.getJob(tickJobId(scheduleId, tickMs));
      const result = { dueMs: job?.data.dueMs ?? 0, state: job ? await job.getState() : 'missing', readyAtMs: (job?.timestamp ?? 0) + (job?.delay ?? 0) };
      await queue.close();
      connection.disconnect();
      return result;
    }

    it('overlap allow: the job is enqueued before its tick, as a delayed job that becomes ready at the due time', async () => {
      // Lease TTL 6 s: the lead is min(9.5 s default, a third of the TTL) = 2 s.
      const schedule = scheduleFixture({ id: 'team-i/ahead', cron: '*/3 * * * * *', overlap: 'allow', leaseTtlMs: 6000 });
      const replica = startReplica('i0', [schedule]);
      const tick = Math.ceil((Date.now() + 3000) / 3000) * 3000;
      await sleep(tick - 500 - Date.now());
      const stored = await storedDueMs(schedule.id, tick);
      await stopReplica(replica);
      const [enqueued] = outcomes.filter((o) => o.schedule === schedule.id && o.tickMs === tick);
      expect(enqueued?.outcome).toBe('enqueued');
      expect(enqueued?.lagMs).toBeLessThan(-1000);
      expect(enqueued?.lagMs).toBeGreaterThanOrEqual(-2000);
      // A worker's BullMQ moves it to waiting at readyAtMs (the worker tests run such jobs).
      expect(stored).toEqual({ dueMs: tick, state: 'delayed', readyAtMs: tick });
    });

    it('contestLeadMs 0 contests when due; a negative lead is refused naming the setting', async () => {
      const schedule = scheduleFixture({ id: 'team-i/no-lead', cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 6000 });
      const redlock = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
      const queueConnection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
      const options = { replicaId: 'i3', redlock, queueConnection, logger: pino({ level: 'silent' }) };
      expect(() => new Scheduler({ ...options, contestLeadMs: -1 })).toThrow(/^contestLeadMs: expected a number of milliseconds >= 0, got -1$/);
      const scheduler = new Scheduler({ ...options, contestLeadMs: 0, onOutcome: (outcome, s, tickMs, lagMs) => outcomes.push({ replica: 'i3', outcome, schedule: s.id, tickMs, lagMs }) });
      scheduler.setSchedules([schedule]);
      scheduler.start();
      await sleep(2500);
      await scheduler.stop();
      await redlock.close();
      queueConnection.disconnect();
      const enqueued = outcomes.filter((o) => o.schedule === schedule.id && o.outcome === 'enqueued');
      expect(enqueued.length).toBeGreaterThan(0);
      expect(enqueued.every((o) => o.lagMs >= 0)).toBe(true);
    });

    it('overlap skip: a contest ahead that finds the previous run holding the lease is contested again when due', async () => {
      const schedule = scheduleFixture({ id: 'team-i/skip', cron: '*/4 * * * * *', overlap: 'skip', leaseTtlMs: 6000 });
      const holder = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
      const lease = await holder.acquire(leaseResource(schedule.id, 'skip', 0), 30_000);
      const replica = startReplica('i1', [schedule]);
      // Not the replica's first tick (that one has no known previous run and is contested when due):
      // contested ahead at tick - 2 s while the previous run holds the lease, which it releases 1 s before the tick.
      const tick = Math.ceil((Date.now() + 6500) / 4000) * 4000;
      await sleep(tick - 1000 - Date.now());
      await holder.release(lease);
      await holder.close();
      await sleep(tick + 1000 - Date.now());
      await stopReplica(replica);
      const seen = outcomes.filter((o) => o.schedule === schedule.id);
      expect(seen.filter((o) => o.tickMs < tick).map((o) => o.outcome)).toContain('skipped-overlap');
      const atTick = seen.filter((o) => o.tickMs === tick);
      expect(atTick.map((o) => o.outcome)).toEqual(['enqueued']);
      expect(atTick[0]?.lagMs).toBeGreaterThanOrEqual(0);
    });

    it('overlap cancel-previous: the running run is revoked when the next tick is due, not during the lead', async () => {
      // Every 2 s, lease TTL 3 s (lead 1 s). No worker takes the jobs over, so each run's lease is held
      // by its queued job for 3 s: every later tick finds it taken ahead, and must revoke it only when due.
      const schedule = scheduleFixture({ id: 'team-i/cancel', cron: '*/2 * * * * *', overlap: 'cancel-previous', leaseTtlMs: 3000 });
      const from = Date.now();
      const replica = startReplica('i2', [schedule]);
      await sleep(6500);
      await stopReplica(replica);
      const enqueued = outcomes.filter((o) => o.schedule === schedule.id && o.outcome === 'enqueued' && o.tickMs > from);
      const revoking = (await Promise.all(enqueued.map(async (o) => ({ tickMs: o.tickMs, ...(await storedDueMs(schedule.id, o.tickMs)) })))).filter((job) => job.dueMs > job.tickMs);
      expect(revoking.length).toBeGreaterThan(0);
      // Revoked at the tick (or later): the new run is due one lease TTL after that. Revoked at the contest ahead, it would be 1 s earlier.
      for (const job of revoking) expect(job.dueMs - job.tickMs).toBeGreaterThanOrEqual(3000);
    });
  });
});
