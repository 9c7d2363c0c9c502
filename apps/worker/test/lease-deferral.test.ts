import { randomBytes } from 'node:crypto';
import { backfillJobId, leaseResource, queueName, tickClaim, tickFence, type TickJobData } from '@tickwarden/contracts';
import { sleep, waitUntil } from '@tickwarden/testkit';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { BEHIND_WAIT_MS } from '../src/index.ts';
import { useCluster } from './harness.ts';
import { enqueueTick, nodeCommand, outcomes, shortLeaseSchedule, settledJob } from './support.ts';

// Every schedule here has the defaults that matter: attempts 1 (a consumed attempt loses the tick).
describe('worker: a lease it cannot take defers the job instead of consuming its attempt', () => {
  const cluster = useCluster();
  /** Appends "<fence> <attempt> <start ms> <worker pid>" to a file. */
  const recording = (name: string) =>
    nodeCommand(
      `require('node:fs').appendFileSync(${JSON.stringify(cluster.file(name))}, [process.env.TICKWARDEN_FENCE, process.env.TICKWARDEN_ATTEMPT, Date.now(), process.ppid].join(' ') + '\\n');`,
    );

  it("a tick whose later tick's run was granted on a node that answers, the rest of a quorum out of reach until its start deadline, is superseded, not missed", async () => {
    const { connection, scheduler } = cluster;
    const schedule = shortLeaseSchedule('team-a/passed-by', recording('passed-by.txt'), {
      queue: 'q-passed-by',
      leaseTtlMs: 2000,
      startDeadlineMs: 2500,
    });
    const tickMs = Math.floor(Date.now() / 1000) * 1000;
    // The next tick's run holds the lease on nodes 0, 3 and 4 (its own grant, on a quorum).
    const laterLink = await cluster.locks.link('passed-by-later');
    laterLink.partition([1, 2]);
    const later = cluster.redlock(laterLink.urls);
    await later.probe({ nodeTimeoutMs: 500 });
    await later.acquire(leaseResource(schedule.id, 'skip', tickMs), 10_000, {
      fence: { from: tickFence(tickMs + 1000), below: tickFence(tickMs + 2000) },
    });
    // This worker reaches nodes 0-2: node 0 answers passed, 1 and 2 would grant, 3 and 4 never answer.
    const link = await cluster.locks.link('passed-by-worker');
    link.partition([3, 4]);
    const worker = await cluster.startWorker([schedule], { lockUrls: link.urls, workerId: 'passed-by-worker' });
    const { jobId } = await enqueueTick(scheduler, connection, schedule, { tickMs });
    await settledJob(connection, 'q-passed-by', jobId);
    const ends = outcomes(worker.records, jobId);
    expect(ends.slice(0, -1).every((end) => end['outcome'] === 'deferred')).toBe(true);
    expect(ends.at(-1)).toMatchObject({ outcome: 'superseded', reason: expect.stringMatching(/passed/) });
    expect(cluster.lines('passed-by.txt')).toEqual([]);
  });

  it('a worker cut from a lock majority defers the job (attemptsMade stays 0), stops taking jobs and says so; a healthy worker runs it once; healed, the first takes jobs again (also on a queue a reload added meanwhile)', async () => {
    const { connection, scheduler, lines } = cluster;
    const schedule = shortLeaseSchedule('team-a/cut', recording('cut.txt'), {
      queue: 'q-cut',
      leaseTtlMs: 2000,
      startDeadlineMs: 30_000,
    });
    const added = shortLeaseSchedule('team-a/added', recording('cut-added.txt'), {
      queue: 'q-cut-added',
      leaseTtlMs: 2000,
      startDeadlineMs: 30_000,
    });
    const link = await cluster.locks.link('cut-worker');
    link.partition([0, 1, 2]);
    try {
      const cut = await cluster.startWorker([schedule], { lockUrls: link.urls, workerId: 'cut-worker' });
      expect(cut.service.takingJobs).toBe(true);
      const first = await enqueueTick(scheduler, connection, schedule);
      // The first start retries while no quorum answers for QUORUM_WAIT_MS (1 s), then defers.
      await waitUntil(() => outcomes(cut.records, first.jobId).length > 0, 'the cut worker to give the job up', {
        timeoutMs: 10_000,
      });
      const [deferral] = outcomes(cut.records, first.jobId);
      expect(deferral).toMatchObject({
        outcome: 'deferred',
        level: 40,
        deferrals: 1,
        attempt: 1,
        worker: 'cut-worker',
      });
      expect(String(deferral?.['reason'])).toMatch(/could not reach a quorum of 3/);
      expect(Date.parse(String(deferral?.['startDeadline']))).toBe(first.data.dueMs + 30_000);
      await waitUntil(() => !cut.service.takingJobs, 'the cut worker to stop taking jobs');
      // Two nodes are on this side of the cut; on a loaded machine one may miss the probe's node timeout.
      const closed = cut.records.filter(
        (r) => r['msg'] === 'lock quorum unreachable: not taking jobs until it returns',
      );
      expect(closed).toMatchObject([{ level: 40, nodes: 5, needed: 3 }]);
      expect(closed[0]?.['reachable']).toBeLessThanOrEqual(2);
      expect(await cut.service.readiness()).toEqual(
        expect.arrayContaining([
          expect.stringMatching(
            /^not taking jobs: lock quorum unreachable at the last probe \([0-2] of 5 answer, 3 needed\)$/,
          ),
          expect.stringMatching(/^lock quorum unreachable \([0-2] of 5 answer, 3 needed\)$/),
        ]),
      );
      const metrics = await cut.metrics.registry.metrics();
      expect(metrics).toMatch(/tickwarden_worker_taking_jobs 0/);
      expect(metrics).toMatch(/tickwarden_worker_runs_total\{outcome="deferred"\} [1-9]/);
      expect(metrics).toMatch(/tickwarden_worker_runs_total\{outcome="failed"\} 0/);
      const deferred = await cluster.job('q-cut', first.jobId);
      expect(deferred.attemptsMade).toBe(0);
      expect(['delayed', 'wait', 'active']).toContain(await deferred.getState());
      // A queue a reload adds while the gate is closed starts paused.
      cut.service.setConfig({ schedules: [schedule, added], files: [] });
      expect(cut.records.find((r) => r['msg'] === 'consuming queue' && r['queue'] === 'q-cut-added')).toMatchObject({
        paused: true,
      });

      const healthy = await cluster.startWorker([schedule], { workerId: 'healthy-worker' });
      const ran = await settledJob(connection, 'q-cut', first.jobId);
      expect(ran.returnvalue).toMatchObject({ outcome: 'succeeded' });
      // In its tick's slot of tokens: the cut worker's tries may have raised the fence there on the nodes it reaches.
      expect(ran.returnvalue.fence).toBeGreaterThanOrEqual(tickFence(first.data.tickMs));
      expect(ran.returnvalue.fence).toBeLessThan(tickFence(first.data.tickMs + 1000));
      expect(lines('cut.txt')).toHaveLength(1);
      // Deferrals are not attempts: the handler ran as attempt 1, on the healthy worker.
      expect(lines('cut.txt')[0]?.split(' ')[1]).toBe('1');
      expect(outcomes(healthy.records, first.jobId)).toMatchObject([
        { outcome: 'succeeded', attempt: 1, worker: 'healthy-worker' },
      ]);
      expect(outcomes(cut.records, first.jobId).every((r) => r['outcome'] === 'deferred')).toBe(true);
      expect(ran.progress).toMatchObject({
        handlerStarted: true,
        attempt: 1,
        deferrals: outcomes(cut.records, first.jobId).length,
        lastDeferral: { worker: 'cut-worker' },
      });

      link.heal();
      await waitUntil(
        () => cut.records.some((r) => r['msg'] === 'lock quorum reachable again: taking jobs'),
        'the cut worker to take jobs again',
        { timeoutMs: 5000 },
      );
      // A quorum is enough: the healed nodes' clients may still be reconnecting when the probe asks.
      const reopened = cut.records.find((r) => r['msg'] === 'lock quorum reachable again: taking jobs');
      expect(reopened).toMatchObject({ level: 30, nodes: 5, needed: 3 });
      expect(reopened?.['reachable']).toBeGreaterThanOrEqual(3);
      expect(cut.service.takingJobs).toBe(true);
      expect(await cut.metrics.registry.metrics()).toMatch(/tickwarden_worker_taking_jobs 1/);
      expect(await cut.service.readiness()).toEqual([]);
      // Only the first worker consumes now: it runs a later tick, and one on the queue added while it was paused.
      await healthy.service.stop(1000);
      const later = await enqueueTick(scheduler, connection, schedule, { tickMs: first.data.tickMs + 1000 });
      const other = await enqueueTick(scheduler, connection, added);
      const [laterJob, otherJob] = await Promise.all([
        settledJob(connection, 'q-cut', later.jobId),
        settledJob(connection, 'q-cut-added', other.jobId),
      ]);
      expect(laterJob.returnvalue).toMatchObject({ outcome: 'succeeded' });
      expect(otherJob.returnvalue).toMatchObject({ outcome: 'succeeded' });
      expect(outcomes(cut.records, later.jobId)).toMatchObject([{ outcome: 'succeeded', worker: 'cut-worker' }]);
      expect(lines('cut.txt')).toHaveLength(2);
    } finally {
      link.heal();
    }
  });

  it('a worker not taking jobs stops promptly, and its quorum polling stops with it', async () => {
    const { connection, scheduler } = cluster;
    const schedule = shortLeaseSchedule('team-a/cut-stop', recording('cut-stop.txt'), {
      queue: 'q-cut-stop',
      leaseTtlMs: 1000,
      startDeadlineMs: 30_000,
    });
    const link = await cluster.locks.link('cut-stop-worker');
    link.partition([0, 1, 2]);
    try {
      const cut = await cluster.startWorker([schedule], { lockUrls: link.urls, workerId: 'cut-stop-worker' });
      let probes = 0;
      const probe = cut.redlock.probe.bind(cut.redlock);
      cut.redlock.probe = () => {
        probes++;
        return probe();
      };
      await enqueueTick(scheduler, connection, schedule);
      await waitUntil(() => !cut.service.takingJobs, 'the worker to stop taking jobs', { timeoutMs: 10_000 });
      await waitUntil(() => probes >= 2, 'the worker to poll the lock nodes', { timeoutMs: 5000 });
      const at = performance.now();
      await cut.service.stop(1000);
      expect(performance.now() - at).toBeLessThan(1500);
      const after = probes;
      await sleep(2500);
      expect(probes).toBe(after);
      expect(cut.records.some((r) => r['msg'] === 'lock quorum reachable again: taking jobs')).toBe(false);
    } finally {
      link.heal();
    }
  });

  it('one lock node slower than the node timeout, two down and one of them coming back: the first start still succeeds (per-node timeout TTL/10, no-quorum tries retried for QUORUM_WAIT_MS)', async () => {
    const { connection, scheduler, lines } = cluster;
    const schedule = shortLeaseSchedule('team-a/slow-nodes', recording('slow-nodes.txt'), {
      queue: 'q-slow-nodes',
      leaseTtlMs: 3000,
      startDeadlineMs: 30_000,
    });
    const link = await cluster.locks.link('slow-worker');
    // Node 2 answers in 150 ms: above the old 100 ms node timeout, inside 3000 / 10. Nodes 0 and 1 are down, node 3 restarts (back after 700 ms).
    link.setFault(2, { kind: 'latency', ms: 150 });
    link.partition([0, 1, 3]);
    try {
      const worker = await cluster.startWorker([schedule], { lockUrls: link.urls, workerId: 'slow-worker' });
      const { jobId, data } = await enqueueTick(scheduler, connection, schedule);
      const restart = setTimeout(() => link.setFault(3, { kind: 'none' }), 700);
      const job = await settledJob(connection, 'q-slow-nodes', jobId);
      clearTimeout(restart);
      expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
      // In its tick's slot (a try that reached some nodes only may have raised the fence there).
      expect(job.returnvalue.fence).toBeGreaterThanOrEqual(tickFence(data.tickMs));
      expect(job.returnvalue.fence).toBeLessThan(tickFence(data.tickMs + 1000));
      // Node 2 never answers within a 100 ms node timeout, so a single-try start never gets a quorum.
      // A loaded machine may still defer the first processor call (its no-quorum retries ran out of
      // QUORUM_WAIT_MS): no attempt is consumed by that, and the next call takes the lease.
      const recorded = outcomes(worker.records, jobId);
      expect(recorded.at(-1)).toMatchObject({ outcome: 'succeeded', attempt: 1 });
      expect(recorded.slice(0, -1).every((record) => record['outcome'] === 'deferred')).toBe(true);
      expect(lines('slow-nodes.txt')).toHaveLength(1);
      // The first failed try had it probe the lock nodes (no quorum then): the next probe finds one again.
      await waitUntil(() => worker.service.takingJobs, 'the worker taking jobs again', { timeoutMs: 5000 });
    } finally {
      link.heal();
    }
  });

  it('a worker whose lock links are slower than its first starts wait (but answer within a second) stops taking jobs too: a healthy worker runs them', async () => {
    const { connection, scheduler, lines } = cluster;
    // A 3 s lease TTL: starts wait 300 ms per node; 200 ms each way makes every node too slow for them.
    const schedule = shortLeaseSchedule('team-a/slow-links', recording('slow-links.txt'), {
      queue: 'q-slow-links',
      leaseTtlMs: 3000,
      startDeadlineMs: 30_000,
    });
    const link = await cluster.locks.link('slow-links-worker');
    const slow = await cluster.startWorker([schedule], { lockUrls: link.urls, workerId: 'slow-links-worker' });
    for (let node = 0; node < 5; node++) link.setFault(node, { kind: 'latency', ms: 200 });
    try {
      const first = await enqueueTick(scheduler, connection, schedule);
      await waitUntil(() => !slow.service.takingJobs, 'the slow worker to stop taking jobs', { timeoutMs: 10_000 });
      expect(
        slow.records.find((r) => r['msg'] === 'lock quorum unreachable: not taking jobs until it returns'),
      ).toMatchObject({ reachable: 0, needed: 3 });
      await cluster.startWorker([schedule], { workerId: 'fast-worker' });
      const ran = await settledJob(connection, 'q-slow-links', first.jobId);
      expect(ran.returnvalue).toMatchObject({ outcome: 'succeeded' });
      expect(lines('slow-links.txt')).toHaveLength(1);
      expect(outcomes(slow.records, first.jobId).every((r) => r['outcome'] === 'deferred')).toBe(true);
    } finally {
      link.heal();
    }
  });

  it("a job ready before its due time by the worker's clock (its scheduler's clock is ahead) is put back and starts at its due time, no attempt consumed", async () => {
    const { connection, scheduler, lines } = cluster;
    const schedule = shortLeaseSchedule('team-a/early', recording('early.txt'), {
      queue: 'q-early',
      leaseTtlMs: 5000,
      startDeadlineMs: 30_000,
    });
    const worker = await cluster.startWorker([schedule]);
    // Ready now, due in 1.5 s: what a scheduler whose clock is 1.5 s ahead enqueues.
    const dueMs = Date.now() + 1500;
    const { jobId } = await enqueueTick(scheduler, connection, schedule, { tickMs: dueMs, dueMs, delayMs: 0 });
    const job = await settledJob(connection, 'q-early', jobId);
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
    const [fence, attempt, startMs] = (lines('early.txt')[0] ?? '').split(' ').map(Number);
    expect(startMs).toBeGreaterThanOrEqual(dueMs - 100);
    expect(attempt).toBe(1);
    expect(fence).toBeGreaterThan(0);
    expect(outcomes(worker.records, jobId).map((r) => r['outcome'])).toEqual(['deferred', 'succeeded']);
    expect(job.attemptsMade).toBe(1);
  });

  it('no lock quorum for any worker past the start deadline: the job keeps being deferred, then ends as missed-deadline naming the lease failure; the handler never ran', async () => {
    const { connection, scheduler, lines } = cluster;
    const schedule = shortLeaseSchedule('team-a/no-quorum', recording('no-quorum.txt'), {
      queue: 'q-no-quorum',
      leaseTtlMs: 1000,
      startDeadlineMs: 2500,
    });
    const worker = await cluster.startWorker([schedule]);
    const paused = [0, 1, 2].map((i) => cluster.locks.node(i));
    // The majority is paused before the job is added: the worker cannot take it before the pause.
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule, {
      beforeAdd: () => Promise.all(paused.map((node) => node.pause())),
    });
    try {
      await waitUntil(() => outcomes(worker.records, jobId).length > 0, 'a deferral', { timeoutMs: 10_000 });
      await waitUntil(() => Date.now() > data.dueMs + 2500 + 200, 'the start deadline to pass', {
        timeoutMs: 10_000,
        intervalMs: 50,
      });
    } finally {
      await Promise.all(paused.map((node) => node.resume()));
    }
    const job = await settledJob(connection, 'q-no-quorum', jobId);
    expect(job.returnvalue).toEqual({ outcome: 'missed-deadline' });
    expect(await job.getState()).toBe('completed');
    const ends = outcomes(worker.records, jobId);
    expect(ends.map((r) => r['outcome'])).toEqual([...ends.slice(0, -1).map(() => 'deferred'), 'missed-deadline']);
    expect(ends.length).toBeGreaterThanOrEqual(2);
    const missed = ends.at(-1);
    expect(missed).toMatchObject({ startDeadlineMs: 2500, firstStart: true, deferrals: ends.length - 1, level: 40 });
    // Why it could not start: the last deferral's cause (the lease failure, or this worker not taking jobs for want of a quorum).
    expect(String(missed?.['reason'])).toMatch(
      /could not reach a quorum of 3|^lock quorum unreachable from this worker at the last probe \([0-2] of 5 answer, 3 needed\): not taking jobs$/,
    );
    expect(String(ends[0]?.['reason'])).toMatch(/could not reach a quorum of 3/);
    expect(lines('no-quorum.txt')).toHaveLength(0);
    expect(job.progress).not.toHaveProperty('handlerStarted');
  });

  it('shutdown while a job waits for its lease (behind the tick before, claimed and not started): the job is deferred at once (not failed, no attempt consumed) and another worker runs it', async () => {
    const { connection, scheduler, lines } = cluster;
    const schedule = shortLeaseSchedule('team-a/stop-wait', recording('stop-wait.txt'), {
      queue: 'q-stop-wait',
      leaseTtlMs: 10_000,
      startDeadlineMs: 30_000,
    });
    const stopping = await cluster.startWorker([schedule], { workerId: 'stopping-worker' });
    const tickMs = Math.ceil((Date.now() + 300) / 1000) * 1000;
    // The tick before is claimed, its job not delivered yet (delayed): the tick's first start waits behind it,
    // trying again, for BEHIND_WAIT_MS past its due time.
    await enqueueTick(scheduler, connection, schedule, { tickMs: tickMs - 1000, delayMs: 60_000 });
    await waitUntil(() => Date.now() >= tickMs, 'the tick to be due', { intervalMs: 5 });
    const { jobId } = await enqueueTick(scheduler, connection, schedule, { tickMs });
    await waitUntil(
      async () => (await cluster.job('q-stop-wait', jobId)).processedOn !== undefined,
      'the job to be taken',
    );
    await sleep(300);
    expect(outcomes(stopping.records, jobId)).toEqual([]);
    const at = performance.now();
    await stopping.service.stop(10_000);
    expect(performance.now() - at).toBeLessThan(3000);
    expect(outcomes(stopping.records, jobId)).toMatchObject([
      { outcome: 'deferred', reason: 'the worker is shutting down while the run waited for its lease', deferrals: 1 },
    ]);
    const deferred = await cluster.job('q-stop-wait', jobId);
    expect(deferred.attemptsMade).toBe(0);
    expect(deferred.failedReason).toBeUndefined();
    const other = await cluster.startWorker([schedule], { workerId: 'other-worker' });
    const job = await settledJob(connection, 'q-stop-wait', jobId);
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(outcomes(other.records, jobId)).toMatchObject([{ outcome: 'succeeded', attempt: 1 }]);
    expect(lines('stop-wait.txt')).toHaveLength(1);
    // It too waited behind the tick before, until the lock nodes' clocks passed the end of that wait.
    expect(Number(lines('stop-wait.txt')[0]?.split(' ')[2])).toBeGreaterThanOrEqual(tickMs + BEHIND_WAIT_MS);
  });

  it("a backfilled tick's job waits while another run holds the lease (no skip, no supersede; deferred after 10 s), then runs once", async () => {
    const { connection, scheduler, lines } = cluster;
    // cancel-previous: its next tick is long due, which supersedes a late start of any other job.
    const schedule = shortLeaseSchedule('team-a/backfilled', recording('backfilled.txt'), {
      queue: 'q-backfilled',
      overlap: 'cancel-previous',
      leaseTtlMs: 2000,
    });
    const tickMs = Math.floor(Date.now() / 60_000) * 60_000 - 3_600_000;
    const resource = leaseResource(schedule.id, schedule.overlap, tickMs);
    // What `tickwarden backfill` does: the tick's claim started for the job's first start, no lease taken.
    const value = randomBytes(20).toString('hex');
    const fence = Date.now() * 1000;
    await scheduler.startClaim({ resource, claim: tickClaim(tickMs), value, start: String(fence) });
    const running = await scheduler.acquire(resource, 2000);
    const data: TickJobData = {
      version: 1,
      schedule: schedule.id,
      tickMs,
      dueMs: Date.now(),
      payload: null,
      overlap: schedule.overlap,
      lease: { resource, value, fence, ttlMs: 2000 },
      startDeadlineMs: null,
      maxRuntimeMs: null,
      enqueuedBy: 'cli',
      enqueuedAtMs: Date.now(),
      backfill: true,
    };
    const jobId = backfillJobId(schedule.id, tickMs);
    const queue = new Queue(queueName(schedule.queue), { connection });
    await queue.add(schedule.id, data, { jobId, attempts: 1 });
    await queue.close();
    const worker = await cluster.startWorker([schedule]);
    // The run holds the lease 12 s (extended every second): the job waits 10 s for it, then is deferred.
    let held = running;
    const heldUntil = performance.now() + 12_000;
    while (performance.now() < heldUntil) {
      await sleep(1000);
      held = await scheduler.extend(held, 2000);
    }
    expect(outcomes(worker.records, jobId)).toMatchObject([
      { outcome: 'deferred', reason: "another run holds the schedule's lease: the backfilled tick waits for it" },
    ]);
    expect(lines('backfilled.txt')).toEqual([]);
    await scheduler.release(held);
    const releasedAt = Date.now();
    const job = await settledJob(connection, 'q-backfilled', jobId, 20_000);
    expect(job.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(job.attemptsMade).toBe(1);
    expect(lines('backfilled.txt')).toHaveLength(1);
    // Taken within a retry or a deferral of the release, not a whole wait later.
    expect(Number(lines('backfilled.txt')[0]?.split(' ')[2]) - releasedAt).toBeLessThan(2500);
    expect(outcomes(worker.records, jobId).map((r) => r['outcome'])).toEqual(['deferred', 'succeeded']);
  });
});
