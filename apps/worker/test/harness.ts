import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ScheduleConfig } from '@tickwarden/config';
import { queueName } from '@tickwarden/contracts';
import { Redlock, type RedlockEvents } from '@tickwarden/redlock';
import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { WorkerMetrics, WorkerService } from '../src/index.ts';
import { captureLogger } from './support.ts';

/** A WorkerService started by {@link useCluster}, with its captured log records, metrics and lease events. */
export interface TestWorker {
  service: WorkerService;
  records: Record<string, unknown>[];
  metrics: WorkerMetrics;
  redlock: Redlock;
  logger: Logger;
  events: { aborted: RedlockEvents['aborted'][0][]; extended: RedlockEvents['extended'][0][] };
}

export interface TestWorkerOptions {
  concurrency?: number;
  /** Lock node URLs (a ClientLink's, for faults seen by this worker only); default the nodes themselves. */
  lockUrls?: readonly string[];
  workerId?: string;
}

/** Five lock nodes, a queue node, a scheduler-side Redlock and workers, for one test file; every worker is stopped after each test. */
export interface Cluster {
  locks: RedisNodes;
  /** The queue Redis: one node. */
  queueNodes: RedisNodes;
  connection: Redis;
  /** The test's scheduler: generous node timeouts (other test files load the machine too). */
  scheduler: Redlock;
  startWorker(schedules: ScheduleConfig[], options?: TestWorkerOptions): Promise<TestWorker>;
  /** A Redlock on the lock nodes (default) or on `lockUrls`, closed after the test. */
  redlock(lockUrls?: readonly string[]): Redlock;
  /** A path in the file's temporary directory. */
  file(name: string): string;
  /** The lines of such a file (none if it does not exist). */
  lines(name: string): string[];
  /** A job as stored now. */
  job(queue: string, jobId: string): Promise<Job>;
}

/** Registers the hooks that start and stop the cluster of one test file. */
export function useCluster(): Cluster {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-worker-'));
  const services: WorkerService[] = [];
  const redlocks: Redlock[] = [];
  const cluster = {
    file: (name: string) => path.join(dir, name),
    lines: (name: string) => {
      const file = path.join(dir, name);
      return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
    },
    async startWorker(schedules: ScheduleConfig[], options: TestWorkerOptions = {}): Promise<TestWorker> {
      const workerId = options.workerId ?? 'test-worker';
      const { logger, records } = captureLogger({ worker: workerId });
      const redlock = cluster.redlock(options.lockUrls);
      const events: TestWorker['events'] = { aborted: [], extended: [] };
      redlock.on('aborted', (event) => events.aborted.push(event));
      redlock.on('extended', (event) => events.extended.push(event));
      const metrics = new WorkerMetrics();
      metrics.observe(redlock);
      const service = new WorkerService({
        workerId,
        queueRedis: cluster.queueNodes.urls[0] as string,
        redlock,
        logger,
        config: { schedules, files: [] },
        concurrency: options.concurrency ?? 2,
        metrics,
      });
      services.push(service);
      await service.start();
      return { service, records, metrics, redlock, logger, events };
    },
    redlock(lockUrls?: readonly string[]): Redlock {
      const redlock = new Redlock(lockUrls ?? cluster.locks.urls);
      redlocks.push(redlock);
      return redlock;
    },
    async job(queue: string, jobId: string): Promise<Job> {
      const q = new Queue(queueName(queue), { connection: cluster.connection });
      try {
        return (await Job.fromId(q, jobId)) as Job;
      } finally {
        await q.close();
      }
    },
  } as Cluster;

  beforeAll(async () => {
    [cluster.locks, cluster.queueNodes] = await Promise.all([
      startRedisNodes({ count: 5, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    cluster.connection = new Redis(cluster.queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
    cluster.scheduler = new Redlock(cluster.locks.urls, { nodeTimeoutMs: 500 });
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((service) => service.stop(1000)));
    await Promise.all(redlocks.splice(0).map((redlock) => redlock.close()));
  });
  afterAll(async () => {
    cluster.connection.disconnect();
    await cluster.scheduler.close();
    await Promise.all([cluster.locks.close(), cluster.queueNodes.close()]);
    rmSync(dir, { recursive: true, force: true });
  });
  return cluster;
}
