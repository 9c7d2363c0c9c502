import type { HandlerConfig } from '@tickwarden/config';
import { queueName, tickFence, type TickJobData } from '@tickwarden/contracts';
import { waitUntil } from '@tickwarden/testkit';
import { Worker } from 'bullmq';
import { QuorumUnavailableError, type NodeCause } from '@tickwarden/redlock';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  markHandlerStarted,
  peersToMarkRevoked,
  predecessorsWaitUntil,
  TAKEOVER_SLACK_MS,
  unseenRevokedUntil,
} from '../src/index.ts';
import { useCluster } from './harness.ts';
import {
  beatingCommand,
  beatRuns,
  enqueueTick,
  outcomes,
  settledJob,
  shortLeaseSchedule,
  type BeatRun,
} from './support.ts';

/** The next tick of a schedule ticking every `periodMs` (whole seconds), at least 300 ms from now: ticks are the schedule's cron's, as a scheduler's are. */
const nextTick = (periodMs: number): number => Math.ceil((Date.now() + 300) / periodMs) * periodMs;

describe('worker: overlap cancel-previous with a real worker', () => {
  const cluster = useCluster();
  const beating = (name: string, ms: number): HandlerConfig => beatingCommand(cluster.file(name), ms);
  /**
   * When the worker granted a job's run its lease, wall ms: its "run started" line follows the grant at once. A
   * cancel-previous run's grant revokes the schedule's running run.
   */
  const grantedAt = (records: readonly Record<string, unknown>[], jobId: string | undefined): number =>
    Number(records.find((r) => r['msg'] === 'run started' && r['jobId'] === jobId)?.['time']);
  /** The ledger's runs in the order they started. */
  const runs = (name: string): BeatRun[] => beatRuns(cluster.lines(name));

  it("a schedule of period shorter than its lease TTL: each tick's run, when it starts, revokes the running one, which is aborted as superseded within about a second; the next starts right after it left the active list, never overlapping", async () => {
    const { connection, scheduler } = cluster;
    const ttl = 4000;
    const period = 2000;
    // Longer than a period plus the 1.5 s allowed for the abort: each revoked run is still running when aborted.
    const schedule = shortLeaseSchedule('team-a/cancel', beating('cancel.txt', 4000), {
      cron: '*/2 * * * * *',
      queue: 'q-cancel',
      overlap: 'cancel-previous',
      leaseTtlMs: ttl,
      startDeadlineMs: 30_000,
    });
    const worker = await cluster.startWorker([schedule], { concurrency: 2 });
    const t0 = nextTick(period);
    // The scheduler: each tick claimed when due and enqueued due now; the worker's start of each run revokes the one before.
    const ticks: Awaited<ReturnType<typeof enqueueTick>>[] = [];
    for (let k = 0; k < 3; k++) {
      await waitUntil(() => Date.now() >= t0 + k * period, `tick ${k} to be due`, { intervalMs: 5 });
      ticks.push(await enqueueTick(scheduler, connection, schedule, { tickMs: t0 + k * period }));
    }
    const jobs = await Promise.all(ticks.map((tick) => settledJob(connection, 'q-cancel', tick.jobId)));
    const ledger = runs('cancel.txt');
    expect(ledger).toHaveLength(3);
    for (let k = 0; k < 2; k++) {
      const job = jobs[k];
      expect(await job?.getState()).toBe('failed');
      expect(job?.failedReason).toMatch(/^superseded: lease lost: /);
      // Not retried (UnrecoverableError): one attempt, even where attempts allow more.
      expect(job?.attemptsMade).toBe(1);
      const ends = outcomes(worker.records, ticks[k]?.jobId);
      expect(ends).toMatchObject([{ outcome: 'superseded', level: 30 }]);
      // The successor's grant revoked it: never before the successor's tick was due.
      const revokedAt = grantedAt(worker.records, ticks[k + 1]?.jobId);
      expect(revokedAt).toBeGreaterThanOrEqual(t0 + (k + 1) * period);
      // Aborted within about half a second of the revocation (extensions every min(ttl/3, 500 ms)); loose for a loaded CI machine.
      expect(Number(ends[0]?.['time']) - revokedAt).toBeLessThan(1500);
      const [previous, next] = [ledger[k] as BeatRun, ledger[k + 1] as BeatRun];
      expect(previous.ended).toBe(false);
      // Never overlapping: nothing of the revoked run after its successor started.
      expect(previous.last).toBeLessThan(next.start);
      expect(next.fence).toBeGreaterThan(previous.fence);
      // Each run's token in its tick's slot, below the next tick's.
      expect(next.fence).toBeGreaterThanOrEqual(tickFence(t0 + (k + 1) * period));
      expect(next.fence).toBeLessThan(tickFence(t0 + (k + 2) * period));
      // The successor started right after the predecessor left the active list, not a TTL later.
      expect(next.start - (job?.finishedOn as number)).toBeLessThan(800);
      expect(next.start - revokedAt).toBeLessThan(2500);
    }
    expect(jobs[2]?.returnvalue).toMatchObject({ outcome: 'succeeded', fence: ledger[2]?.fence });
    expect(ledger[2]?.ended).toBe(true);
    // The first grant on the schedule's resource: the first token of its tick's slot.
    expect(ledger[0]?.fence).toBe(tickFence(t0));
    // Successors logged their wait for the revoked run (one may find it gone already: its watchdog
    // can abort it between the revocation and the successor's look).
    const waits = worker.records
      .filter((r) => r['msg'] === "waiting for the schedule's other runs to stop (cancel-previous)")
      .map((r) => r['jobId']);
    expect(waits.length).toBeGreaterThan(0);
    expect(waits.every((id) => id === ticks[1]?.jobId || id === ticks[2]?.jobId)).toBe(true);
    expect(await worker.metrics.registry.metrics()).toMatch(/tickwarden_worker_runs_total\{outcome="superseded"\} 2/);
  });

  it.each(['before its handler started', 'while its handler runs'] as const)(
    'a run whose job the queue Redis lost %s is in no active list: its successor, whose grant revoked it, waits until its lock could have lasted, and they never overlap',
    async (when) => {
      const { connection, scheduler } = cluster;
      const period = 2000;
      const name = `cancel-vanished-${when === 'while its handler runs' ? 'running' : 'waiting'}`;
      const schedule = shortLeaseSchedule(`team-a/${name}`, beating(`${name}.txt`, 6000), {
        cron: '*/2 * * * * *',
        queue: `q-${name}`,
        overlap: 'cancel-previous',
        leaseTtlMs: 4000,
        startDeadlineMs: 30_000,
      });
      const worker = await cluster.startWorker([schedule], { concurrency: 3 });
      const waiting = (jobId: string | undefined) =>
        worker.records.find(
          (r) => r['jobId'] === jobId && r['msg'] === "waiting for the schedule's other runs to stop (cancel-previous)",
        );
      const t0 = nextTick(period);
      // Enqueued `lateMs` after its tick: a grant between two of the running run's extensions (every 500 ms from its own grant).
      const at = async (k: number, lateMs = 0) => {
        await waitUntil(() => Date.now() >= t0 + k * period + lateMs, `tick ${k} to be due`, { intervalMs: 5 });
        return enqueueTick(scheduler, connection, schedule, { tickMs: t0 + k * period });
      };
      await at(0);
      const vanished = await at(1);
      const jobKey = `bull:${queueName(schedule.queue)}:${vanished.jobId}`;
      if (when === 'before its handler started') {
        // While it waits for the first run to stop, the queue Redis loses its job: its mark finds the job gone.
        await waitUntil(() => waiting(vanished.jobId) !== undefined, 'the second run waiting for the first', {
          intervalMs: 5,
        });
        await connection.del(jobKey);
        await waitUntil(
          () =>
            worker.records.some(
              (r) => r['jobId'] === vanished.jobId && String(r['msg']).startsWith('the job vanished'),
            ),
          'the second run to go on without its job',
        );
      } else {
        await waitUntil(() => runs(`${name}.txt`).length === 2, 'the second run started', { intervalMs: 5 });
        await connection.del(jobKey);
      }
      const third = await at(2, 250);
      await settledJob(connection, `q-${name}`, third.jobId);
      const ledger = runs(`${name}.txt`);
      expect(ledger).toHaveLength(3);
      const [, second, last] = ledger as [BeatRun, BeatRun, BeatRun];
      expect(second.fence).toBeGreaterThanOrEqual(tickFence(t0 + period));
      expect(second.last).toBeLessThan(last.start);
      // The third run saw no earlier run in the active list, and waited for the one its grant revoked.
      expect(waiting(third.jobId)).toMatchObject({ waitingFor: [], revokedUnseenUntilMs: expect.any(Number) });
    },
  );

  it('a predecessor still queued when its successor is due (a backlog) is superseded without running, never takes the lease, and does not delay its successor', async () => {
    const { connection, scheduler } = cluster;
    const ttl = 5000;
    // Two ticks a second apart, the next almost a minute later: a worker slow to start (a loaded
    // machine) still finds the second tick's successor not due.
    const t0 = nextTick(1000);
    const nextSecond = (new Date(t0).getUTCSeconds() + 1) % 60;
    const schedule = shortLeaseSchedule('team-a/cancel-queued', beating('cancel-queued.txt', 300), {
      cron: `${new Date(t0).getUTCSeconds()},${nextSecond} * * * * *`,
      queue: 'q-cancel-queued',
      overlap: 'cancel-previous',
      leaseTtlMs: ttl,
      startDeadlineMs: 30_000,
    });
    // Both ticks are claimed and enqueued before any worker runs, and both are due when it comes.
    await waitUntil(() => Date.now() >= t0, 'the first tick to be due', { intervalMs: 5 });
    const first = await enqueueTick(scheduler, connection, schedule, { tickMs: t0 });
    const second = await enqueueTick(scheduler, connection, schedule, { tickMs: t0 + 1000 });
    await waitUntil(() => Date.now() >= t0 + 1000, 'the second tick to be due', { intervalMs: 5 });
    // From the worker's start on (its command guard, a Node process, may take a second to start).
    const worker = await cluster.startWorker([schedule], { concurrency: 2 });
    const from = Date.now();
    const [superseded, ran] = await Promise.all([
      settledJob(connection, 'q-cancel-queued', first.jobId),
      settledJob(connection, 'q-cancel-queued', second.jobId),
    ]);
    expect(superseded.returnvalue).toEqual({ outcome: 'superseded' });
    expect(await superseded.getState()).toBe('completed');
    expect(outcomes(worker.records, first.jobId)).toMatchObject([
      { outcome: 'superseded', level: 30, successorTick: new Date(t0 + 1000).toISOString(), firstStart: true },
    ]);
    expect(superseded.progress).not.toHaveProperty('handlerStarted');
    expect(worker.records.some((r) => r['msg'] === 'run started' && r['jobId'] === first.jobId)).toBe(false);
    expect(ran.returnvalue).toMatchObject({ outcome: 'succeeded' });
    const ledger = runs('cancel-queued.txt');
    expect(ledger.map((run) => run.fence)).toEqual([ran.returnvalue.fence]);
    // The first grant on the schedule's resource (the predecessor never took the lease): its tick's first token.
    expect(ran.returnvalue.fence).toBe(tickFence(t0 + 1000));
    // Not held up by anything of its predecessor (no lease of it to lapse, no run to wait for): it started as soon as the worker took it.
    expect(
      worker.records.some((r) => r['msg'] === "waiting for the schedule's other runs to stop (cancel-previous)"),
    ).toBe(false);
    expect((ledger[0] as BeatRun).start - from).toBeLessThan(2000);
  });

  it('the lease confirmed after the handler-started mark: a moment without a quorum there is tried again while the lease is valid, and the run goes on', async () => {
    const { connection, scheduler } = cluster;
    const schedule = shortLeaseSchedule('team-a/cancel-confirm', beating('cancel-confirm.txt', 300), {
      cron: '0 0 * * * *',
      queue: 'q-cancel-confirm',
      overlap: 'cancel-previous',
      leaseTtlMs: 4000,
      startDeadlineMs: 30_000,
    });
    const worker = await cluster.startWorker([schedule]);
    // The run's first extension is that confirmation (its watchdog's first comes 500 ms later): it misses its quorum once.
    const extend = worker.redlock.extend.bind(worker.redlock);
    let extensions = 0;
    worker.redlock.extend = (lease, ttlMs, options) => {
      extensions += 1;
      return extensions === 1
        ? Promise.reject(
            new QuorumUnavailableError(
              lease.resource,
              'extend',
              new Map<string, NodeCause>([['node-0:1', new Error('timed out')]]),
              3,
            ),
          )
        : extend(lease, ttlMs, options);
    };
    const tickMs = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    const { jobId } = await enqueueTick(scheduler, connection, schedule, { tickMs, dueMs: Date.now() });
    const job = await settledJob(connection, 'q-cancel-confirm', jobId);
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
    // Neither failed nor deferred: the first take ran it.
    expect(outcomes(worker.records, jobId).map((record) => record['outcome'])).toEqual(['succeeded']);
    expect(extensions).toBeGreaterThan(1);
    expect(runs('cancel-confirm.txt')).toHaveLength(1);
  });

  it("a job that starts only after its schedule's next tick is due (deferred, retried or re-run after a stall) is superseded, not run after the newer tick", async () => {
    const { connection, scheduler } = cluster;
    const schedule = shortLeaseSchedule('team-a/cancel-late', beating('cancel-late.txt', 300), {
      queue: 'q-cancel-late',
      overlap: 'cancel-previous',
      leaseTtlMs: 5000,
      startDeadlineMs: 30_000,
    });
    const worker = await cluster.startWorker([schedule]);
    const t0 = nextTick(1000);
    // Ready 1.5 s after its tick: the next tick (one second after it) is due by then.
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule, {
      tickMs: t0,
      delayMs: t0 + 1500 - Date.now(),
    });
    const job = await settledJob(connection, 'q-cancel-late', jobId);
    expect(job.returnvalue).toEqual({ outcome: 'superseded' });
    expect(outcomes(worker.records, jobId)).toMatchObject([
      { outcome: 'superseded', successorTick: new Date(t0 + 1000).toISOString(), firstStart: true },
    ]);
    expect(cluster.lines('cancel-late.txt')).toEqual([]);
    // It never took the schedule's lease: the next run need not wait for anything to lapse.
    await expect(scheduler.acquire(data.lease.resource, 1000, { retryCount: 0 })).resolves.toMatchObject({
      resource: data.lease.resource,
    });
  });

  it("a predecessor whose worker died mid-run (its job stays active until BullMQ's stalled check) holds up its successors only until its revoked lease surely ended, not each successor's own TTL", async () => {
    const { connection, scheduler } = cluster;
    const ttl = 2000;
    const period = 1000;
    const queue = 'q-cancel-dead';
    const schedule = shortLeaseSchedule('team-a/cancel-dead', beating('cancel-dead.txt', 300), {
      queue,
      overlap: 'cancel-previous',
      leaseTtlMs: ttl,
      startDeadlineMs: 30_000,
    });
    // The dead worker: it took the first tick's job, marked its handler started, and never did anything again
    // (BullMQ keeps the job active for its 30 s job lock).
    const deadConnection = new Redis(cluster.connection.options);
    let taken!: () => void;
    const tookIt = new Promise<void>((resolve) => (taken = resolve));
    const dead = new Worker(
      queueName(queue),
      async (job, token) => {
        await markHandlerStarted(deadConnection, job, token, {
          attempt: 1,
          fence: (job.data as TickJobData).lease.fence,
        });
        taken();
        await new Promise(() => undefined);
      },
      { connection: deadConnection, lockDuration: 30_000 },
    );
    try {
      const t0 = nextTick(period);
      await waitUntil(() => Date.now() >= t0, 'the first tick to be due', { intervalMs: 5 });
      const deadTick = await enqueueTick(scheduler, connection, schedule, { tickMs: t0 });
      await tookIt;
      await dead.pause(true);
      const worker = await cluster.startWorker([schedule], { concurrency: 4 });
      // Three more ticks, a period apart, each run's start revoking the lease of the one before.
      const ticks: Awaited<ReturnType<typeof enqueueTick>>[] = [];
      for (let k = 1; k <= 3; k++) {
        await waitUntil(() => Date.now() >= t0 + k * period, `tick ${k} to be due`, { intervalMs: 5 });
        ticks.push(await enqueueTick(scheduler, connection, schedule, { tickMs: t0 + k * period }));
      }
      const last = await settledJob(connection, queue, (ticks[2] as (typeof ticks)[number]).jobId);
      expect(last.returnvalue).toMatchObject({ outcome: 'succeeded' });
      const [run] = runs('cancel-dead.txt');
      // The first successor found the dead run started and recorded on its job when its own lease was granted (its
      // grant revoked any lease of the dead run): that lease cannot outlive this plus a TTL (and slack).
      const firstSeen = Number(
        await connection.hget(`bull:${queueName(queue)}:${deadTick.jobId}`, 'tickwardenRevokedByMs'),
      );
      const firstSuccessor = (ticks[0] as (typeof ticks)[number]).jobId;
      expect(firstSeen).toBeGreaterThanOrEqual(t0 + period);
      expect(firstSeen).toBeLessThanOrEqual(grantedAt(worker.records, firstSuccessor));
      expect((run as BeatRun).start).toBeGreaterThanOrEqual(firstSeen + ttl + TAKEOVER_SLACK_MS);
      // Its own grant (at or after its due time) plus a TTL and slack would be a period or two later (and with faster
      // ticks, never).
      expect((run as BeatRun).start).toBeLessThan(last.data.dueMs + ttl + TAKEOVER_SLACK_MS - 500);
      expect(
        worker.records.some(
          (r) =>
            r['msg'] ===
            "the schedule's other runs are still active, but their revoked lease cannot be valid any more: starting",
        ),
      ).toBe(true);
    } finally {
      await dead.close(true);
      deadConnection.disconnect();
    }
  });
});

describe('predecessorsWaitUntil: how long a cancel-previous run waits, from plain values', () => {
  const self = { tickMs: 10_000, grantedAtMs: 10_050, ttlMs: 3000 };
  const peer = (tickMs: number, started: boolean, revokedByMs?: number) => ({
    jobId: `t/s@${tickMs}`,
    tickMs,
    started,
    revokedByMs,
  });

  it('starts at once when no other run started; waits for a started one until its revoked lease surely ended', () => {
    expect(predecessorsWaitUntil(self, [], 1000)).toBeUndefined();
    expect(predecessorsWaitUntil(self, [peer(8000, false), peer(12_000, false)], 1000)).toBeUndefined();
    expect(predecessorsWaitUntil(self, [peer(8000, true)], 1000)).toBe(10_050 + 3000 + 1000);
    // A started run of a later tick is waited for too: whatever its tick, it may still be running.
    expect(predecessorsWaitUntil(self, [peer(12_000, true)], 1000)).toBe(10_050 + 3000 + 1000);
  });

  it("a run marks revoked only started runs of earlier ticks not marked yet: never a later tick's (its lease was granted after this run's)", () => {
    const peers = [peer(6000, true), peer(7000, true, 8050), peer(8000, false), peer(12_000, true)];
    expect(peersToMarkRevoked(self, peers).map((p) => p.tickMs)).toEqual([6000]);
  });

  it('a holder the grant revoked but the first look did not show (its job vanished) is waited for until its lock could have lasted', () => {
    const revoking = { ...self, revokedMs: 2500 };
    expect(unseenRevokedUntil(revoking, [], 1000)).toBe(10_050 + 2500 + 1000);
    // Unstarted runs of later ticks do not show it; a run of an earlier tick in the list, started or not, does.
    expect(unseenRevokedUntil(revoking, [peer(12_000, false)], 1000)).toBe(10_050 + 2500 + 1000);
    expect(unseenRevokedUntil(revoking, [peer(8000, false)], 1000)).toBeUndefined();
    expect(unseenRevokedUntil(revoking, [peer(8000, true)], 1000)).toBeUndefined();
    expect(unseenRevokedUntil({ ...self, revokedMs: undefined }, [], 1000)).toBeUndefined();
  });

  it('a run revoked while it waited for a run no list shows passes that wait on, whatever its state', () => {
    const waiting = { ...peer(9000, false), waitsUntilMs: 14_500 };
    expect(predecessorsWaitUntil(self, [waiting], 1000)).toBe(14_500);
    expect(predecessorsWaitUntil(self, [waiting, peer(8000, true)], 1000)).toBe(14_500);
    expect(predecessorsWaitUntil(self, [{ ...waiting, waitsUntilMs: 12_000 }, peer(8000, true)], 1000)).toBe(
      10_050 + 3000 + 1000,
    );
  });

  it("a started run first seen by an earlier successor was revoked by that one's grant: the earlier bound holds", () => {
    expect(predecessorsWaitUntil(self, [peer(6000, true, 8050), peer(8000, false)], 1000)).toBe(8050 + 3000 + 1000);
    expect(predecessorsWaitUntil(self, [peer(6000, true, 8050), peer(8000, true, 10_040)], 1000)).toBe(
      10_040 + 3000 + 1000,
    );
  });
});
