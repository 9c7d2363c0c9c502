/**
 * The benchmark's peer producer: one process that upserts the same BullMQ Job
 * Schedulers as every other producer (`s0000`, `s0001`, ...), once at start,
 * as a replica of an application would on every deploy, then idles until
 * SIGTERM. Writes JSON lines: `{"msg":"upserted","count","ms","errors","firstError"}`.
 *
 * Environment: BENCH_QUEUE_REDIS (URL), BENCH_QUEUE (queue name),
 * BENCH_SCHEDULES (count), BENCH_PATTERN (6-field cron), BENCH_PRODUCER (name).
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';

/** Upserts in flight at once (a plain loop of awaits takes ~10 s for 10,000 on this machine). */
const IN_FLIGHT = 100;

const url = process.env['BENCH_QUEUE_REDIS'];
const queueName = process.env['BENCH_QUEUE'];
const count = Number(process.env['BENCH_SCHEDULES']);
const pattern = process.env['BENCH_PATTERN'];
const producer = process.env['BENCH_PRODUCER'] ?? 'producer';
if (!url || !queueName || !pattern || !Number.isInteger(count) || count < 1) {
  process.stderr.write('producer: BENCH_QUEUE_REDIS, BENCH_QUEUE, BENCH_SCHEDULES and BENCH_PATTERN are required\n');
  process.exit(2);
}

const schedulerId = (i: number): string => `s${String(i).padStart(5, '0')}`;
const log = (fields: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify({ producer, time: Date.now(), ...fields })}\n`);
};

const connection = new Redis(url, { maxRetriesPerRequest: null });
connection.on('error', () => undefined);
const queue = new Queue(queueName, { connection });
await queue.waitUntilReady();

const started = performance.now();
let next = 0;
let errors = 0;
let firstError: string | undefined;
await Promise.all(
  Array.from({ length: Math.min(IN_FLIGHT, count) }, async () => {
    while (next < count) {
      const id = schedulerId(next++);
      try {
        await queue.upsertJobScheduler(
          id,
          { pattern },
          {
            name: 'tick',
            data: {},
            opts: { removeOnComplete: { age: 86_400, count: 10_000 }, removeOnFail: { age: 7 * 86_400 } },
          },
        );
      } catch (error) {
        errors++;
        firstError ??= error instanceof Error ? error.message : String(error);
      }
    }
  }),
);
log({ msg: 'upserted', count, ms: Math.round(performance.now() - started), errors, firstError });

await new Promise<void>((resolve) => {
  process.once('SIGTERM', resolve);
  process.once('SIGINT', resolve);
});
await queue.close();
connection.disconnect();
log({ msg: 'stopped' });
