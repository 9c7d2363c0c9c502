import type { HandlerConfig, ScheduleConfig } from '@tickwarden/config';
import { queueName, tickFence } from '@tickwarden/contracts';
import { Redlock, systemClock } from '@tickwarden/redlock';
import { RunHistory } from '@tickwarden/runtime';
import { scheduleConfig, waitUntil } from '@tickwarden/testkit';
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { BEHIND_WAIT_MS, CommandGuard, JobRunner, markHandlerStarted, runFences, startOrder } from '../src/index.ts';
import { useCluster } from './harness.ts';
import {
  beatingCommand,
  beatRuns,
  captureLogger,
  enqueueTick,
  outcomes,
  settledJob,
  shellCommand,
  type BeatRun,
} from './support.ts';

/** The next whole second at least 300 ms from now: a tick of an every-second schedule, as a scheduler's are. */
const nextTick = (): number => Math.ceil((Date.now() + 300) / 1000) * 1000;

/**
 * The order of a schedule's runs, decided by the lock nodes at each run's first start: where a
 * queued job holds no lease, a run neither starts before its tick's due time nor after a later
 * tick's run, and two ticks due at once start in tick order. Every schedule has the defaults a team
 * file gives (every second, attempts 1, a 30 s lease TTL, overlap skip), and its jobs the start
 * deadline a scheduler gives such a tick (lease TTL plus 10 s).
 */
describe("worker: the order of a schedule's runs, decided at their first start", () => {
  const cluster = useCluster();

  const beating = (name: string, ms: number): HandlerConfig => beatingCommand(cluster.file(name), ms);
  /** The ledger's runs in the order they started. */
  const runs = (name: string): BeatRun[] => beatRuns(cluster.lines(name));
  /** A schedule as a team file with only a name and a handler gives it, on its own queue. */
  const schedule = (id: string, handler: HandlerConfig, queue: string): ScheduleConfig =>
    scheduleConfig({ id, handler, queue });
  /** Claims the tick and enqueues its job as a replica does, with the scheduler's default start deadline. */
  const publish = (s: ScheduleConfig, tickMs: number, options: { delayMs?: number; dueMs?: number } = {}) =>
    enqueueTick(cluster.scheduler, cluster.connection, s, {
      tickMs,
      ...options,
      data: { startDeadlineMs: s.leaseTtlMs + 10_000 },
    });
  /** The record of the run-end line (the one with an outcome) of a job: exactly one. */
  const endOf = (records: readonly Record<string, unknown>[], jobId: string): Record<string, unknown> => {
    const ends = outcomes(records, jobId);
    expect(ends).toHaveLength(1);
    return ends[0] as Record<string, unknown>;
  };
  /** When the worker granted a job's run its lease, wall ms: its "run started" line follows the grant at once. */
  const grantedAt = (records: readonly Record<string, unknown>[], jobId: string): number =>
    Number(records.find((r) => r['msg'] === 'run started' && r['jobId'] === jobId)?.['time']);

  it('two ticks of a skip schedule due at once (a backlog), the later one handed out first: the earlier starts first; the later is skipped-overlap only while it runs, else runs after it', async () => {
    // Several rounds, each on a schedule of its own: a run long enough that the later tick surely finds it running, a
    // short one, and last a short one whose successor's job is handed out only once it ended.
    const rounds = [
      { holdMs: 1500, together: true },
      { holdMs: 0, together: true },
      { holdMs: 1500, together: true },
      { holdMs: 0, together: true },
      { holdMs: 0, together: false },
    ];
    const schedules = rounds.map(({ holdMs }, i) =>
      schedule(`team-a/backlog-${i}`, beating(`backlog-${i}.txt`, holdMs), 'q-backlog'),
    );
    const worker = await cluster.startWorker(schedules, { concurrency: 2 });
    const queue = new Queue(queueName('q-backlog'), { connection: cluster.connection });
    try {
      for (const [i, s] of schedules.entries()) {
        const { holdMs, together } = rounds[i] as (typeof rounds)[number];
        const later = nextTick();
        const tickMs = later - 1000;
        await waitUntil(() => Date.now() >= later, 'the later tick to be due', { intervalMs: 5 });
        let first: Awaited<ReturnType<typeof publish>>;
        let second: Awaited<ReturnType<typeof publish>>;
        if (together) {
          // T + 1 s is due now and T a second ago; both are claimed and enqueued while the queue hands out nothing,
          // T + 1 s first: the worker gets both at once, the later tick's job first (BullMQ hands jobs out in order).
          await queue.pause();
          second = await publish(s, later);
          first = await publish(s, tickMs);
          await queue.resume();
        } else {
          first = await publish(s, tickMs);
          await settledJob(cluster.connection, 'q-backlog', first.jobId);
          second = await publish(s, later);
        }
        const [ran, next] = await Promise.all([
          settledJob(cluster.connection, 'q-backlog', first.jobId),
          settledJob(cluster.connection, 'q-backlog', second.jobId),
        ]);
        if (together) expect(next.processedOn).toBeLessThanOrEqual(ran.processedOn as number);
        const ledger = runs(`backlog-${i}.txt`);
        // T always runs, first and with its tick's token: never superseded or skipped for T + 1 s.
        expect(ran.returnvalue).toMatchObject({ outcome: 'succeeded', fence: tickFence(tickMs) });
        expect(endOf(worker.records, first.jobId)).toMatchObject({ outcome: 'succeeded', attempt: 1 });
        const [earlier] = ledger as [BeatRun];
        expect(earlier.fence).toBe(tickFence(tickMs));
        expect(earlier.ended).toBe(true);
        const end = endOf(worker.records, second.jobId);
        if (next.returnvalue.outcome === 'skipped-overlap') {
          // Skipped while T's run held the lease (nodes found it taken), between the start of T's job and its completion
          // (its lease was released before).
          expect(next.returnvalue).toEqual({ outcome: 'skipped-overlap' });
          expect(end).toMatchObject({ outcome: 'skipped-overlap' });
          expect((end['takenOn'] as string[]).length).toBeGreaterThan(0);
          expect(Number(end['time'])).toBeGreaterThanOrEqual(ran.processedOn as number);
          expect(Number(end['time'])).toBeLessThanOrEqual(ran.finishedOn as number);
          expect(ledger).toHaveLength(1);
        } else {
          // T's run was over: T + 1 s ran after it, with a token of its own tick.
          expect(next.returnvalue).toMatchObject({ outcome: 'succeeded' });
          expect(end).toMatchObject({ outcome: 'succeeded', attempt: 1 });
          expect(ledger).toHaveLength(2);
          const after = ledger[1] as BeatRun;
          expect(after.fence).toBe(next.returnvalue.fence);
          expect(after.fence).toBeGreaterThanOrEqual(tickFence(later));
          expect(after.fence).toBeLessThan(tickFence(later + 1000));
          expect(after.start).toBeGreaterThanOrEqual(earlier.last);
        }
        // A run that long is surely running when T + 1 s starts; one whose end came first surely is not.
        if (holdMs > 0) expect(next.returnvalue).toEqual({ outcome: 'skipped-overlap' });
        if (!together) expect(next.returnvalue).toMatchObject({ outcome: 'succeeded' });
      }
    } finally {
      await queue.close();
    }
  });

  it('a tick whose job is still queued (not due yet) never makes the next tick skipped-overlap: the next runs after waiting for it at most BEHIND_WAIT_MS; the queued one, come late, is superseded', async () => {
    const s = schedule('team-a/queued', beating('queued.txt', 0), 'q-queued');
    const worker = await cluster.startWorker([s]);
    const later = nextTick();
    const tickMs = later - 1000;
    // T's job is claimed and queued, ready only in a minute (its queue slow); T + 1 s is due now.
    const first = await publish(s, tickMs, { delayMs: 60_000 });
    await waitUntil(() => Date.now() >= later, 'the later tick to be due', { intervalMs: 5 });
    const second = await publish(s, later);
    const ran = await settledJob(cluster.connection, 'q-queued', second.jobId);
    expect(ran.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(endOf(worker.records, second.jobId)).toMatchObject({ outcome: 'succeeded', attempt: 1 });
    // Nothing held the lease before it, nor raised the fence into T's slot or beyond: the first token of its own slot.
    expect(ran.returnvalue.fence).toBe(tickFence(later));
    // It waited for T, claimed and not started, until BEHIND_WAIT_MS past its due time by the lock nodes' clocks, not longer.
    const [run] = runs('queued.txt') as [BeatRun];
    expect(run.fence).toBe(tickFence(later));
    expect(run.start).toBeGreaterThanOrEqual(later + BEHIND_WAIT_MS);
    expect(run.start).toBeLessThan(later + BEHIND_WAIT_MS + 2000);
    expect(await (await cluster.job('q-queued', first.jobId)).getState()).toBe('delayed');

    // T's job comes now: a later tick's run was granted, so T is passed and never runs.
    await (await cluster.job('q-queued', first.jobId)).promote();
    const passed = await settledJob(cluster.connection, 'q-queued', first.jobId);
    expect(passed.returnvalue).toEqual({ outcome: 'superseded' });
    expect(endOf(worker.records, first.jobId)).toMatchObject({ outcome: 'superseded', passedBy: tickFence(later) });
    expect(runs('queued.txt')).toHaveLength(1);
  });

  it("a later tick ran first (its run still going): the earlier tick's late job ends superseded (fence passed), not skipped-overlap, and never runs", async () => {
    const s = schedule('team-a/passed', beating('passed.txt', 3000), 'q-passed');
    const worker = await cluster.startWorker([s]);
    const later = nextTick();
    const tickMs = later - 1000;
    await waitUntil(() => Date.now() >= later, 'the later tick to be due', { intervalMs: 5 });
    const second = await publish(s, later);
    await waitUntil(() => runs('passed.txt').length === 1, "the later tick's run to start");
    // T's job comes only now (its replica, or its queue, was slow): due a second ago, its claim just won.
    const first = await publish(s, tickMs);
    const passed = await settledJob(cluster.connection, 'q-passed', first.jobId);
    const [running] = runs('passed.txt') as [BeatRun];
    expect(running.fence).toBe(tickFence(later));
    expect(passed.returnvalue).toEqual({ outcome: 'superseded' });
    expect(await passed.getState()).toBe('completed');
    expect(passed.progress).not.toHaveProperty('handlerStarted');
    const end = endOf(worker.records, first.jobId);
    expect(end).toMatchObject({ outcome: 'superseded', passedBy: tickFence(later) });
    // Decided while the later run went on: that run had not ended yet.
    expect(running.ended).toBe(false);
    const ran = await settledJob(cluster.connection, 'q-passed', second.jobId, 30_000);
    expect(ran.returnvalue).toMatchObject({ outcome: 'succeeded', fence: tickFence(later) });
    expect(Number(end['time'])).toBeLessThan(ran.finishedOn as number);
    const ledger = runs('passed.txt');
    expect(ledger).toEqual([expect.objectContaining({ fence: tickFence(later), ended: true })]);
    // The schedule's run history says the same, newest first.
    const history = new RunHistory(cluster.connection);
    await waitUntil(async () => (await history.read(s.id, 10)).length === 2, 'both ends in the history');
    const [newest, oldest] = await history.read(s.id, 10);
    expect(newest).toMatchObject({ tickMs: later, jobId: second.jobId, outcome: 'succeeded', fence: tickFence(later) });
    // It took no lease: no fencing token.
    expect(oldest).toMatchObject({ tickMs, jobId: first.jobId, outcome: 'superseded' });
    expect(oldest?.fence).toBeUndefined();
  });

  it("a run never starts before its due time by the lock nodes' clocks: a worker whose clock is 2 s ahead takes a job due in 1.5 s, its start waits for the nodes, and no attempt is consumed", async () => {
    const s = schedule('team-a/clock-ahead', beating('clock-ahead.txt', 0), 'q-clock-ahead');
    const guard = new CommandGuard({ logger: captureLogger().logger });
    await guard.start();
    const redlock = cluster.redlock();
    await redlock.probe({ nodeTimeoutMs: 5000 }); // connected: a first connect can outlast a start's node timeout
    const { logger, records } = captureLogger();
    // This worker's clock runs 2 s ahead: by it, the job below is due half a second ago.
    const runner = new JobRunner({
      markStarted: (job, token, mark) => markHandlerStarted(cluster.connection, job, token, mark),
      redlock,
      logger,
      guard,
      schedule: (id) => (id === s.id ? s : undefined),
      now: () => Date.now() + 2000,
    });
    const consumerConnection = new Redis(cluster.queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
    const consumer = new Worker(
      queueName('q-clock-ahead'),
      (job: Job, token, signal) => runner.processJob(job, token, signal),
      { connection: consumerConnection },
    );
    try {
      // Due in 1.5 s (its tick the whole second before, as a scheduler's jitter gives), ready now.
      const dueMs = Date.now() + 1500;
      const tickMs = Math.floor(dueMs / 1000) * 1000;
      const { jobId } = await publish(s, tickMs, { dueMs, delayMs: 0 });
      const job = await settledJob(cluster.connection, 'q-clock-ahead', jobId);
      expect(job.returnvalue).toMatchObject({ outcome: 'succeeded', fence: tickFence(tickMs) });
      const [run] = runs('clock-ahead.txt') as [BeatRun];
      expect(run.start).toBeGreaterThanOrEqual(dueMs);
      // Granted no earlier either (the "run started" line follows the grant; logs carry the real clock).
      expect(grantedAt(records, jobId)).toBeGreaterThanOrEqual(dueMs);
      // Its start waited (the nodes answered `early`): not deferred, and the one attempt BullMQ counts is the success.
      expect(outcomes(records, jobId)).toEqual([expect.objectContaining({ outcome: 'succeeded', attempt: 1 })]);
      expect(job.attemptsMade).toBe(1);
      expect(job.progress).toMatchObject({ handlerStarted: true, attempt: 1 });
    } finally {
      await consumer.close(true);
      consumerConnection.disconnect();
      await guard.close();
    }
  });

  it("a retry takes its token from its tick's slot, not from its worker's clock: on a worker 3 s ahead it passes no later tick", async () => {
    // Fails its first attempt and succeeds its second (attempts 2, no backoff), then the next tick's job comes.
    const handler = shellCommand(
      `[ "$TICKWARDEN_ATTEMPT" = 2 ] || exit 3; echo "$TICKWARDEN_TICK $TICKWARDEN_FENCE" >> '${cluster.file('retry-ahead.txt')}'`,
    );
    const s = scheduleConfig({ id: 'team-a/retry-ahead', handler, queue: 'q-retry-ahead', attempts: 2 });
    const guard = new CommandGuard({ logger: captureLogger().logger });
    await guard.start();
    const wallMicros = () => systemClock.wallMicros() + 3_000_000;
    const redlock = new Redlock(cluster.locks.urls, { clock: { ...systemClock, wallMicros } });
    await redlock.probe({ nodeTimeoutMs: 5000 });
    const runner = new JobRunner({
      markStarted: (job, token, mark) => markHandlerStarted(cluster.connection, job, token, mark),
      redlock,
      logger: captureLogger().logger,
      guard,
      schedule: (id) => (id === s.id ? s : undefined),
      now: () => Date.now() + 3000,
    });
    const consumerConnection = new Redis(cluster.queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
    const consumer = new Worker(
      queueName('q-retry-ahead'),
      (job: Job, token, signal) => runner.processJob(job, token, signal),
      { connection: consumerConnection },
    );
    try {
      const later = nextTick();
      await waitUntil(() => Date.now() >= later, 'the later tick to be due', { intervalMs: 5 });
      const first = await publish(s, later - 1000);
      const retried = await settledJob(cluster.connection, 'q-retry-ahead', first.jobId);
      expect(retried.attemptsMade).toBe(2);
      expect(retried.returnvalue.fence).toBeGreaterThan(tickFence(later - 1000));
      expect(retried.returnvalue.fence).toBeLessThan(tickFence(later));
      const second = await publish(s, later);
      const next = await settledJob(cluster.connection, 'q-retry-ahead', second.jobId);
      // Run, not superseded; its token in its own tick's slot (above one its own first try left on a node, if any).
      expect(next.returnvalue).toMatchObject({ outcome: 'succeeded' });
      expect(next.returnvalue.fence).toBeGreaterThanOrEqual(tickFence(later));
      expect(next.returnvalue.fence).toBeLessThan(tickFence(later + 1000));
    } finally {
      await consumer.close(true);
      consumerConnection.disconnect();
      await redlock.close();
      await guard.close();
    }
  });
});

describe('startOrder and runFences: where a run goes among its schedule', () => {
  const T = 1_800_000_000_000;
  const ticks = { previous: T - 1000, next: T + 1000 };
  const job = { tickMs: T, dueMs: T + 20, overlap: 'skip' as const, startDeadlineMs: 13_000 };

  it("a skip run: its tick's slot of tokens, not before its due time, waiting behind the tick before while that one may still start", () => {
    expect(startOrder(job, ticks, T)).toEqual({
      fence: { from: tickFence(T), below: tickFence(T + 1000) },
      notBeforeMs: T + 20,
      revoke: false,
      after: { claim: `tick:${T - 1000}`, untilMs: T + 20 + BEHIND_WAIT_MS, fence: tickFence(T - 1000) },
    });
    // The tick before past its start deadline: nothing to wait for.
    expect(startOrder(job, ticks, T - 1000 + 13_000).after).toBeUndefined();
  });

  it('cancel-previous revokes and waits for nothing; allow has no limit; a manual trigger is its own tick; a backfill only orders its token after the runs so far', () => {
    expect(startOrder({ ...job, overlap: 'cancel-previous' }, ticks, T)).toMatchObject({
      revoke: true,
      after: undefined,
    });
    expect(runFences({ ...job, overlap: 'allow' }, ticks)).toEqual({ from: tickFence(T), below: undefined });
    expect(runFences(job, { previous: undefined, next: undefined })).toEqual({ from: tickFence(T), below: undefined });
    expect(startOrder({ ...job, backfill: true }, ticks, T)).toEqual({
      fence: { from: tickFence(T), below: undefined },
    });
  });
});
