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

  /**
   * Adds the run's job, retrying while the lease is surely valid (half its TTL).
   * Adding an existing job id is a no-op in BullMQ, so a retry cannot duplicate the run.
   */
  async enqueue(schedule: Schedule, run: RunRequest, lease: Lease): Promise<void> {
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
    const options = {
      jobId: run.jobId,
      delay: Math.max(0, run.dueMs - now),
      attempts: schedule.attempts,
      backoff: { type: schedule.backoff.type, delay: schedule.backoff.delayMs },
      removeOnComplete: { age: 86_400, count: 10_000 },
      removeOnFail: { age: 7 * 86_400 },
    };
    const giveUpAt = this.#clock.now() + lease.ttlMs / 2;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#queue(schedule.queue).add(schedule.id, data, options);
        return;
      } catch (error) {
        const pause = Math.min(100 * 2 ** attempt, 2000);
        if (this.#clock.now() + pause >= giveUpAt) throw error;
        await new Promise((resolve) => this.#clock.setTimeout(() => resolve(undefined), pause));
      }
    }
  }

  /** For each run, whether its job is missing from its queue (one pipelined round trip). */
  async missing(runs: readonly { queue: string; jobId: string }[]): Promise<boolean[]> {
    if (runs.length === 0) return [];
    const pipeline = this.#connection.pipeline(runs.map(({ queue, jobId }) => ['exists', this.#queue(queue).toKey(jobId)]));
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([error, exists]) => {
      if (error) throw error;
      return exists === 0;
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
