import { DEFAULT_STALLED_INTERVAL_MS, type ScheduleConfig } from '@tickwarden/config';
import { leaseResource, queueName, tickClaim, tickFence, type TickJobData } from '@tickwarden/contracts';
import { resourceKeys, type Redlock } from '@tickwarden/redlock';
import { RunHistory } from '@tickwarden/runtime';
import { sleep, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CommandGuard,
  FINISHED_MARK_WAIT_MS,
  GuardLauncher,
  JobRunner,
  markHandlerStarted,
  lockDurationFor,
  MAX_STALLED_COUNT,
  RemoteLauncher,
  type ProgramLauncher,
} from '../src/index.ts';
import {
  captureLogger,
  enqueueTick,
  groupAlive,
  nodeCommand,
  outcomes,
  shortLeaseSchedule,
  settledJob,
} from './support.ts';
import { useCluster } from './harness.ts';

describe('worker: jobs under the lease, against real Redis', () => {
  const cluster = useCluster();
  const { startWorker, file, lines } = cluster;
  // Short names for the cluster's parts, which exist once its hooks ran.
  let locks: RedisNodes;
  let queueNodes: RedisNodes;
  let connection: Redis;
  let scheduler: Redlock;
  beforeAll(() => {
    ({ locks, queueNodes, connection, scheduler } = cluster);
    // The queue Redis is restarted by one test: its reconnects are expected.
    connection.on('error', () => undefined);
  });

  /** A job runner that knows only `schedule`, with a command guard of its own (the caller closes it). */
  async function runnerFor(schedule: ScheduleConfig) {
    const guard = new CommandGuard({ logger: captureLogger().logger });
    await guard.start();
    const redlock = cluster.redlock();
    await redlock.probe({ nodeTimeoutMs: 5000 }); // connected: a first connect can outlast a lease's node timeout
    const runner = new JobRunner({
      markStarted: (job, token, mark) => markHandlerStarted(cluster.connection, job, token, mark),
      redlock,
      logger: captureLogger().logger,
      guard,
      schedule: (id) => (id === schedule.id ? schedule : undefined),
    });
    return { guard, runner };
  }

  /** A BullMQ worker with a real worker's job lock and stalled check that takes a job and hangs; disconnecting `connection` kills it (no lock renewals). */
  function dyingWorker(queue: string, schedule: ScheduleConfig) {
    const connection = new Redis(queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
    let taken!: () => void;
    const tookIt = new Promise<void>((resolve) => (taken = resolve));
    const worker = new Worker(
      queueName(queue),
      async () => {
        taken();
        await new Promise(() => undefined);
      },
      {
        connection,
        lockDuration: lockDurationFor([schedule]),
        stalledInterval: DEFAULT_STALLED_INTERVAL_MS,
        maxStalledCount: MAX_STALLED_COUNT,
      },
    );
    worker.on('error', () => undefined);
    return { worker, connection, tookIt };
  }

  /** Appends "<fence> <attempt> <start ms>" to a file, then runs `rest`. */
  const recording = (name: string, rest: string) =>
    nodeCommand(
      `require('node:fs').appendFileSync(${JSON.stringify(file(name))}, [process.env.TICKWARDEN_FENCE, process.env.TICKWARDEN_ATTEMPT, Date.now(), process.pid].join(' ') + '\\n'); ${rest}`,
    );
  /** A lease held by nobody now: a fresh acquire gets it at once (well inside the 1 s TTL an unreleased lease would still have). */
  async function leaseIsFree(resource: string): Promise<boolean> {
    try {
      await scheduler.release(
        await scheduler.acquire(resource, 1000, { retryCount: 1, retryDelayMs: 50, retryJitterMs: 0 }),
      );
      return true;
    } catch {
      return false;
    }
  }

  it("a first start takes the schedule's lease with the tick's claim, runs the handler with its tick's fencing token, logs the run fields, releases the lease", async () => {
    const schedule = shortLeaseSchedule('team-a/ok', recording('ok.txt', ''), { queue: 'q-ok' });
    const { records, metrics } = await startWorker([schedule]);
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule);
    const job = await settledJob(connection, 'q-ok', jobId);
    expect(await job.getState()).toBe('completed');
    const [fence, attempt] = (lines('ok.txt')[0] ?? '').split(' ');
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded', fence: Number(fence) });
    // The first grant on the schedule's resource: the first token of its tick's slot (the job's `fence` is a publication number, not a token).
    expect(Number(fence)).toBe(tickFence(data.tickMs));
    expect(attempt).toBe('1');
    // Marked before the handler started: a later start reads it to know the start deadline no longer applies.
    expect(job.progress).toMatchObject({ handlerStarted: true, attempt: 1, fence: Number(fence) });
    // and its end, for a re-run after BullMQ lost the completion
    expect(job.progress).toMatchObject({
      finished: { outcome: 'succeeded', attemptsMade: 0, attempt: 1, fence: Number(fence), details: { exitCode: 0 } },
    });
    const [done] = outcomes(records, jobId);
    expect(done).toMatchObject({
      worker: 'test-worker',
      schedule: 'team-a/ok',
      tick: new Date((job.data as TickJobData).tickMs).toISOString(),
      jobId,
      fence: Number(fence),
      attempt: 1,
      outcome: 'succeeded',
      exitCode: 0,
    });
    expect(typeof done?.['durationMs']).toBe('number');
    // the payload only at debug
    expect(records.filter((r) => 'payload' in r).every((r) => r['level'] === 20)).toBe(true);
    expect(await leaseIsFree(data.lease.resource)).toBe(true);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/tickwarden_worker_runs_total\{outcome="succeeded"\} 1/);
    expect(text).toMatch(/tickwarden_worker_run_duration_seconds_count\{outcome="succeeded"\} 1/);
    expect(text).toMatch(/tickwarden_worker_active_runs 0/);
  });

  it('the majority of lock nodes paused during a run: the handler is aborted before the validity ends, the job fails as lease lost and is not retried', async () => {
    const schedule = shortLeaseSchedule('team-a/lost', recording('lost.txt', 'setInterval(() => {}, 1000)'), {
      queue: 'q-lost',
      attempts: 3,
      leaseTtlMs: 1000,
    });
    const { records, events, metrics } = await startWorker([schedule]);
    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    // Paused once the command runs: Node's startup can take longer than the lease lasts without extensions.
    await waitUntil(() => lines('lost.txt').length === 1, 'the command to start');
    const paused = [0, 1, 2].map((i) => locks.node(i));
    await Promise.all(paused.map((node) => node.pause()));
    let job: Job;
    try {
      job = await settledJob(connection, 'q-lost', jobId);
    } finally {
      await Promise.all(paused.map((node) => node.resume()));
    }
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toMatch(/^lease lost: /);
    expect(events.aborted).toHaveLength(1);
    expect(events.aborted[0]?.validityLeftMs).toBeGreaterThan(0);
    expect(outcomes(records, jobId).map((r) => r['outcome'])).toEqual(['aborted-lease-lost']);
    const pid = Number((lines('lost.txt')[0] ?? '').split(' ')[3]);
    expect(groupAlive(pid)).toBe(false);
    await sleep(500); // no retry shows up
    expect(lines('lost.txt')).toHaveLength(1);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/tickwarden_worker_runs_total\{outcome="aborted-lease-lost"\} 1/);
    expect(text).toMatch(/tickwarden_worker_lease_abort_validity_left_seconds_count 1/);
  });

  it('a worker paused after "run started" but before its command began, past the lease: the run is deferred (nothing ran; no attempt consumed) and runs once later', async () => {
    const schedule = shortLeaseSchedule('team-a/paused-before', recording('paused-before.txt', ''), {
      queue: 'q-paused-before',
      leaseTtlMs: 1000,
      startDeadlineMs: 30_000,
    });
    const { records, service } = await startWorker([schedule]);
    // As if SIGSTOPped while telling the guard of the program's group: the event loop stands still past the lease.
    const watching = service.guard.watching.bind(service.guard);
    let paused = false;
    service.guard.watching = (pgid, signal) => {
      if (!paused) {
        paused = true;
        const until = performance.now() + 1500;
        while (performance.now() < until);
      }
      return watching(pgid, signal);
    };
    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    const job = await settledJob(connection, 'q-paused-before', jobId);
    expect(paused).toBe(true);
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(outcomes(records, jobId).map((r) => r['outcome'])).toEqual(['deferred', 'succeeded']);
    expect(outcomes(records, jobId)[0]?.['reason']).toMatch(/before the handler started/);
    // One run, and the mark it left names that run's fence, not the deferred attempt's.
    const ran = lines('paused-before.txt');
    expect(ran).toHaveLength(1);
    expect(job.progress).toMatchObject({ handlerStarted: true, fence: Number(ran[0]?.split(' ')[0]), deferrals: 1 });
  });

  it('a worker that died after taking a job, before its handler started: the job comes back within the default start deadline and runs once', async () => {
    const schedule = shortLeaseSchedule('team-a/orphaned', recording('orphaned.txt', ''), {
      queue: 'q-orphaned',
      leaseTtlMs: 3000,
    });
    // The start deadline the scheduler gives such a tick by default (leaseTtl + 10 s: apps/scheduler tick-window.ts).
    const startDeadlineMs = schedule.leaseTtlMs + 10_000;
    // The dead worker, with the job lock and stalled check a worker would use: it takes the job and is gone (no lock renewals).
    const { worker: dead, connection: deadConnection, tookIt } = dyingWorker('q-orphaned', schedule);
    try {
      const { jobId, data } = await enqueueTick(scheduler, connection, schedule, { data: { startDeadlineMs } });
      await tookIt;
      deadConnection.disconnect();
      const { records } = await startWorker([schedule]);
      const job = await settledJob(connection, 'q-orphaned', jobId);
      expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
      const started = Number(lines('orphaned.txt')[0]?.split(' ')[2]);
      expect(started - data.dueMs).toBeLessThan(startDeadlineMs);
      expect(outcomes(records, jobId).map((r) => r['outcome'])).toEqual(['succeeded']);
    } finally {
      await dead.close(true).catch(() => undefined);
    }
  });

  it.each([
    { end: 'succeeded', rest: '', state: 'completed' },
    { end: 'failed', rest: 'process.exit(3)', state: 'failed' },
  ] as const)(
    'a worker paused after its handler $end, past the job lock, before BullMQ recorded that end: the re-run records it without running the handler again',
    async ({ end, rest, state }) => {
      const name = `lost-${end}`;
      const schedule = shortLeaseSchedule(`team-a/${name}`, recording(`${name}.txt`, rest), {
        queue: `q-${name}`,
        leaseTtlMs: 1000,
      });
      const { guard, runner } = await runnerFor(schedule);
      // The paused worker: its handler ends, then it stands still (no lock renewals, no completion) until BullMQ's stalled check gives the job away.
      const pausedConnection = new Redis(queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
      let ended!: () => void;
      const handlerEnded = new Promise<void>((resolve) => (ended = resolve));
      const paused = new Worker(
        queueName(`q-${name}`),
        async (job, token, signal) => {
          await runner.processJob(job, token, signal).catch(() => undefined);
          pausedConnection.disconnect();
          ended();
          await new Promise(() => undefined);
        },
        {
          connection: pausedConnection,
          lockDuration: lockDurationFor([schedule]),
          stalledInterval: DEFAULT_STALLED_INTERVAL_MS,
        },
      );
      paused.on('error', () => undefined);
      try {
        const { jobId } = await enqueueTick(scheduler, connection, schedule);
        await handlerEnded;
        const { records } = await startWorker([schedule]);
        const job = await settledJob(connection, `q-${name}`, jobId);
        expect(await job.getState()).toBe(state);
        const ran = lines(`${name}.txt`);
        expect(ran).toHaveLength(1);
        const fence = Number(ran[0]?.split(' ')[0]);
        expect(outcomes(records, jobId)).toEqual([
          expect.objectContaining({ outcome: 'finished-earlier', finishedOutcome: end, fence, finishedAttempt: 1 }),
        ]);
        if (end === 'succeeded')
          expect(job.returnvalue).toMatchObject({ outcome: 'succeeded', fence, details: { exitCode: 0 } });
        else expect(job.failedReason).toBe('command exited with code 3');
        expect(job.attemptsMade).toBe(1);
      } finally {
        await paused.close(true).catch(() => undefined);
        await guard.close();
      }
    },
  );

  it.each([
    { attempts: 1, runs: 1, state: 'failed' },
    { attempts: 2, runs: 2, state: 'completed' },
  ] as const)(
    'attempts $attempts: a worker that stopped while its handler ran (its end recorded nowhere) fails the attempt as worker-lost; the handler starts $runs time(s) in all',
    async ({ attempts, runs, state }) => {
      const name = `worker-lost-${attempts}`;
      const schedule = shortLeaseSchedule(`team-a/${name}`, recording(`${name}.txt`, 'setTimeout(() => {}, 300)'), {
        queue: `q-${name}`,
        leaseTtlMs: 1000,
        attempts,
      });
      const { guard, runner } = await runnerFor(schedule);
      // The stopped worker: its queue connection goes once the handler started, so neither BullMQ nor the finished mark learns the end.
      const stoppedConnection = new Redis(queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
      const stopped = new Worker(
        queueName(`q-${name}`),
        async (job, token, signal) => {
          void runner.processJob(job, token, signal).catch(() => undefined);
          await waitUntil(() => lines(`${name}.txt`).length === 1, 'the handler to start');
          stoppedConnection.disconnect();
          await new Promise(() => undefined);
        },
        {
          connection: stoppedConnection,
          lockDuration: lockDurationFor([schedule]),
          stalledInterval: DEFAULT_STALLED_INTERVAL_MS,
          maxStalledCount: MAX_STALLED_COUNT,
        },
      );
      stopped.on('error', () => undefined);
      try {
        const { jobId } = await enqueueTick(scheduler, connection, schedule);
        await waitUntil(() => stoppedConnection.status === 'end', 'the worker to stop');
        const { records } = await startWorker([schedule]);
        const job = await settledJob(connection, `q-${name}`, jobId);
        expect(await job.getState()).toBe(state);
        const ran = lines(`${name}.txt`).map((line) => line.split(' '));
        expect(ran).toHaveLength(runs);
        expect(ran.map(([, attempt]) => Number(attempt))).toEqual(attempts === 1 ? [1] : [1, 2]);
        const [lost, ...rest] = outcomes(records, jobId);
        expect(lost).toMatchObject({ outcome: 'worker-lost', attempt: 1, fence: Number(ran[0]?.[0]), level: 50 });
        if (attempts === 1) {
          expect(rest).toEqual([]);
          expect(job.failedReason).toMatch(/^worker lost: attempt 1/);
        } else {
          expect(rest).toEqual([expect.objectContaining({ outcome: 'succeeded', attempt: 2 })]);
        }
      } finally {
        await stopped.close(true).catch(() => undefined);
        await guard.close();
      }
    },
  );

  it('a job that stalls twice (two workers die holding it, before its handler started) comes back each time and runs once', async () => {
    const schedule = shortLeaseSchedule('team-a/stalled-twice', recording('stalled-twice.txt', ''), {
      queue: 'q-stalled-twice',
      leaseTtlMs: 1000,
      startDeadlineMs: 60_000,
    });
    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    const dead: Worker[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        // A worker that takes the job and is gone (no lock renewals); the next one's stalled check gives the job back.
        const { worker, connection: deadConnection, tookIt } = dyingWorker('q-stalled-twice', schedule);
        dead.push(worker);
        await tookIt;
        deadConnection.disconnect();
      }
      const { records } = await startWorker([schedule]);
      const job = await settledJob(connection, 'q-stalled-twice', jobId);
      expect(await job.getState()).toBe('completed');
      expect(job.stalledCounter).toBe(2);
      expect(lines('stalled-twice.txt')).toHaveLength(1);
      expect(outcomes(records, jobId).map((r) => r['outcome'])).toEqual(['succeeded']);
    } finally {
      await Promise.all(dead.map((worker) => worker.close(true).catch(() => undefined)));
    }
  });

  it(`a job that stalled more than ${MAX_STALLED_COUNT} times, which BullMQ fails without calling the processor, is recorded failed (not silent); the handler never runs`, async () => {
    const schedule = shortLeaseSchedule('team-a/stalls', recording('stalls.txt', ''), { queue: 'q-stalls' });
    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    // What BullMQ's stalled check writes on the job at the stall past maxStalledCount (moveStalledJobsToWait.lua: "defa").
    await connection.hset(`bull:${queueName('q-stalls')}:${jobId}`, 'defa', 'job stalled more than allowable limit');
    const { records, metrics } = await startWorker([schedule]);
    const job = await settledJob(connection, 'q-stalls', jobId);
    expect(await job.getState()).toBe('failed');
    expect(job.failedReason).toBe('job stalled more than allowable limit');
    await waitUntil(() => outcomes(records, jobId).length > 0, 'the failure recorded');
    expect(outcomes(records, jobId)).toEqual([
      expect.objectContaining({
        outcome: 'failed',
        schedule: schedule.id,
        level: 50,
        reason: 'job stalled more than allowable limit',
      }),
    ]);
    expect(lines('stalls.txt')).toEqual([]);
    expect(await metrics.registry.metrics()).toMatch(/tickwarden_worker_runs_total\{outcome="failed"\} 1/);
  });

  it('a lock node restarted empty during a long run: the run continues (the key is re-established) and succeeds', async () => {
    const schedule = shortLeaseSchedule('team-a/restart', nodeCommand('setTimeout(() => {}, 2500)'), {
      queue: 'q-restart',
      leaseTtlMs: 1000,
    });
    const { records, events } = await startWorker([schedule]);
    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    await waitUntil(() => records.some((r) => r['msg'] === 'run started' && r['jobId'] === jobId), 'the run to start');
    const key = resourceKeys('tickwarden', leaseResource(schedule.id, 'skip', 0)).lock;
    const holds = async (index: number) => {
      const client = new Redis(locks.node(index).url, { maxRetriesPerRequest: 0, lazyConnect: true });
      try {
        await client.connect();
        return (await client.get(key)) !== null;
      } finally {
        client.disconnect();
      }
    };
    await sleep(300);
    for (const index of [3, 4]) {
      await locks.node(index).restart({ keepData: false });
      // the next extensions put the key back on the restarted node
      await waitUntil(() => holds(index), `node ${index} to hold the lease again`, { timeoutMs: 1500, intervalMs: 50 });
    }
    const job = await settledJob(connection, 'q-restart', jobId);
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(events.aborted).toHaveLength(0);
  });

  it('maxRuntime: each attempt is aborted as timed out and retried per attempts; the fences of successive attempts strictly increase', async () => {
    const schedule = shortLeaseSchedule('team-a/slow', recording('slow.txt', 'setInterval(() => {}, 1000)'), {
      queue: 'q-slow',
      attempts: 3,
      backoff: { type: 'fixed', delayMs: 100 },
      // Long enough for the recording process to start and write its line on a loaded machine.
      maxRuntimeMs: 1500,
    });
    const { records } = await startWorker([schedule]);
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule);
    const job = await settledJob(connection, 'q-slow', jobId);
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(3);
    expect(job.failedReason).toBe('timed out after 1500 ms (maxRuntime)');
    expect(outcomes(records, jobId).map((r) => r['outcome'])).toEqual([
      'aborted-timeout',
      'aborted-timeout',
      'aborted-timeout',
    ]);
    const runs = lines('slow.txt').map((line) => line.split(' ').map(Number));
    expect(runs.map(([, attempt]) => attempt)).toEqual([1, 2, 3]);
    // The first start's token is its tick's; each retry's is above the attempt's before.
    const fences = runs.map(([fence]) => fence as number);
    expect(fences[0]).toBe(tickFence(data.tickMs));
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1] as number);
    for (const [, , , pid] of runs) expect(groupAlive(pid as number)).toBe(false);
    expect(await leaseIsFree(data.lease.resource)).toBe(true);
  });

  it('a failed attempt is retried after its backoff and the retry can succeed', async () => {
    const schedule = shortLeaseSchedule(
      'team-a/flaky',
      recording('flaky.txt', 'process.exit(process.env.TICKWARDEN_ATTEMPT === "1" ? 1 : 0)'),
      {
        queue: 'q-flaky',
        attempts: 2,
        backoff: { type: 'fixed', delayMs: 200 },
      },
    );
    const { records } = await startWorker([schedule]);
    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    const job = await settledJob(connection, 'q-flaky', jobId);
    expect(await job.getState()).toBe('completed');
    expect(outcomes(records, jobId).map((r) => [r['outcome'], r['attempt']])).toEqual([
      ['failed', 1],
      ['succeeded', 2],
    ]);
    const [first, second] = lines('flaky.txt').map((line) => line.split(' ').map(Number));
    expect(second?.[0]).toBeGreaterThan(first?.[0] as number);
    expect((second?.[2] as number) - (first?.[2] as number)).toBeGreaterThanOrEqual(200);
  });

  it('overlap skip seen from the worker: a second job of the schedule starting while the first runs is skipped', async () => {
    const schedule = shortLeaseSchedule('team-a/overlap', recording('overlap.txt', 'setTimeout(() => {}, 2000)'), {
      queue: 'q-overlap',
      leaseTtlMs: 1000,
    });
    // Both ticks were claimed and their jobs wait in the queue (no worker yet), past the lease TTL: a queued job holds no lease.
    const first = await enqueueTick(scheduler, connection, schedule);
    await sleep(1100);
    const second = await enqueueTick(scheduler, connection, schedule, {
      tickMs: first.data.tickMs + 1000,
      delayMs: 2500,
    });
    await sleep(1100);
    const { records } = await startWorker([schedule], { concurrency: 2 });
    const [a, b] = await Promise.all([
      settledJob(connection, 'q-overlap', first.jobId),
      settledJob(connection, 'q-overlap', second.jobId),
    ]);
    expect(a.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(b.returnvalue).toEqual({ outcome: 'skipped-overlap' });
    expect(await b.getState()).toBe('completed');
    expect(lines('overlap.txt')).toHaveLength(1);
    const skipped = outcomes(records, second.jobId)[0];
    expect(skipped).toMatchObject({ outcome: 'skipped-overlap', schedule: 'team-a/overlap' });
    // it was skipped while the first ran
    expect(Number(skipped?.['time'])).toBeLessThan(Number(outcomes(records, first.jobId)[0]?.['time']));
  });

  it("a skip tick whose schedule's lease is held by an attempt that never started its handler (its worker stopped right after the grant) waits for the lease and runs: not skipped", async () => {
    const schedule = shortLeaseSchedule('team-a/unstarted-holder', recording('unstarted-holder.txt', ''), {
      queue: 'q-unstarted-holder',
      leaseTtlMs: 1500,
    });
    // The start deadline the scheduler gives such a tick by default (leaseTtl + 10 s: apps/scheduler tick-window.ts).
    const startDeadlineMs = schedule.leaseTtlMs + 10_000;
    const tickMs = Date.now();
    // The tick before's run took the schedule's lease, with its tick's tokens, and its worker stopped there: no job of it active, no handler started.
    const heldAtMs = Date.now();
    const holder = await scheduler.acquire(leaseResource(schedule.id, 'skip', tickMs), schedule.leaseTtlMs, {
      retryCount: 0,
      fence: { from: tickFence(tickMs - 1000) },
    });
    const { records } = await startWorker([schedule]);
    const { jobId } = await enqueueTick(scheduler, connection, schedule, { tickMs, data: { startDeadlineMs } });
    const job = await settledJob(connection, 'q-unstarted-holder', jobId);
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
    const seen = outcomes(records, jobId);
    expect(seen[0]).toMatchObject({
      outcome: 'deferred',
      reason: expect.stringMatching(/no other run of it has started/),
    });
    expect(seen.map((record) => record['outcome'])).not.toContain('skipped-overlap');
    // One run, once the held lease had lapsed, with a token above the holder's.
    const ran = lines('unstarted-holder.txt');
    expect(ran).toHaveLength(1);
    const [fence, , startedAt] = (ran[0] ?? '').split(' ').map(Number);
    expect(startedAt).toBeGreaterThanOrEqual(heldAtMs + schedule.leaseTtlMs);
    expect(fence).toBeGreaterThan(holder.fence);
  });

  it('a tick enqueued again after the queue Redis lost its data (same claim value, a new publication number) does not run twice: already-started', async () => {
    const schedule = shortLeaseSchedule('team-a/wiped', recording('wiped.txt', ''), { queue: 'q-wiped' });
    const { records, metrics } = await startWorker([schedule]);
    const first = await enqueueTick(scheduler, connection, schedule);
    expect((await settledJob(connection, 'q-wiped', first.jobId)).returnvalue).toMatchObject({ outcome: 'succeeded' });
    // The data is gone; a recovery publishes the tick again under a new publication number (the claim is started, so none could be won: written by hand).
    const queue = new Queue(queueName('q-wiped'), { connection });
    try {
      await (await queue.getJob(first.jobId))?.remove();
      await queue.add(
        schedule.id,
        { ...first.data, lease: { ...first.data.lease, fence: first.data.lease.fence + 1 } },
        { jobId: first.jobId, attempts: schedule.attempts },
      );
    } finally {
      await queue.close();
    }
    const again = await settledJob(connection, 'q-wiped', first.jobId);
    expect(again.returnvalue).toEqual({ outcome: 'already-started' });
    expect(lines('wiped.txt')).toHaveLength(1);
    expect(outcomes(records, first.jobId).map((record) => record['outcome'])).toEqual(['succeeded', 'already-started']);
    // Refused by the claim, which the first publication's start holds.
    expect(outcomes(records, first.jobId)[1]).toMatchObject({
      startedBy: `${first.data.lease.value}|${first.data.lease.fence}`,
    });
    expect(await metrics.registry.metrics()).toMatch(/tickwarden_worker_runs_total\{outcome="already-started"\} 1/);
    // Both ends are in the schedule's run history, newest first, as their log lines have them.
    const history = new RunHistory(connection);
    await waitUntil(async () => (await history.read(schedule.id, 10)).length === 2, 'both runs in the history');
    const [second, firstRun] = await history.read(schedule.id, 10);
    expect(firstRun).toMatchObject({
      tickMs: first.data.tickMs,
      jobId: first.jobId,
      outcome: 'succeeded',
      attempt: 1,
      worker: 'test-worker',
      exitCode: 0,
    });
    expect(firstRun?.fence).toBe(tickFence(first.data.tickMs));
    // The second publication took no lease: its end records no fencing token (a publication number is not one).
    expect(second).toMatchObject({ outcome: 'already-started', tickMs: first.data.tickMs, jobId: first.jobId });
    expect(second?.fence).toBeUndefined();
    expect(second?.error).toBeUndefined();
  });

  it("a job started after its start deadline does not run (missed-deadline) and leaves the schedule's lease free (it never took it)", async () => {
    const schedule = shortLeaseSchedule('team-a/late', recording('late.txt', ''), {
      queue: 'q-late',
      startDeadlineMs: 1000,
    });
    const { records } = await startWorker([schedule]);
    const tickMs = Date.now() - 5000;
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule, { tickMs, dueMs: tickMs });
    const job = await settledJob(connection, 'q-late', jobId);
    expect(job.returnvalue).toEqual({ outcome: 'missed-deadline' });
    expect(outcomes(records, jobId)[0]).toMatchObject({ outcome: 'missed-deadline', startDeadlineMs: 1000 });
    expect(lines('late.txt')).toHaveLength(0);
    expect(await leaseIsFree(data.lease.resource)).toBe(true);
  });

  it('a run whose program cannot start for want of a launcher is deferred (no attempt consumed), then runs once one answers', async () => {
    const schedule = shortLeaseSchedule('team-a/no-launcher', recording('no-launcher.txt', ''), {
      queue: 'q-no-launcher',
      startDeadlineMs: 60_000,
    });
    const guard = new CommandGuard({ logger: captureLogger().logger });
    await guard.start();
    const redlock = cluster.redlock();
    const { logger, records } = captureLogger();
    let launcher: ProgramLauncher = new RemoteLauncher(file('no-launcher.sock'), { readyTimeoutMs: 200 });
    const runner = new JobRunner({
      markStarted: (job, token, mark) => markHandlerStarted(cluster.connection, job, token, mark),
      redlock,
      logger,
      guard,
      schedule: (id) => (id === schedule.id ? schedule : undefined),
      get launcher() {
        return launcher;
      },
    });
    // BullMQ leaves a connection it was given open: closed below, before a later test kills the queue Redis.
    const consumerConnection = new Redis(queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
    const consumer = new Worker(
      queueName('q-no-launcher'),
      (job, token, signal) => runner.processJob(job, token, signal),
      { connection: consumerConnection },
    );
    try {
      const { jobId } = await enqueueTick(scheduler, connection, schedule);
      await waitUntil(() => outcomes(records, jobId).length > 0, 'the first attempt');
      expect(outcomes(records, jobId)[0]).toMatchObject({
        outcome: 'deferred',
        reason: expect.stringContaining('does not answer'),
      });
      expect(lines('no-launcher.txt')).toEqual([]);
      // The worker's own guard starts it, once the launcher is gone from its options.
      launcher = new GuardLauncher(guard);
      const job = await settledJob(connection, 'q-no-launcher', jobId);
      // attempts: 1, and the one attempt BullMQ counts is the success: the deferral consumed none.
      expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
      expect(job.attemptsMade).toBe(1);
      expect(lines('no-launcher.txt')).toHaveLength(1);
    } finally {
      await consumer.close(true);
      consumerConnection.disconnect();
      await guard.close();
    }
  });

  it('a run marks its handler started only while it holds the job: one whose job was handed on first does not run there; one whose job the queue Redis lost runs once', async () => {
    const handedOn = shortLeaseSchedule('team-a/handed-on', recording('handed-on.txt', ''), { queue: 'q-mark' });
    const vanished = shortLeaseSchedule('team-a/vanished', recording('vanished.txt', ''), { queue: 'q-mark' });
    const guard = new CommandGuard({ logger: captureLogger().logger });
    await guard.start();
    const redlock = cluster.redlock();
    await redlock.probe({ nodeTimeoutMs: 5000 });
    const { logger, records } = captureLogger();
    const jobKey = (job: Job) => `${job.queueQualifiedName}:${job.id}`;
    // What happens on the queue Redis between the lease grant and the mark, per schedule.
    const meanwhile: Record<string, (job: Job) => Promise<unknown>> = {
      // BullMQ's stalled check handed the job on (its worker was cut off): another attempt holds its lock.
      [handedOn.id]: (job) => connection.set(`${jobKey(job)}:lock`, 'another-attempt'),
      // The queue Redis lost its data.
      [vanished.id]: (job) => connection.del(jobKey(job)),
    };
    const runner = new JobRunner({
      markStarted: async (job, token, mark) => {
        await meanwhile[(job.data as TickJobData).schedule]?.(job);
        return markHandlerStarted(cluster.connection, job, token, mark);
      },
      redlock,
      logger,
      guard,
      schedule: (id) => [handedOn, vanished].find((schedule) => schedule.id === id),
    });
    const consumerConnection = new Redis(queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
    const consumer = new Worker(queueName('q-mark'), (job, token, signal) => runner.processJob(job, token, signal), {
      connection: consumerConnection,
    });
    // Its ends cannot be recorded (the job is another's, or gone): BullMQ's errors are expected.
    consumer.on('error', () => undefined);
    try {
      const first = await enqueueTick(scheduler, connection, handedOn);
      await waitUntil(() => outcomes(records, first.jobId).length > 0, 'the handed-on attempt to end');
      expect(outcomes(records, first.jobId)).toEqual([
        expect.objectContaining({ outcome: 'deferred', reason: expect.stringContaining('passed to another attempt') }),
      ]);
      expect(lines('handed-on.txt')).toEqual([]);
      // No mark: the attempt holding the job now reads it unmarked, and may run the handler.
      const queue = new Queue(queueName('q-mark'), { connection });
      expect((await queue.getJob(first.jobId))?.progress).not.toHaveProperty('handlerStarted');
      expect(await leaseIsFree(first.data.lease.resource)).toBe(true);

      const second = await enqueueTick(scheduler, connection, vanished);
      await waitUntil(() => outcomes(records, second.jobId).length > 0, 'the vanished job to end');
      expect(outcomes(records, second.jobId)).toEqual([expect.objectContaining({ outcome: 'succeeded' })]);
      expect(lines('vanished.txt')).toHaveLength(1);
      expect(records).toContainEqual(
        expect.objectContaining({ jobId: second.jobId, level: 40, msg: expect.stringContaining('vanished') }),
      );
    } finally {
      await consumer.close(true);
      consumerConnection.disconnect();
      await guard.close();
    }
  });

  it('a job of a schedule this worker does not know yet waits for its reload within the start deadline, and runs once it knows it; past the deadline it is missed', async () => {
    const known = shortLeaseSchedule('team-a/known', nodeCommand(''), { queue: 'q-late' });
    const { service, records } = await startWorker([known]);
    const added = shortLeaseSchedule('team-a/added', recording('added.txt', ''), {
      queue: 'q-late',
      startDeadlineMs: 20_000,
    });
    const waited = await enqueueTick(scheduler, connection, added);
    await waitUntil(() => outcomes(records, waited.jobId).some((r) => r['outcome'] === 'deferred'), 'the job deferred');
    service.setConfig({ schedules: [known, added], files: [] });
    expect((await settledJob(connection, 'q-late', waited.jobId)).returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(lines('added.txt')).toHaveLength(1);
    expect(outcomes(records, waited.jobId)[0]).toMatchObject({
      outcome: 'deferred',
      reason: "schedule not in this worker's configuration",
    });

    const never = shortLeaseSchedule('team-a/never', nodeCommand(''), { queue: 'q-late', startDeadlineMs: 1500 });
    const missed = await enqueueTick(scheduler, connection, never);
    expect((await settledJob(connection, 'q-late', missed.jobId)).returnvalue).toEqual({ outcome: 'missed-deadline' });
    expect(outcomes(records, missed.jobId).at(-1)).toMatchObject({
      outcome: 'missed-deadline',
      reason: "schedule not in this worker's configuration",
    });
  });

  it('a job of a schedule not known yet, processed at the very millisecond of its start deadline, is missed, not failed', async () => {
    const unknown = shortLeaseSchedule('team-a/edge', nodeCommand(''), { queue: 'q-edge', startDeadlineMs: 1500 });
    const { jobId, data } = await enqueueTick(scheduler, connection, unknown);
    const deadlineMs = data.dueMs + 1500;
    const guard = new CommandGuard({ logger: captureLogger().logger });
    await guard.start();
    const { logger, records } = captureLogger();
    // Every reading of the clock is the deadline itself: no time is left to wait for a reload, and it is not a
    // schedule removed from the config either (the wait for one ends at the start deadline).
    const runner = new JobRunner({
      markStarted: (job, token, mark) => markHandlerStarted(cluster.connection, job, token, mark),
      redlock: cluster.redlock(),
      logger,
      guard,
      schedule: () => undefined,
      now: () => deadlineMs,
    });
    const consumerConnection = new Redis(queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
    const consumer = new Worker(queueName('q-edge'), (job, token, signal) => runner.processJob(job, token, signal), {
      connection: consumerConnection,
    });
    try {
      await waitUntil(() => outcomes(records, jobId).length > 0, 'the first attempt');
      expect(outcomes(records, jobId)[0]).toMatchObject({
        outcome: 'missed-deadline',
        reason: "schedule not in this worker's configuration",
      });
    } finally {
      await consumer.close(true);
      consumerConnection.disconnect();
      await guard.close();
    }
  });

  it('a job of a schedule missing from the config past its wait, or with invalid data, fails without retry', async () => {
    const known = shortLeaseSchedule('team-a/known', nodeCommand(''), { queue: 'q-bad' });
    const { records } = await startWorker([known]);
    const unknown = shortLeaseSchedule('team-a/unknown', nodeCommand(''), { queue: 'q-bad', attempts: 3 });
    // No start deadline (an older scheduler's job): the worker waits two minutes after its due time.
    const { jobId, data } = await enqueueTick(scheduler, connection, unknown, { dueMs: Date.now() - 125_000 });
    const job = await settledJob(connection, 'q-bad', jobId);
    expect(await job.getState()).toBe('failed');
    expect(job.attemptsMade).toBe(1);
    expect(job.failedReason).toBe('schedule "team-a/unknown" is not in this worker\'s configuration');
    expect(await leaseIsFree(data.lease.resource)).toBe(true);

    const queue = new Queue(queueName('q-bad'), { connection });
    await queue.add('garbage', { version: 1, schedule: 'NOT VALID' }, { jobId: 'garbage-1', attempts: 3 });
    await queue.close();
    const bad = await settledJob(connection, 'q-bad', 'garbage-1');
    expect(await bad.getState()).toBe('failed');
    expect(bad.attemptsMade).toBe(1);
    expect(bad.failedReason).toMatch(/^invalid tick job data: /);
    expect(outcomes(records, 'garbage-1')[0]).toMatchObject({ outcome: 'failed' });
  });

  it('shutdown past the grace: the run is aborted as aborted-shutdown, its lease released, and the retry runs on another worker', async () => {
    const schedule = shortLeaseSchedule(
      'team-a/shutdown',
      recording('shutdown.txt', 'if (process.env.TICKWARDEN_ATTEMPT === "1") setInterval(() => {}, 1000)'),
      { queue: 'q-shutdown', attempts: 2 },
    );
    const first = await startWorker([schedule]);
    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    await waitUntil(() => lines('shutdown.txt').length === 1, "the first attempt's command");
    await first.service.stop(100);
    const [aborted] = outcomes(first.records, jobId);
    expect(aborted).toMatchObject({ outcome: 'aborted-shutdown', reason: 'the worker is shutting down', attempt: 1 });
    expect(await first.metrics.registry.metrics()).toMatch(
      /tickwarden_worker_runs_total\{outcome="aborted-shutdown"\} 1/,
    );
    expect(groupAlive(Number((lines('shutdown.txt')[0] ?? '').split(' ')[3]))).toBe(false);
    const second = await startWorker([schedule]);
    const job = await settledJob(connection, 'q-shutdown', jobId);
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(outcomes(second.records, jobId)).toMatchObject([{ outcome: 'succeeded', attempt: 2 }]);
    const [one, two] = lines('shutdown.txt').map((line) => Number(line.split(' ')[0]));
    expect(two).toBeGreaterThan(one as number);
  });

  it('start deadline through BullMQ: a retry after a failed handler runs although late; a job whose lease could not be taken is deferred (no attempt consumed) and, back past its deadline, dropped', async () => {
    const backoff = { type: 'fixed' as const, delayMs: 1500 };
    // Attempt 1's handler fails; attempt 2 starts 1.5 s later, past the 1 s deadline, and still runs.
    const failing = shortLeaseSchedule(
      'team-a/late-retry',
      recording('late-retry.txt', 'process.exit(process.env.TICKWARDEN_ATTEMPT === "1" ? 1 : 0)'),
      { queue: 'q-deadline', attempts: 2, backoff, startDeadlineMs: 1000 },
    );
    // Its first start cannot take its lease (the lock majority is paused; no-quorum tries go on for QUORUM_WAIT_MS, 1 s): deferred, it comes back past the deadline and never runs.
    const blocked = shortLeaseSchedule('team-a/late-blocked', recording('late-blocked.txt', ''), {
      queue: 'q-deadline',
      attempts: 2,
      backoff,
      startDeadlineMs: 2000,
    });
    const { records, service } = await startWorker([failing, blocked]);
    const paused = [0, 1, 2].map((i) => locks.node(i));
    // The majority is paused before the job is added: the worker cannot take it before the pause.
    const dropped = await enqueueTick(scheduler, connection, blocked, {
      beforeAdd: () => Promise.all(paused.map((node) => node.pause())),
    });
    try {
      await waitUntil(() => outcomes(records, dropped.jobId).length === 1, "the blocked job's first start to give up");
      await waitUntil(() => Date.now() > dropped.data.dueMs + 2000, 'its start deadline to pass', { intervalMs: 20 });
    } finally {
      await Promise.all(paused.map((node) => node.resume()));
    }
    // The worker stopped taking jobs while no quorum answered it; it takes them again once one does.
    await waitUntil(() => service.takingJobs, 'the worker to take jobs again', { timeoutMs: 5000 });
    const retried = await enqueueTick(scheduler, connection, failing);
    const [ran, notRun] = await Promise.all([
      settledJob(connection, 'q-deadline', retried.jobId),
      settledJob(connection, 'q-deadline', dropped.jobId),
    ]);
    expect(outcomes(records, retried.jobId).map((r) => r['outcome'])).toEqual(['failed', 'succeeded']);
    expect(ran.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(ran.progress).toMatchObject({ handlerStarted: true, attempt: 2, attemptsMade: 1 });
    const ends = outcomes(records, dropped.jobId).map((r) => r['outcome']);
    expect(ends).toEqual([...ends.slice(0, -1).map(() => 'deferred'), 'missed-deadline']);
    expect(ends[0]).toBe('deferred');
    expect(notRun.returnvalue).toEqual({ outcome: 'missed-deadline' });
    // BullMQ counts the completing call as made; the deferrals before it consumed nothing.
    expect(notRun.attemptsMade).toBe(1);
    expect(notRun.attemptsStarted).toBe(ends.length);
    expect(lines('late-blocked.txt')).toHaveLength(0);
  });

  it('a reload that raises the largest lease TTL replaces the queue worker: a running job finishes on the old one, new jobs get the longer BullMQ lock', async () => {
    const short = shortLeaseSchedule('team-a/short', recording('reload-short.txt', 'setTimeout(() => {}, 1500)'), {
      queue: 'q-reload',
      leaseTtlMs: 1000,
    });
    const long = shortLeaseSchedule('team-a/long', recording('reload-long.txt', 'setTimeout(() => {}, 1500)'), {
      queue: 'q-reload',
      leaseTtlMs: 45_000,
    });
    const { service, records } = await startWorker([short]);
    expect(service.lockDurationMs).toBe(5000);
    const running = await enqueueTick(scheduler, connection, short);
    await waitUntil(() => lines('reload-short.txt').length === 1, "the running job's command");
    service.setConfig({ schedules: [short, long], files: [] });
    expect(service.lockDurationMs).toBe(45_000);
    expect(
      records
        .filter((r) => r['msg'] === 'consuming queue' && r['queue'] === 'q-reload')
        .map((r) => r['lockDurationMs']),
    ).toEqual([5000, 45_000]);
    const next = await enqueueTick(scheduler, connection, long);
    await waitUntil(() => lines('reload-long.txt').length === 1, "the new job's command");
    const lockPttl = await connection.pttl(`bull:${queueName('q-reload')}:${next.jobId}:lock`);
    expect(lockPttl).toBeGreaterThan(30_000);
    const [old, fresh] = await Promise.all([
      settledJob(connection, 'q-reload', running.jobId),
      settledJob(connection, 'q-reload', next.jobId),
    ]);
    expect(old.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(fresh.returnvalue).toMatchObject({ outcome: 'succeeded' });
    await waitUntil(
      () => records.some((r) => r['msg'] === 'replaced queue worker closed' && r['queue'] === 'q-reload'),
      'the old queue worker to close',
    );
  });

  it('the queue Redis not answering when a program ends: its lease is released within about a second all the same, and the run is recorded once the queue is back', async () => {
    const schedule = shortLeaseSchedule('team-a/mark', recording('mark.txt', 'setTimeout(() => {}, 1000)'), {
      queue: 'q-mark',
    });
    const { records } = await startWorker([schedule]);
    const node = queueNodes.nodes[0];
    if (!node) throw new Error('no queue Redis');
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule);
    await waitUntil(() => lines('mark.txt').length === 1, 'the program started');
    await node.pause();
    try {
      // The program ends a second after it started; its finished mark cannot be written.
      const from = performance.now();
      await waitUntil(() => leaseIsFree(data.lease.resource), 'the lease released', { timeoutMs: 5000 });
      expect(performance.now() - from).toBeLessThan(1000 + FINISHED_MARK_WAIT_MS + 1500);
    } finally {
      await node.resume();
    }
    expect((await settledJob(connection, 'q-mark', jobId)).returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(outcomes(records, jobId)).toHaveLength(1);
    expect(lines('mark.txt')).toHaveLength(1);
  });

  it('the queue Redis killed and back empty: a job enqueued then runs within seconds', async () => {
    const schedule = shortLeaseSchedule('team-a/back', recording('back.txt', ''), { queue: 'q-back' });
    const { records } = await startWorker([schedule]);
    const node = queueNodes.nodes[0];
    if (!node) throw new Error('no queue Redis');
    await node.kill();
    await sleep(1500);
    await node.restart({ keepData: false });
    await waitUntil(async () => (await connection.ping().catch(() => 'down')) === 'PONG', 'the queue Redis back');
    const from = performance.now();
    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    expect((await settledJob(connection, 'q-back', jobId)).returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(performance.now() - from).toBeLessThan(5000);
    expect(outcomes(records, jobId)).toHaveLength(1);
  });

  describe('a later start (retry or stalled re-run) never takes over a possibly-alive previous attempt', () => {
    const schedule = shortLeaseSchedule('team-a/rerun', recording('rerun.txt', ''), {
      queue: 'q-rerun',
      leaseTtlMs: 1000,
    });
    const guard = new CommandGuard({ logger: captureLogger().logger });
    beforeAll(() => guard.start());
    afterAll(() => guard.close());
    async function runner(known: ScheduleConfig = schedule) {
      const { logger, records } = captureLogger();
      const redlock = cluster.redlock();
      // Connected first: a start claim never retries, and a later start's node timeout (100 ms here)
      // can be shorter than a first connect on a loaded machine (the job would be deferred).
      await redlock.probe({ nodeTimeoutMs: 5000 });
      return {
        runner: new JobRunner({
          markStarted: (job, token, mark) => markHandlerStarted(cluster.connection, job, token, mark),
          redlock,
          logger,
          guard,
          schedule: (id) => (id === known.id ? known : undefined),
        }),
        records,
      };
    }
    /** A stalled re-run as BullMQ hands it over (`progress` as the earlier attempt left it). */
    const laterStart = (data: TickJobData, progress: unknown = 0) =>
      ({
        id: `${data.schedule}@${data.tickMs}`,
        data,
        attemptsStarted: 2,
        attemptsMade: 0,
        stalledCounter: 1,
        progress,
        updateProgress: () => Promise.resolve(),
      }) as unknown as Job;
    const jobData = (
      tickMs: number,
      lease: { resource: string; value: string; fence: number; ttlMs: number },
    ): TickJobData => ({
      version: 1,
      schedule: schedule.id,
      tickMs,
      dueMs: tickMs,
      payload: null,
      overlap: 'skip',
      lease,
      startDeadlineMs: null,
      maxRuntimeMs: null,
      enqueuedBy: 'test',
      enqueuedAtMs: tickMs,
    });

    it('waits for the previous lease to lapse, then runs with a fresh value and a greater fence', async () => {
      const { runner: r } = await runner();
      const resource = leaseResource(schedule.id, 'skip', 1);
      // The previous attempt's worker died holding the lease (never extended, never released).
      const previous = await scheduler.acquire(resource, 1000, { retryCount: 0 });
      const from = Date.now();
      const result = await r.processJob(
        laterStart(jobData(Date.now(), { resource, value: previous.value, fence: previous.fence, ttlMs: 1000 })),
        undefined,
        undefined,
      );
      expect(result.outcome).toBe('succeeded');
      expect(result.fence).toBeGreaterThan(previous.fence);
      const [, , startedAt] = (lines('rerun.txt').at(-1) ?? '').split(' ').map(Number);
      expect((startedAt as number) - from).toBeGreaterThanOrEqual(900);
    });

    it('a first start that comes after a later start of the same job (its worker paused before it started, the job handed on) does not run: already-started', async () => {
      const { runner: r, records } = await runner();
      const before = lines('rerun.txt').length;
      const tickMs = Date.now();
      const resource = leaseResource(schedule.id, 'skip', tickMs);
      // The tick as a replica publishes it: its claim won (no lease), the job named by a publication number.
      const [claimed] = await scheduler.claimBatch([{ resource, claim: tickClaim(tickMs) }], { retryCount: 0 });
      if (!claimed?.ok) throw new Error('the tick was not claimed');
      const publication = 4_242_424_242;
      const data = jobData(tickMs, { resource, value: claimed.claim.value, fence: publication, ttlMs: 1000 });
      expect((await r.processJob(laterStart(data), undefined, undefined)).outcome).toBe('succeeded');
      const firstStart = {
        id: `${data.schedule}@${data.tickMs}`,
        data,
        attemptsStarted: 1,
        attemptsMade: 0,
        stalledCounter: 0,
        progress: 0,
        updateProgress: () => Promise.resolve(),
      } as unknown as Job;
      expect(await r.processJob(firstStart, undefined, undefined)).toEqual({ outcome: 'already-started' });
      expect(lines('rerun.txt')).toHaveLength(before + 1);
      expect(outcomes(records).at(-1)).toMatchObject({
        outcome: 'already-started',
        startedBy: `${claimed.claim.value}|${publication}:later`,
      });
    });

    it('skips when the previous holder is still alive (it keeps extending) after the TTL plus a second', async () => {
      const { runner: r } = await runner();
      const resource = leaseResource(schedule.id, 'skip', 2);
      const before = lines('rerun.txt').length;
      let value = '';
      let fence = 0;
      const alive = scheduler.using(
        resource,
        1000,
        async (_signal, lease) => {
          value = lease.value;
          fence = lease.fence;
          await sleep(3500);
        },
        // A missed extension would end this holder: a loaded machine may answer later than the 100 ms default
        // (the watchdog takes up to 454 ms for a 1 s lease).
        { nodeTimeoutMs: 400 },
      );
      await waitUntil(() => value !== '', 'the holder');
      const from = performance.now();
      const result = await r.processJob(
        laterStart(jobData(Date.now(), { resource, value, fence, ttlMs: 1000 })),
        undefined,
        undefined,
      );
      expect(result.outcome).toBe('skipped-overlap');
      expect(performance.now() - from).toBeGreaterThanOrEqual(2000);
      expect(lines('rerun.txt')).toHaveLength(before);
      await alive;
    });

    it('numbers an attempt by the attempts that ended or stalled, never by deferral marks: a re-run after a stall never repeats a number', async () => {
      const { runner: r, records } = await runner();
      const resource = leaseResource(schedule.id, 'skip', 3);
      // Call 1 ran; its worker, paused, marked a deferral on resuming and the job stalled; call 2 was
      // deferred. Counting deferral marks against calls would number call 3 as 1 again.
      const job = {
        ...laterStart(jobData(Date.now(), { resource, value: 'a'.repeat(40), fence: 1, ttlMs: 1000 }), {
          deferrals: 2,
          lastDeferral: { reason: 'no quorum', atMs: Date.now() },
        }),
        attemptsStarted: 3,
      } as unknown as Job;
      const result = await r.processJob(job, undefined, undefined);
      expect(result.outcome).toBe('succeeded');
      expect(outcomes(records).at(-1)).toMatchObject({ outcome: 'succeeded', attempt: 2 });
    });

    it('past the start deadline: a re-run whose handler never started is dropped (missed-deadline) without releasing the previous lease; one whose handler started runs', async () => {
      // A schedule of its own: the runs of the tests before, of later ticks than this one, raised
      // the shared one's fence past this tick's slot (its retry would be superseded).
      const own = { ...schedule, id: 'team-a/rerun-late' };
      const { runner: r, records } = await runner(own);
      const before = lines('rerun.txt').length;
      const dueMs = Date.now() - 5000;
      // A 3 s lease: the drop is checked well within its TTL, on a loaded machine too.
      const ttlMs = 3000;
      const late = (resource: string, value: string, fence: number): TickJobData => ({
        ...jobData(dueMs, { resource, value, fence, ttlMs }),
        schedule: own.id,
        startDeadlineMs: 1000,
      });
      // The previous attempt died holding the lease (or is stalled but alive): its lease must stay. Its token is its tick's.
      const resource = leaseResource(own.id, 'skip', dueMs);
      const previous = await scheduler.acquire(resource, ttlMs, { retryCount: 0, fence: { from: tickFence(dueMs) } });
      const dropped = await r.processJob(
        laterStart(late(resource, previous.value, previous.fence)),
        undefined,
        undefined,
      );
      expect(dropped).toEqual({ outcome: 'missed-deadline' });
      expect(outcomes(records).at(-1)).toMatchObject({
        outcome: 'missed-deadline',
        firstStart: false,
        startDeadlineMs: 1000,
      });
      expect(lines('rerun.txt')).toHaveLength(before);
      expect(await leaseIsFree(resource)).toBe(false);
      // The earlier attempt's handler had started: the run started in time; this attempt continues it once that lease lapsed.
      // A retry after attempt 1's handler failed (its end recorded: attemptsMade 1).
      const retry = {
        ...laterStart(late(resource, previous.value, previous.fence), {
          handlerStarted: true,
          attempt: 1,
          fence: previous.fence,
          attemptsMade: 0,
        }),
        attemptsMade: 1,
        stalledCounter: 0,
      } as unknown as Job;
      const continued = await r.processJob(retry, undefined, undefined);
      expect(continued.outcome).toBe('succeeded');
      expect(continued.fence).toBeGreaterThan(previous.fence);
      expect(lines('rerun.txt')).toHaveLength(before + 1);
    });
  });
});
