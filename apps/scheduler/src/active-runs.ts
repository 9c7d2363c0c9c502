import { queueName, type TickJobData } from '@tickwarden/contracts';
import { Queue, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Schedule } from './schedule.ts';

/** Active jobs of a queue looked through for one schedule's: more than all its workers run at once. */
const ACTIVE_SCAN = 1000;

/** A run in progress: a job of the schedule that a worker took (BullMQ's active state). */
export interface ActiveRun {
  jobId: string;
  tickMs: number | undefined;
  /** The worker that took the job (BullMQ's `processedBy`, the worker's id). */
  worker: string | undefined;
  /** When the worker took it, wall ms. */
  takenAtMs: number | undefined;
  /** The fencing token of the run's lease once its handler started; undefined while the worker takes the lease. */
  fence: number | undefined;
  /** The attempt whose handler runs; undefined while the worker waits for the lease. */
  attempt: number | undefined;
}

/**
 * The marks a worker writes in a job's progress when a handler starts (apps/worker, run-progress.ts),
 * decoded here: an app does not import another. A mark counts for the current processor call only
 * when its `attemptsMade` is the job's: an earlier attempt's stays in the progress.
 */
interface HandlerStartedMark {
  handlerStarted?: unknown;
  attempt?: unknown;
  fence?: unknown;
  attemptsMade?: unknown;
}

type ActiveJob = Pick<Job, 'id' | 'data' | 'progress' | 'processedBy' | 'processedOn' | 'attemptsMade'>;

/** A job's run as the console shows it, from the job alone (no call to the lock nodes). */
export function activeRun(job: ActiveJob): ActiveRun {
  const progress = (
    typeof job.progress === 'object' && job.progress !== null ? job.progress : {}
  ) as HandlerStartedMark;
  const started =
    progress.handlerStarted === true &&
    progress.attemptsMade === job.attemptsMade &&
    typeof progress.fence === 'number';
  const data = (typeof job.data === 'object' && job.data !== null ? job.data : {}) as Partial<TickJobData>;
  return {
    jobId: job.id ?? '',
    tickMs: typeof data.tickMs === 'number' ? data.tickMs : undefined,
    worker: job.processedBy,
    takenAtMs: job.processedOn,
    fence: started ? (progress.fence as number) : undefined,
    attempt: started && typeof progress.attempt === 'number' ? progress.attempt : undefined,
  };
}

/** The runs in progress of a schedule, read from its BullMQ queue (one Queue per queue name, on the caller's connection). */
export class ActiveRuns {
  readonly #redis: Redis;
  readonly #queues = new Map<string, Queue>();

  constructor(redis: Redis) {
    this.#redis = redis;
  }

  async of(schedule: Pick<Schedule, 'id' | 'queue'>): Promise<ActiveRun[]> {
    const jobs = await this.#queue(schedule.queue).getActive(0, ACTIVE_SCAN - 1);
    // A job's name is its schedule's id (bull-job-queue.ts).
    return jobs.filter((job) => job.name === schedule.id).map(activeRun);
  }

  async close(): Promise<void> {
    await Promise.all([...this.#queues.values()].map((queue) => queue.close()));
  }

  #queue(name: string): Queue {
    let queue = this.#queues.get(name);
    if (!queue) {
      // Reads only: BullMQ's meta hash is the publishers' to write.
      queue = new Queue(queueName(name), { connection: this.#redis, skipMetasUpdate: true });
      // The connection's errors are its owner's to log; unheard, BullMQ prints each to stderr.
      queue.on('error', () => undefined);
      this.#queues.set(name, queue);
    }
    return queue;
  }
}
