import type { ScheduleConfig, TickwardenConfig } from '@tickwarden/config';
import { queueName } from '@tickwarden/contracts';
import type { Redlock } from '@tickwarden/redlock';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { CommandGuard } from './command-guard.ts';
import type { OutputLimits } from './handlers/output.ts';
import { JobRunner, type JobRunnerOptions } from './job-runner.ts';
import type { WorkerMetrics } from './metrics.ts';

/** BullMQ's job lock never lasts less than this, ms (BullMQ's own default). */
export const MIN_LOCK_DURATION_MS = 30_000;

export interface WorkerServiceOptions {
  /** Names this worker in logs and on the jobs it processes. */
  workerId: string;
  /** The BullMQ Redis URL. */
  queueRedis: string;
  redlock: Redlock;
  logger: Logger;
  config: TickwardenConfig;
  /** Queues to consume (config names, e.g. `default`); undefined = every queue of the config, also ones a reload adds. */
  queues?: readonly string[] | undefined;
  /** Jobs run at once per queue. */
  concurrency: number;
  metrics?: WorkerMetrics | undefined;
  onOutcome?: JobRunnerOptions['onOutcome'];
  outputLimits?: OutputLimits | undefined;
  /**
   * BullMQ job lock duration, ms. Default: the largest lease TTL in the config, at least 30 s,
   * so BullMQ's stalled check cannot re-run a job while its lease may be alive; a reload that
   * raises it replaces the queue workers. Tests fix it (then reloads never change it).
   */
  lockDurationMs?: number | undefined;
  /** BullMQ stalled-check interval, ms (default BullMQ's 30 s). Tests shorten it. */
  stalledIntervalMs?: number | undefined;
}

/** The lock duration a config needs: its largest lease TTL, at least {@link MIN_LOCK_DURATION_MS}. */
export function lockDurationFor(schedules: readonly Pick<ScheduleConfig, 'leaseTtlMs'>[]): number {
  return Math.max(MIN_LOCK_DURATION_MS, ...schedules.map((schedule) => schedule.leaseTtlMs));
}

/** One BullMQ Worker consuming one queue, on its own connection. */
interface QueueWorker {
  worker: Worker;
  connection: Redis;
}

/**
 * The worker: one BullMQ Worker per queue, all sharing one {@link JobRunner}
 * and one {@link CommandGuard}; the configuration can be replaced while it
 * runs (hot reload).
 */
export class WorkerService {
  readonly runner: JobRunner;
  readonly guard: CommandGuard;
  readonly #options: WorkerServiceOptions;
  readonly #workers = new Map<string, QueueWorker>();
  /** Queue workers replaced by a lock-duration raise, finishing their running jobs. */
  readonly #retiring = new Set<Promise<void>>();
  #schedules = new Map<string, ScheduleConfig>();
  #config: TickwardenConfig;
  #stopping: Promise<void> | undefined;
  /** Set once the guard ran at start: until then no queue is consumed, not even one a reload adds. */
  #consuming = false;
  #lockDurationMs: number;

  constructor(options: WorkerServiceOptions) {
    this.#options = options;
    this.#config = options.config;
    this.#schedules = new Map(options.config.schedules.map((schedule) => [schedule.id, schedule]));
    this.#lockDurationMs = options.lockDurationMs ?? lockDurationFor(options.config.schedules);
    this.guard = new CommandGuard({ logger: options.logger, metrics: options.metrics });
    this.runner = new JobRunner({
      redlock: options.redlock,
      logger: options.logger,
      schedule: (id) => this.#schedules.get(id),
      guard: this.guard,
      metrics: options.metrics,
      onOutcome: options.onOutcome,
      outputLimits: options.outputLimits,
    });
  }

  /** The queues consumed now (config names). */
  get queues(): string[] {
    return [...this.#workers.keys()];
  }

  /** The configuration in force (the last good one). */
  get config(): TickwardenConfig {
    return this.#config;
  }

  get lockDurationMs(): number {
    return this.#lockDurationMs;
  }

  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  #wantedQueues(): string[] {
    return [...new Set(this.#options.queues ?? this.#config.schedules.map((schedule) => schedule.queue))];
  }

  /**
   * Starts the command guard, then, once it runs, a BullMQ Worker for each
   * queue: no job is taken that could not start a command. Rejects with the
   * guard's COMMAND_GUARD_UNAVAILABLE error if it is not running in time.
   */
  async start(): Promise<void> {
    this.guard.start();
    await this.guard.ready();
    this.#consuming = true;
    for (const queue of this.#wantedQueues()) this.#startQueue(queue);
    if (this.#workers.size === 0) this.#options.logger.warn('no queue to consume: the configuration has no schedules and TICKWARDEN_QUEUES is unset');
  }

  #startQueue(queue: string): void {
    if (this.#workers.has(queue) || this.#stopping || !this.#consuming) return;
    this.#workers.set(queue, this.#queueWorker(queue));
  }

  #queueWorker(queue: string): QueueWorker {
    const { logger, queueRedis, concurrency, workerId, stalledIntervalMs } = this.#options;
    // BullMQ blocks on this connection: it must retry commands forever rather than fail them.
    const connection = new Redis(queueRedis, { maxRetriesPerRequest: null });
    connection.on('error', (error) => logger.debug({ err: error, queue }, 'queue redis error'));
    // Three parameters: BullMQ passes an AbortSignal only to a processor that declares it.
    const worker = new Worker(queueName(queue), (job, token, signal) => this.runner.processJob(job, token, signal), {
      connection,
      concurrency,
      name: workerId,
      lockDuration: this.#lockDurationMs,
      ...(stalledIntervalMs === undefined ? {} : { stalledInterval: stalledIntervalMs }),
    });
    worker.on('error', (error) => logger.warn({ err: error, queue }, 'queue worker error'));
    logger.info({ queue, bullQueue: queueName(queue), concurrency, lockDurationMs: this.#lockDurationMs }, 'consuming queue');
    return { worker, connection };
  }

  /**
   * A raised lock duration applies to a BullMQ Worker from its construction
   * on: a new Worker takes the queue's next jobs, and the old one closes once
   * its running jobs ended (BullMQ's `close` waits for them and keeps their
   * locks extended meanwhile). Until then the queue may run up to twice its
   * concurrency in this process.
   */
  #replaceQueue(queue: string): void {
    const old = this.#workers.get(queue);
    if (!old) return;
    this.#workers.set(queue, this.#queueWorker(queue));
    const retired = closeQueueWorker(old)
      .then(() => this.#options.logger.info({ queue }, 'replaced queue worker closed'))
      .finally(() => this.#retiring.delete(retired));
    this.#retiring.add(retired);
  }

  /** Applies a new (valid) configuration: runs starting from now use it; queues it adds are consumed unless TICKWARDEN_QUEUES fixes them. */
  setConfig(config: TickwardenConfig): void {
    this.#config = config;
    this.#schedules = new Map(config.schedules.map((schedule) => [schedule.id, schedule]));
    const needed = lockDurationFor(config.schedules);
    if (this.#options.lockDurationMs === undefined && needed > this.#lockDurationMs && !this.#stopping) {
      this.#options.logger.info({ lockDurationMs: needed, previousMs: this.#lockDurationMs }, 'a lease TTL is now longer than the job lock duration: replacing the queue workers');
      this.#lockDurationMs = needed;
      for (const queue of this.queues) this.#replaceQueue(queue);
    }
    if (this.#options.queues === undefined) for (const queue of this.#wantedQueues()) this.#startQueue(queue);
  }

  /** Pings the queue Redis through every worker's connection: reasons it is not ready (empty when ready). */
  async readiness(): Promise<string[]> {
    if (this.#stopping) return ['shutting down'];
    const reasons = this.guard.running ? [] : ['command guard not running'];
    for (const [queue, { connection }] of this.#workers) {
      const pong = await Promise.race([connection.ping().catch(() => 'down'), new Promise<string>((resolve) => setTimeout(() => resolve('timeout'), 1000).unref())]);
      if (pong !== 'PONG') reasons.push(`queue redis unreachable for queue ${queue}`);
    }
    return reasons;
  }

  /**
   * Stops taking jobs, lets running ones finish for up to `graceMs`, then
   * aborts them (their handlers stop, their leases are released and their
   * attempts fail, to be retried if attempts remain), closes the queues, then
   * the command guard.
   */
  stop(graceMs: number): Promise<void> {
    this.#stopping ??= this.#stop(graceMs);
    return this.#stopping;
  }

  async #stop(graceMs: number): Promise<void> {
    const { logger } = this.#options;
    const workers = [...this.#workers.values()];
    logger.info({ activeRuns: this.runner.activeRuns, graceMs }, 'stopping: no new jobs; waiting for running jobs');
    const grace = setTimeout(() => {
      logger.warn({ activeRuns: this.runner.activeRuns }, 'shutdown grace over: aborting running jobs');
      this.runner.abortAll();
    }, graceMs);
    try {
      await Promise.all([...workers.map(closeQueueWorker), ...this.#retiring]);
    } finally {
      clearTimeout(grace);
    }
    logger.info('queues closed');
    await this.guard.close();
  }
}

/** Closes a queue worker once its running jobs ended, then its connection. */
async function closeQueueWorker({ worker, connection }: QueueWorker): Promise<void> {
  await worker.close();
  await connection.quit().catch(() => connection.disconnect());
}
