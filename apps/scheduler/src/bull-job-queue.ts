import { queueName, type TickJobData } from '@tickwarden/contracts';
import type { Clock } from '@tickwarden/redlock';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { JobQueue, Publication, Run, Tick } from './ports.ts';
import { retentionFrom } from './tick-window.ts';

/**
 * Runs per `addBulk` call: BullMQ builds all of a call's jobs in one go, which holds the event loop
 * that long; larger slices made it the replica's longest wait (apps/scheduler/BENCHMARK.md, "The
 * size of an add").
 */
const ENQUEUE_SLICE = 100;
/** Ticks per round trip of `publications` (two reads each). */
const PUBLICATION_SLICE = 250;

/** The job queue on BullMQ: one `Queue` per schedule `queue`, all on the given connection. */
export class BullJobQueue implements JobQueue {
  readonly #clock: Clock;
  readonly #connection: Redis;
  readonly #replicaId: string;
  readonly #queues = new Map<string, Queue>();

  constructor(connection: Redis, clock: Clock, replicaId: string) {
    this.#connection = connection;
    this.#clock = clock;
    this.#replicaId = replicaId;
  }

  /**
   * Adds the jobs of many runs, one `addBulk` round trip per queue and slice of ENQUEUE_SLICE
   * runs, retrying for half the shortest lease TTL (recovery tries again after). Each job carries a
   * publish marker (BullMQ deduplication, kept `retentionMs` whatever happens to the job): adding
   * a tick's job again, even after its job ran and was removed, is a no-op, so a retry or a
   * second publisher cannot run a tick twice.
   */
  async add(runs: readonly Run[]): Promise<(Error | undefined)[]> {
    const outcome = new Array<Error | undefined>(runs.length);
    const byQueue = Map.groupBy(
      runs.map((run, index) => ({ ...run, index })),
      (entry) => entry.tick.schedule.queue,
    );
    // A loop, not Math.min(...runs): a spread of more than ~125,000 arguments overflows the stack.
    let shortestTtlMs = Infinity;
    for (const { tick } of runs) shortestTtlMs = Math.min(shortestTtlMs, tick.schedule.leaseTtlMs);
    const giveUpAt = this.#clock.now() + shortestTtlMs / 2;
    await Promise.all(
      [...byQueue].map(async ([queue, entries]) => {
        // Slices one after the other: a boundary where thousands of schedules are due must not build
        // every job's pipeline at once (each is ~5 KB until its reply), nor hold the event loop.
        for (let from = 0; from < entries.length; from += ENQUEUE_SLICE) {
          const slice = entries.slice(from, from + ENQUEUE_SLICE);
          const error = await this.#addBulk(
            queue,
            slice.map((run) => this.#job(run)),
            giveUpAt,
          );
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

  #job({ tick, claim, publication, backfill }: Run) {
    const { schedule } = tick;
    const now = Math.floor(this.#clock.wallMicros() / 1000);
    const data: TickJobData = {
      version: 1,
      schedule: schedule.id,
      tickMs: tick.tickMs,
      dueMs: tick.dueMs,
      payload: schedule.payload ?? null,
      overlap: schedule.overlap,
      lease: { resource: claim.resource, value: claim.value, fence: publication, ttlMs: schedule.leaseTtlMs },
      startDeadlineMs: backfill ? null : tick.startDeadlineMs,
      maxRuntimeMs: schedule.maxRuntimeMs ?? null,
      enqueuedBy: this.#replicaId,
      enqueuedAtMs: now,
      ...(backfill ? { backfill } : {}),
    };
    const opts = {
      jobId: tick.jobId,
      deduplication: { id: tick.jobId, ttl: retentionFrom(tick, now) },
      // BullMQ makes a delayed job ready at timestamp + delay: both from this clock, it is ready at
      // the due time exactly (BullMQ's own Date.now() may differ from it by some milliseconds).
      timestamp: now,
      delay: Math.max(0, tick.dueMs - now),
      attempts: schedule.attempts,
      backoff: { type: schedule.backoff.type, delay: schedule.backoff.delayMs },
      // For `status` to show the run's state for a while; whether the tick ran is the publish marker's.
      removeOnComplete: { age: Math.ceil((2 * schedule.leaseTtlMs + 60_000) / 1000) },
      removeOnFail: { age: 7 * 86_400 },
    };
    return { name: schedule.id, data, opts };
  }

  /**
   * Per tick, the stored job's publication and publisher, else whether its publish marker is there: a
   * pipeline of two reads per tick (BullMQ's key of the job and of its deduplication id, the
   * marker), PUBLICATION_SLICE ticks per round trip.
   */
  async publications(ticks: readonly Tick[]): Promise<Publication[]> {
    const result: Publication[] = [];
    for (let from = 0; from < ticks.length; from += PUBLICATION_SLICE) {
      const slice = ticks.slice(from, from + PUBLICATION_SLICE);
      const pipeline = this.#connection.pipeline();
      for (const { schedule, jobId } of slice) {
        const queue = this.#queue(schedule.queue);
        pipeline.hget(queue.toKey(jobId), 'data').exists(queue.toKey(`de:${jobId}`));
      }
      const replies = (await pipeline.exec()) ?? [];
      slice.forEach((_, i) => {
        const [[dataError, data] = [], [markerError, marker] = []] = [replies[2 * i], replies[2 * i + 1]];
        if (dataError || markerError) throw dataError ?? markerError;
        if (typeof data === 'string') {
          const { enqueuedBy, lease } = JSON.parse(data) as TickJobData;
          result.push({ state: 'stored', enqueuedBy, publication: lease.fence, value: lease.value });
        } else result.push({ state: marker === 1 ? 'gone' : 'none' });
      });
    }
    return result;
  }

  #queue(name: string): Queue {
    let queue = this.#queues.get(name);
    if (!queue) {
      queue = new Queue(queueName(name), { connection: this.#connection });
      // The connection's errors are the connection owner's to log; unheard, BullMQ prints each to stderr.
      queue.on('error', () => undefined);
      this.#queues.set(name, queue);
    }
    return queue;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((queue) => queue.close()));
    this.#queues.clear();
  }
}
