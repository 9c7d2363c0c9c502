import type { ConnectionOptions } from 'node:tls';
import { DEFAULT_STALLED_INTERVAL_MS, type ScheduleConfig, type TickwardenConfig } from '@tickwarden/config';
import { queueName } from '@tickwarden/contracts';
import type { QuorumUnavailableError, Redlock } from '@tickwarden/redlock';
import { pausedNow, queueRedisOptions, RunHistory } from '@tickwarden/runtime';
import { Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { CommandGuard } from './command-guard.ts';
import { RemoteLauncher } from './launcher-client.ts';
import type { OutputLimits } from './handlers/output.ts';
import { JobRunner, type JobRunnerOptions } from './job-runner.ts';
import type { ActivePeer } from './cancel-previous.ts';
import { handlerStarted, jobKey, markHandlerStarted } from './run-progress.ts';
import { MAX_LEASE_NODE_TIMEOUT_MS } from './first-start.ts';
import type { WorkerMetrics } from './metrics.ts';

/**
 * A field Tickwarden adds to a cancel-previous job's BullMQ hash: when a later job of the schedule
 * first found it started and active (see predecessorsWaitUntil). BullMQ ignores fields it does not
 * know, and removes it with the job.
 */
const REVOKED_BY_FIELD = 'tickwardenRevokedByMs';
/** Field on a waiting cancel-previous run's job hash: until when it waits for a run no list shows (ActivePeer.waitsUntilMs). */
const WAITS_UNTIL_FIELD = 'tickwardenWaitsUntilMs';
/** Sets a field on a job's hash only while the job is there (KEYS: the hash; ARGV: field, value): a vanished job is not made again. */
const SET_ON_JOB = `if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end`;

/**
 * BullMQ's job lock never lasts less than this, ms. Short on purpose: a job whose worker died
 * before its handler started comes back after the lock and a stalled check, and must within its
 * start deadline (lease TTL + 10 s by default). The lease, not this lock, keeps runs apart: a
 * re-run waits for the lease of a run still alive.
 */
export const MIN_LOCK_DURATION_MS = 5000;
/**
 * How often a job may stall (its worker died or paused past the job lock) and still come back;
 * one more and BullMQ fails it without calling the processor (JobRunner.stalledTooOften records
 * that). Stalls are safe to retry - a re-run waits for the lease, and one after the handler ended
 * records that end - so more than BullMQ's 1, but bounded: a job whose runs kill their worker
 * (out of memory) must not take one down after another.
 */
export const MAX_STALLED_COUNT = 3;
/** BullMQ's reason for a job failed for stalling more than MAX_STALLED_COUNT times. */
const STALL_LIMIT_REASON = 'job stalled more than allowable limit';
/** While no lock quorum answers, the lock nodes are probed this often, ms. */
export const QUORUM_POLL_MS = 1000;

export interface WorkerServiceOptions {
  /** Names this worker in logs and on the jobs it processes. */
  workerId: string;
  /** The BullMQ Redis URL. */
  queueRedis: string;
  /** TLS options for a `rediss://` queueRedis (`loadRedisTls`); undefined: Node's defaults. */
  queueTls?: ConnectionOptions | undefined;
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
  /** Where the Secrets that schedules' `{ secret, key }` values name are mounted (`TICKWARDEN_SECRETS_DIR`). */
  secretsDir?: string | undefined;
  /** Where http handlers may connect (`TICKWARDEN_HTTP_ALLOW`, `TICKWARDEN_HTTP_DENY`). */
  httpDestinations?: JobRunnerOptions['httpDestinations'];
  /** The launcher's socket (`TICKWARDEN_LAUNCHER_SOCKET`): programs start there, under its user; unset: here, under the command guard. */
  launcherSocket?: string | undefined;
  /**
   * BullMQ job lock duration, ms. Default: the largest lease TTL in the config, at least
   * MIN_LOCK_DURATION_MS; a reload that raises it replaces the queue workers. Tests fix it (then
   * reloads never change it).
   */
  lockDurationMs?: number | undefined;
  /** BullMQ stalled-check interval, ms (default DEFAULT_STALLED_INTERVAL_MS). */
  stalledIntervalMs?: number | undefined;
  /** Wall clock, ms, for due times and start deadlines (default `Date.now`; the process runs on the lock nodes' time). */
  now?: JobRunnerOptions['now'];
}

/** The lock duration a config needs: its largest lease TTL, at least {@link MIN_LOCK_DURATION_MS}. */
export function lockDurationFor(schedules: readonly Pick<ScheduleConfig, 'leaseTtlMs'>[]): number {
  return Math.max(MIN_LOCK_DURATION_MS, ...schedules.map((schedule) => schedule.leaseTtlMs));
}

/** What the last probe of the lock nodes found. */
interface QuorumProbe {
  reachable: number;
  nodes: number;
  needed: number;
}

/** How long a queue worker waits before it fetches again after a queue Redis error, ms. */
const QUEUE_RETRY_DELAY_MS = 1000;

/** One BullMQ Worker consuming one queue, on its own connection. */
interface QueueWorker {
  worker: Worker;
  connection: Redis;
}

/**
 * The worker: one BullMQ Worker per queue, all sharing one {@link JobRunner}
 * and one {@link CommandGuard}; the configuration can be replaced while it
 * runs (hot reload). A worker that cannot reach a lock quorum stops taking
 * jobs (its BullMQ Workers are paused) until a quorum answers again.
 */
export class WorkerService {
  readonly runner: JobRunner;
  readonly guard: CommandGuard;
  /** Set with `launcherSocket`: the guard then stays idle. */
  readonly launcher: RemoteLauncher | undefined;
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
  /** False while no lock quorum answers this worker: its queue workers are paused. */
  #takingJobs = true;
  /** The probe that closed the gate (while closed). */
  #lastProbe: QuorumProbe | undefined;
  /** A probe in flight, started by a failed lease acquire or the poll. */
  #probing: Promise<void> | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  /** Reads the queues' active lists (cancel-previous runs wait for their schedule's others). */
  #reader: Redis | undefined;
  /** Writes handler-started marks: like BullMQ's own connection it waits out a queue Redis outage (the job's lock decides when it lands). */
  #marker: Redis | undefined;
  /** The run history, on the reader's connection. */
  #history: RunHistory | undefined;
  /** The per-node timeout of the last takeover that found no quorum: the gate's probe waits as long. */
  #probeTimeoutMs = MAX_LEASE_NODE_TIMEOUT_MS;

  constructor(options: WorkerServiceOptions) {
    this.#options = options;
    this.#config = options.config;
    this.#schedules = new Map(options.config.schedules.map((schedule) => [schedule.id, schedule]));
    this.#lockDurationMs = options.lockDurationMs ?? lockDurationFor(options.config.schedules);
    this.guard = new CommandGuard({ logger: options.logger, metrics: options.metrics });
    this.launcher = options.launcherSocket === undefined ? undefined : new RemoteLauncher(options.launcherSocket);
    this.runner = new JobRunner({
      launcher: this.launcher,
      redlock: options.redlock,
      logger: options.logger,
      schedule: (id) => this.#schedules.get(id),
      guard: this.guard,
      metrics: options.metrics,
      onOutcome: options.onOutcome,
      outputLimits: options.outputLimits,
      secretsDir: options.secretsDir,
      httpDestinations: options.httpDestinations,
      workerId: options.workerId,
      now: options.now,
      history: () => this.#history,
      notTakingJobs: () =>
        this.#takingJobs ? undefined : `lock quorum unreachable from this worker${this.#probeText()}: not taking jobs`,
      onQuorumUnavailable: (error, nodeTimeoutMs) => this.#quorumUnavailable(error, nodeTimeoutMs),
      activePeers: (job) => this.#activePeers(job),
      notePeerRevoked: (job, peerJobId, atMs) => this.#notePeerRevoked(job, peerJobId, atMs),
      noteWaitsUntil: async (job, untilMs) => {
        await this.#reader?.eval(SET_ON_JOB, 1, jobKey(job, job.id), WAITS_UNTIL_FIELD, String(untilMs));
      },
      paused: (scheduleId) => (this.#reader ? pausedNow(this.#reader, scheduleId) : Promise.resolve(false)),
      markStarted: (job, token, mark) => {
        if (!this.#marker) throw new Error('the worker is not started');
        return markHandlerStarted(this.#marker, job, token, mark);
      },
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

  /** Whether the queue workers take jobs: false while no lock quorum answers this worker (or once stopping). */
  get takingJobs(): boolean {
    return this.#takingJobs && this.#consuming && !this.#stopping;
  }

  #wantedQueues(): string[] {
    return [...new Set(this.#options.queues ?? this.#config.schedules.map((schedule) => schedule.queue))];
  }

  /**
   * Starts the command guard (or waits for the launcher), then, once it runs, a BullMQ Worker for
   * each queue: no job is taken that could not start a command. Rejects with the guard's
   * COMMAND_GUARD_UNAVAILABLE (the launcher's LAUNCHER_UNAVAILABLE) error if it is not running in time.
   */
  async start(): Promise<void> {
    if (this.launcher) await this.launcher.ready(new AbortController().signal);
    else {
      this.guard.start();
      await this.guard.ready();
    }
    this.#consuming = true;
    this.#reader = new Redis(this.#options.queueRedis, {
      maxRetriesPerRequest: 1,
      ...queueRedisOptions(this.#options.queueRedis, this.#options.queueTls),
    });
    this.#reader.on('error', (error) => this.#options.logger.debug({ err: error }, 'queue redis error (reader)'));
    this.#history = new RunHistory(this.#reader);
    this.#marker = new Redis(this.#options.queueRedis, {
      maxRetriesPerRequest: null,
      ...queueRedisOptions(this.#options.queueRedis, this.#options.queueTls),
    });
    this.#marker.on('error', (error) => this.#options.logger.debug({ err: error }, 'queue redis error (marks)'));
    this.#options.metrics?.takingJobs.set(this.#takingJobs ? 1 : 0);
    for (const queue of this.#wantedQueues()) this.#startQueue(queue);
    if (this.#workers.size === 0)
      this.#options.logger.warn(
        'no queue to consume: the configuration has no schedules and TICKWARDEN_QUEUES is unset',
      );
  }

  #startQueue(queue: string): void {
    if (this.#workers.has(queue) || this.#stopping || !this.#consuming) return;
    this.#workers.set(queue, this.#queueWorker(queue));
  }

  #queueWorker(queue: string): QueueWorker {
    const { logger, queueRedis, queueTls, concurrency, workerId, stalledIntervalMs } = this.#options;
    // BullMQ blocks on this connection: it must retry commands forever rather than fail them.
    const connection = new Redis(queueRedis, {
      maxRetriesPerRequest: null,
      ...queueRedisOptions(queueRedis, queueTls),
    });
    connection.on('error', (error) => logger.debug({ err: error, queue }, 'queue redis error'));
    // Three parameters: BullMQ passes an AbortSignal only to a processor that declares it.
    const worker = new Worker(queueName(queue), (job, token, signal) => this.runner.processJob(job, token, signal), {
      connection,
      concurrency,
      name: workerId,
      lockDuration: this.#lockDurationMs,
      stalledInterval: stalledIntervalMs ?? DEFAULT_STALLED_INTERVAL_MS,
      maxStalledCount: MAX_STALLED_COUNT,
      // BullMQ waits this long before it fetches again (or retries a completion) after a queue Redis
      // error: its default, 15 s, left jobs waiting that long after the queue Redis came back.
      runRetryDelay: QUEUE_RETRY_DELAY_MS,
      // Started below, or left paused while no lock quorum answers (resume() runs it then).
      autorun: false,
    });
    worker.on('error', (error) => logger.warn({ err: error, queue }, 'queue worker error'));
    // Failed by BullMQ itself, without the processor: it would be silent otherwise.
    worker.on(
      'failed',
      (job, error) => job && error.message === STALL_LIMIT_REASON && this.runner.stalledTooOften(job, error.message),
    );
    if (this.#takingJobs) worker.run().catch((error: unknown) => worker.emit('error', error as Error));
    else
      worker
        .pause(true)
        .catch((error: unknown) => logger.warn({ err: error, queue }, 'could not pause the queue worker'));
    logger.info(
      {
        queue,
        bullQueue: queueName(queue),
        concurrency,
        lockDurationMs: this.#lockDurationMs,
        paused: !this.#takingJobs,
      },
      'consuming queue',
    );
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
      this.#options.logger.info(
        { lockDurationMs: needed, previousMs: this.#lockDurationMs },
        'a lease TTL is now longer than the job lock duration: replacing the queue workers',
      );
      this.#lockDurationMs = needed;
      for (const queue of this.queues) this.#replaceQueue(queue);
    }
    if (this.#options.queues === undefined) for (const queue of this.#wantedQueues()) this.#startQueue(queue);
  }

  /**
   * Reasons it is not ready (empty when ready): pings the queue Redis through
   * every worker's connection, probes the lock nodes, and says when it does
   * not take jobs for want of a lock quorum.
   */
  async readiness(): Promise<string[]> {
    if (this.#stopping) return ['shutting down'];
    const reasons: string[] = [];
    if (this.launcher ? !(await this.launcher.check()) : !this.guard.running)
      reasons.push(this.launcher ? 'launcher not answering' : 'command guard not running');
    if (!this.#takingJobs) reasons.push(`not taking jobs: lock quorum unreachable${this.#probeText()}`);
    const { redlock } = this.#options;
    const probing = redlock.probe({ nodeTimeoutMs: MAX_LEASE_NODE_TIMEOUT_MS });
    for (const [queue, { connection }] of this.#workers) {
      const pong = await Promise.race([
        connection.ping().catch(() => 'down'),
        new Promise<string>((resolve) => setTimeout(() => resolve('timeout'), 1000).unref()),
      ]);
      if (pong !== 'PONG') reasons.push(`queue redis unreachable for queue ${queue}`);
    }
    const probe = await probing;
    if (!probe.quorum)
      reasons.push(
        `lock quorum unreachable (${probe.reachable.length} of ${redlock.nodes.length} answer, ${redlock.quorum} needed)`,
      );
    return reasons;
  }

  /** What the probe that closed the gate found, for messages. */
  #probeText(): string {
    const probe = this.#lastProbe;
    return probe ? ` at the last probe (${probe.reachable} of ${probe.nodes} answer, ${probe.needed} needed)` : '';
  }

  /**
   * The other jobs of the job's schedule in the active list of its queue (BullMQ's
   * `<prefix>:<queue>:active`; job ids `<schedule>@<tick ms>`), each with its progress (the
   * handler-started mark) and when a later run found it active (revokedByMs): one LRANGE, then one pipelined HMGET per
   * peer. A listed job whose hash is gone is left out: the queue Redis lost it, and its run is found through the grant's
   * revocation instead (unseenRevokedUntil).
   */
  async #activePeers(job: Job): Promise<ActivePeer[]> {
    const reader = this.#reader;
    if (!reader) throw new Error('the worker is not started');
    const prefix = `${String((job.data as { schedule?: unknown }).schedule)}@`;
    const ids = (await reader.lrange(`${job.queueQualifiedName}:active`, 0, -1)).filter(
      (id) => id.startsWith(prefix) && id !== job.id,
    );
    if (ids.length === 0) return [];
    const pipeline = reader.pipeline(
      ids.map((id) => ['hmget', jobKey(job, id), 'progress', REVOKED_BY_FIELD, 'timestamp', WAITS_UNTIL_FIELD]),
    );
    const replies = (await pipeline.exec()) ?? [];
    return ids.flatMap((jobId, i) => {
      const [error, fields] = replies[i] ?? [];
      if (error) throw error;
      const [progress, revokedBy, timestamp, waitsUntil] = (fields ?? []) as (string | null)[];
      // Listed, but its hash is gone (the queue Redis lost it): its run, if any, is one no list shows.
      if (timestamp === null) return [];
      return {
        jobId,
        tickMs: Number(jobId.slice(prefix.length)),
        started: handlerStarted({ progress: parseJson(progress) as Job['progress'] }),
        revokedByMs: revokedBy ? Number(revokedBy) : undefined,
        waitsUntilMs: waitsUntil ? Number(waitsUntil) : undefined,
      };
    });
  }

  /** Keeps the first (earliest run's) record only: HSETNX on the peer's job hash (gone with the job). */
  async #notePeerRevoked(job: Job, peerJobId: string, atMs: number): Promise<void> {
    await this.#reader?.hsetnx(jobKey(job, peerJobId), REVOKED_BY_FIELD, String(atMs));
  }

  /** A lease could not be taken for want of a quorum: probes the lock nodes, and stops taking jobs if no quorum answers. */
  #quorumUnavailable(_error: QuorumUnavailableError, nodeTimeoutMs: number): void {
    // Probed as the failed call waited: a node slower than that is as good as down for this worker's takeovers.
    this.#probeTimeoutMs = nodeTimeoutMs;
    if (!this.#takingJobs || this.#stopping || this.#probing) return;
    this.#probing = this.#probe()
      .catch((error: unknown) => this.#options.logger.warn({ err: error }, 'lock quorum probe failed'))
      .finally(() => (this.#probing = undefined));
  }

  async #probe(): Promise<void> {
    const { redlock } = this.#options;
    const probe = await redlock.probe({ nodeTimeoutMs: this.#probeTimeoutMs });
    if (this.#stopping) return;
    const found: QuorumProbe = {
      reachable: probe.reachable.length,
      nodes: redlock.nodes.length,
      needed: redlock.quorum,
    };
    if (probe.quorum) {
      if (!this.#takingJobs) this.#openGate(found);
      return;
    }
    if (this.#takingJobs) this.#closeGate(found, [...probe.unreachable.keys()]);
    this.#lastProbe = found;
    this.#pollTimer = setTimeout(() => {
      this.#pollTimer = undefined;
      if (!this.#stopping)
        this.#probing ??= this.#probe()
          .catch((error: unknown) => this.#options.logger.warn({ err: error }, 'lock quorum probe failed'))
          .finally(() => (this.#probing = undefined));
    }, QUORUM_POLL_MS);
  }

  /** Pauses every queue worker without waiting for its running jobs (they go on under their leases). */
  #closeGate(probe: QuorumProbe, unreachable: string[]): void {
    this.#takingJobs = false;
    this.#lastProbe = probe;
    this.#options.metrics?.takingJobs.set(0);
    this.#options.logger.warn({ ...probe, unreachable }, 'lock quorum unreachable: not taking jobs until it returns');
    for (const [queue, { worker }] of this.#workers)
      worker
        .pause(true)
        .catch((error: unknown) =>
          this.#options.logger.warn({ err: error, queue }, 'could not pause the queue worker'),
        );
  }

  #openGate(probe: QuorumProbe): void {
    this.#takingJobs = true;
    this.#lastProbe = undefined;
    this.#options.metrics?.takingJobs.set(1);
    this.#options.logger.info(probe, 'lock quorum reachable again: taking jobs');
    for (const { worker } of this.#workers.values()) void worker.resume();
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
    this.#options.metrics?.takingJobs.set(0);
    clearTimeout(this.#pollTimer);
    // Jobs waiting for their lease (or for a cancel-previous predecessor) go back to the queue at once, for another worker.
    this.runner.stopStarting();
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
    await this.#probing;
    clearTimeout(this.#pollTimer);
    await this.#reader?.quit().catch(() => this.#reader?.disconnect());
    await this.#marker?.quit().catch(() => this.#marker?.disconnect());
    await this.guard.close();
  }
}

/** Closes a queue worker once its running jobs ended, then its connection. */
async function closeQueueWorker({ worker, connection }: QueueWorker): Promise<void> {
  await worker.close();
  await connection.quit().catch(() => connection.disconnect());
}

/** A stored JSON field, or undefined when absent or not JSON. */
function parseJson(text: string | null | undefined): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
