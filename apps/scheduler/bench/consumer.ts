/**
 * The benchmark's consumer, the same for Tickwarden and for BullMQ's Job
 * Schedulers: one BullMQ Worker (concurrency 100) whose processor records,
 * per job, the schedule, the tick it stands for, the time the processor
 * started, the job's `timestamp` and `processedOn`, and completes at once.
 * Records go to stdout every 200 ms as `{"jobs":[[schedule, tickMs, startMs,
 * timestamp, processedOn], ...]}`.
 *
 * Environment: BENCH_QUEUE_REDIS (URL), BENCH_QUEUE (BullMQ queue name),
 * BENCH_KIND (`tickwarden`: the tick is `job.data.tickMs`; `bullmq`: the
 * tick is the `<ms>` of the job id `repeat:<schedulerId>:<ms>`).
 */
import { Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';

const CONCURRENCY = 100;
const FLUSH_MS = 200;

const url = process.env['BENCH_QUEUE_REDIS'];
const queue = process.env['BENCH_QUEUE'];
const kind = process.env['BENCH_KIND'];
if (!url || !queue || (kind !== 'tickwarden' && kind !== 'bullmq')) {
  process.stderr.write('consumer: BENCH_QUEUE_REDIS, BENCH_QUEUE and BENCH_KIND (tickwarden|bullmq) are required\n');
  process.exit(2);
}

type JobRecord = [schedule: string, tickMs: number, startMs: number, timestamp: number, processedOn: number];
let pending: JobRecord[] = [];
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
  if (pending.length === 0) return;
  process.stdout.write(`${JSON.stringify({ jobs: pending })}\n`);
  pending = [];
};
const flusher = setInterval(flush, FLUSH_MS);

const connection = new Redis(url, { maxRetriesPerRequest: null });
connection.on('error', () => undefined);
const worker = new Worker(
  queue,
  async (job: Job) => {
    const startMs = Date.now();
    const tick = tickOf(job);
    if (!tick) {
      malformed++;
      return;
    }
    pending.push([tick[0], tick[1], startMs, job.timestamp, job.processedOn ?? 0]);
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
await worker.close();
clearInterval(flusher);
flush();
connection.disconnect();
process.stdout.write(`${JSON.stringify({ msg: 'consumer stopped', malformed })}\n`);
