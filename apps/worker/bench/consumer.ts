/**
 * The scheduler benchmark's consumer (apps/scheduler/bench), the same for
 * Tickwarden and for BullMQ's Job Schedulers: one BullMQ Worker (concurrency
 * 100) whose processor records, per job, the schedule, the tick it stands
 * for, the time the run starts, the job's `timestamp` and `processedOn`, and
 * completes at once. For Tickwarden a run starts as a worker's does: once the
 * tick's claim took the schedule's lease, in the schedule's order (`firstStart`
 * and `startOrder`, the worker's own); the lease is released when the job
 * completes. Records go to stdout
 * every 200 ms as `{"jobs":[[schedule, tickMs, startMs, timestamp,
 * processedOn], ...],"failed":[[schedule, tickMs], ...]}`, `failed` naming the
 * ticks whose start failed (such a run does not start), `skipped` those a
 * run of an earlier tick overlapped, `superseded` those a later tick's run passed.
 *
 * Environment: BENCH_QUEUE_REDIS (URL), BENCH_QUEUE (BullMQ queue name),
 * BENCH_KIND (`tickwarden`: the tick is `job.data.tickMs`; `bullmq`: the
 * tick is the `<ms>` of the job id `repeat:<schedulerId>:<ms>`),
 * BENCH_LOCK_NODES (Tickwarden: the lock nodes' URLs, comma-separated),
 * BENCH_CRON (Tickwarden: every schedule's pattern, in UTC; default every second).
 */
import { ticksAround } from '@tickwarden/config';
import { jobClaim, parseTickJob } from '@tickwarden/contracts';
import { Redlock } from '@tickwarden/redlock';
import { Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { firstStart, startOrder } from '../src/index.ts';

const CONCURRENCY = 100;
const FLUSH_MS = 200;

const url = process.env['BENCH_QUEUE_REDIS'];
const queue = process.env['BENCH_QUEUE'];
const kind = process.env['BENCH_KIND'];
const lockNodes = process.env['BENCH_LOCK_NODES']?.split(',').filter(Boolean) ?? [];
const cron = process.env['BENCH_CRON'] ?? '* * * * * *';
if (
  !url ||
  !queue ||
  (kind !== 'tickwarden' && kind !== 'bullmq') ||
  (kind === 'tickwarden' && lockNodes.length === 0)
) {
  process.stderr.write(
    'consumer: BENCH_QUEUE_REDIS, BENCH_QUEUE, BENCH_KIND (tickwarden|bullmq) and, for tickwarden, BENCH_LOCK_NODES are required\n',
  );
  process.exit(2);
}
const redlock = kind === 'tickwarden' ? new Redlock(lockNodes) : undefined;
const stopping = new AbortController();
let takeoverFailures = 0;

type JobRecord = [schedule: string, tickMs: number, startMs: number, timestamp: number, processedOn: number];
let pending: JobRecord[] = [];
let failed: [schedule: string, tickMs: number][] = [];
let malformed = 0;

/** The schedule and tick a job stands for, or undefined when the job is not one the bench knows. */
function tickOf(job: Job): [string, number] | undefined {
  if (kind === 'tickwarden') {
    const data = job.data as { schedule?: unknown; tickMs?: unknown } | undefined;
    if (typeof data?.schedule !== 'string' || typeof data.tickMs !== 'number') return undefined;
    return [data.schedule.slice(data.schedule.indexOf('/') + 1), data.tickMs];
  }
  // BullMQ Job Schedulers: `repeat:<schedulerId>:<nextMillis>`, the scheduled time of this run (also `opts.prevMillis`).
  const id = job.id ?? '';
  const tickMs = Number(id.slice(id.lastIndexOf(':') + 1));
  if (!job.repeatJobKey || !Number.isFinite(tickMs)) return undefined;
  return [job.repeatJobKey, tickMs];
}

const flush = (): void => {
  if (pending.length === 0 && failed.length === 0) return;
  process.stdout.write(`${JSON.stringify({ jobs: pending, failed })}\n`);
  pending = [];
  failed = [];
};
const flusher = setInterval(flush, FLUSH_MS);

const connection = new Redis(url, { maxRetriesPerRequest: null });
connection.on('error', () => undefined);
/** Takes the schedule's lease as a worker's first start does; resolves how to give it back, or undefined when it failed (counted). */
async function takeOver(job: Job): Promise<(() => Promise<unknown>) | undefined> {
  if (!redlock) return () => Promise.resolve();
  try {
    const data = parseTickJob(job.data);
    const lease = await firstStart(redlock, data, {
      claim: jobClaim(job.id ?? '', data.tickMs),
      order: startOrder(data, ticksAround(cron, 'UTC', data.tickMs), Date.now()),
      signal: stopping.signal,
    });
    return () => redlock.release(lease);
  } catch {
    takeoverFailures++;
    return undefined;
  }
}

const worker = new Worker(
  queue,
  async (job: Job) => {
    const tick = tickOf(job);
    if (!tick) {
      malformed++;
      return;
    }
    const release = await takeOver(job);
    if (!release) {
      failed.push(tick);
      return;
    }
    pending.push([tick[0], tick[1], Date.now(), job.timestamp, job.processedOn ?? 0]);
    await release();
  },
  { connection, concurrency: CONCURRENCY },
);
worker.on('error', (error) => process.stderr.write(`consumer: worker error: ${error.message}\n`));
await worker.waitUntilReady();
process.stdout.write(`${JSON.stringify({ msg: 'consumer ready', queue, kind, concurrency: CONCURRENCY })}\n`);

await new Promise<void>((resolve) => {
  process.once('SIGTERM', resolve);
  process.once('SIGINT', resolve);
});
stopping.abort();
await worker.close();
clearInterval(flusher);
flush();
connection.disconnect();
await redlock?.close();
process.stdout.write(`${JSON.stringify({ msg: 'consumer stopped', malformed, takeoverFailures })}\n`);
