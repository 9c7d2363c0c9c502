import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ScheduleConfig } from '@tickwarden/config';
import { queueName } from '@tickwarden/contracts';
import { Redlock } from '@tickwarden/redlock';
import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { WorkerMetrics, WorkerService } from '../src/index.ts';
import { captureLogger } from './support.ts';

/** A WorkerService started by {@link useCluster}, with its captured log records and metrics. */
export interface TestWorker {
  service: WorkerService;
  records: Record<string, unknown>[];
  metrics: WorkerMetrics;
  redlock: Redlock;
  logger: Logger;
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
  connection: Redis;
  /** The test's scheduler: generous node timeouts (other test files load the machine too). */
  scheduler: Redlock;
  startWorker(schedules: ScheduleConfig[], options?: TestWorkerOptions): Promise<TestWorker>;
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
  let queueNodes: RedisNodes | undefined;
  let queueUrl = '';
  const cluster = {
    file: (name: string) => path.join(dir, name),
    lines: (name: string) => {
      const file = path.join(dir, name);
      return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n') : [];
    },
    async startWorker(schedules: ScheduleConfig[], options: TestWorkerOptions = {}): Promise<TestWorker> {
      const workerId = options.workerId ?? 'test-worker';
      const { logger, records } = captureLogger({ worker: workerId });
      const redlock = new Redlock(options.lockUrls ?? cluster.locks.urls);
      redlocks.push(redlock);
      const metrics = new WorkerMetrics();
      metrics.observe(redlock);
      const service = new WorkerService({
        workerId,
        queueRedis: queueUrl,
        redlock,
        logger,
        config: { schedules, files: [] },
        concurrency: options.concurrency ?? 2,
        metrics,
      });
      services.push(service);
      await service.start();
      return { service, records, metrics, redlock, logger };
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
    const [locks, queue] = await Promise.all([
      startRedisNodes({ count: 5, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    queueNodes = queue;
    queueUrl = queue.urls[0] as string;
    cluster.locks = locks;
    cluster.connection = new Redis(queueUrl, { maxRetriesPerRequest: null });
    cluster.scheduler = new Redlock(locks.urls, { nodeTimeoutMs: 500 });
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((service) => service.stop(1000)));
    await Promise.all(redlocks.splice(0).map((redlock) => redlock.close()));
  });
  afterAll(async () => {
    cluster.connection.disconnect();
    await cluster.scheduler.close();
    await Promise.all([cluster.locks.close(), queueNodes?.close()]);
    rmSync(dir, { recursive: true, force: true });
  });
  return cluster;
}
