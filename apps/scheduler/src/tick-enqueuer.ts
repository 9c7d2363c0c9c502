import { queueName, type TickJobData } from '@tickwarden/contracts';
import type { Clock, Lease } from '@tickwarden/redlock';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Schedule } from './schedule.ts';

/** One run to enqueue: a cron tick, or a manual trigger. */
export interface RunRequest {
  tickMs: number;
  dueMs: number;
  jobId: string;
}

/** Runs per `addBulk` call (see enqueueMany). */
const ENQUEUE_SLICE = 500;

/** Adds the jobs of won ticks to their BullMQ queues. */
export class TickEnqueuer {
  readonly #connection: Redis;
  readonly #clock: Clock;
  readonly #replicaId: string;
  readonly #queues = new Map<string, Queue>();

  constructor(connection: Redis, clock: Clock, replicaId: string) {
    this.#connection = connection;
    this.#clock = clock;
    this.#replicaId = replicaId;
  }

  /** Adds one run's job; throws when it could not be added while the lease was surely valid. */
  async enqueue(schedule: Schedule, run: RunRequest, lease: Lease): Promise<void> {
    const [error] = await this.enqueueMany([{ schedule, run, lease }]);
    if (error) throw error;
  }

  /**
   * Adds the jobs of many won runs, one `addBulk` round trip per queue and slice
   * of ENQUEUE_SLICE runs, retrying while every lease is surely valid (half the
   * shortest TTL). Adding an existing job id is a no-op in BullMQ, so a retry
   * cannot duplicate a run. Resolves with one entry per run: undefined when
   * added, or the last error.
   */
  async enqueueMany(runs: readonly { schedule: Schedule; run: RunRequest; lease: Lease }[]): Promise<(Error | undefined)[]> {
    const outcome = new Array<Error | undefined>(runs.length);
    const byQueue = Map.groupBy(runs.map((entry, index) => ({ ...entry, index })), (entry) => entry.schedule.queue);
    // A loop, not Math.min(...runs): a spread of more than ~125,000 arguments overflows the stack.
    let shortestTtlMs = Infinity;
    for (const { lease } of runs) shortestTtlMs = Math.min(shortestTtlMs, lease.ttlMs);
    const giveUpAt = this.#clock.now() + shortestTtlMs / 2;
    await Promise.all(
      [...byQueue].map(async ([queue, entries]) => {
        // Slices one after the other: a boundary where thousands of schedules are due must not build
        // every job's pipeline at once (each is ~5 KB until its reply: 10,000 at once is +50 MB of RSS).
        for (let from = 0; from < entries.length; from += ENQUEUE_SLICE) {
          const slice = entries.slice(from, from + ENQUEUE_SLICE);
          const error = await this.#addBulk(queue, slice.map(({ schedule, run, lease }) => this.#job(schedule, run, lease)), giveUpAt);
          for (const entry of slice) outcome[entry.index] = error;
        }
      }),
    );
    return outcome;
  }

  /** One addBulk, retried with backoff until `giveUpAt`; the last error, or undefined when added. */
  async #addBulk(queue: string, jobs: Parameters<Queue['addBulk']>[0], giveUpAt: number): Promise<Error | undefined> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#queue(queue).addBulk(jobs);
        return undefined;
      } catch (error) {
        const pause = Math.min(100 * 2 ** attempt, 2000);
        if (this.#clock.now() + pause >= giveUpAt) return error as Error;
        await new Promise((resolve) => this.#clock.setTimeout(() => resolve(undefined), pause));
      }
    }
  }

  #job(schedule: Schedule, run: RunRequest, lease: Lease) {
    const now = Math.floor(this.#clock.wallMicros() / 1000);
    const data: TickJobData = {
      version: 1,
      schedule: schedule.id,
      tickMs: run.tickMs,
      dueMs: run.dueMs,
      payload: schedule.payload ?? null,
      overlap: schedule.overlap,
      lease: { resource: lease.resource, value: lease.value, fence: lease.fence, ttlMs: lease.ttlMs },
      startDeadlineMs: schedule.startDeadlineMs ?? null,
      maxRuntimeMs: schedule.maxRuntimeMs ?? null,
      enqueuedBy: this.#replicaId,
      enqueuedAtMs: now,
    };
    const opts = {
      jobId: run.jobId,
      // BullMQ makes a delayed job ready at timestamp + delay: both from this clock, it is ready at
      // the due time exactly (BullMQ's own Date.now() may differ from it by some milliseconds).
      timestamp: now,
      delay: Math.max(0, run.dueMs - now),
      attempts: schedule.attempts,
      backoff: { type: schedule.backoff.type, delay: schedule.backoff.delayMs },
      // Kept by age only, and longer than any replica may look for it (orphan check and its retries:
      // under 2 lease TTLs + 2 s): a job id removed sooner could be added again - a second run.
      removeOnComplete: { age: Math.ceil((2 * schedule.leaseTtlMs + 60_000) / 1000) },
      removeOnFail: { age: 7 * 86_400 },
    };
    return { name: schedule.id, data, opts };
  }

  /** For each run, whether its job is missing from its queue: one command when all are there (the common case), else one pipelined round trip more. */
  async missing(runs: readonly { queue: string; jobId: string }[]): Promise<boolean[]> {
    if (runs.length === 0) return [];
    const keys = runs.map(({ queue, jobId }) => this.#queue(queue).toKey(jobId));
    // EXISTS counts a key named twice twice, so the count equals the length exactly when every job exists.
    if ((await this.#connection.exists(...keys)) === keys.length) return runs.map(() => false);
    const pipeline = this.#connection.pipeline(keys.map((key) => ['exists', key]));
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([error, exists]) => {
      if (error) throw error;
      return exists === 0;
    });
  }

  /** For each run, the lease value its stored job carries (undefined: no such job), one pipelined round trip. */
  async storedLeaseValues(runs: readonly { queue: string; jobId: string }[]): Promise<(string | undefined)[]> {
    if (runs.length === 0) return [];
    const pipeline = this.#connection.pipeline(runs.map(({ queue, jobId }) => ['hget', this.#queue(queue).toKey(jobId), 'data']));
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([error, data]) => {
      if (error) throw error;
      return typeof data === 'string' ? (JSON.parse(data) as TickJobData).lease.value : undefined;
    });
  }

  #queue(name: string): Queue {
    let queue = this.#queues.get(name);
    if (!queue) {
      queue = new Queue(queueName(name), { connection: this.#connection });
      this.#queues.set(name, queue);
    }
    return queue;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((queue) => queue.close()));
    this.#queues.clear();
  }
}
