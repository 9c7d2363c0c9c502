/**
 * What the schedules' histories cost the queue Redis (not part of `npm run bench:scheduler`):
 * fills, for N schedules (default 10,000), each kind of history to its default `keep` through the
 * code that writes it in production (the replica store's record script, the workers' RunHistory,
 * the audit trail), with entries as big as real ones, and prints the queue Redis's used memory
 * before and after, per schedule.
 *
 *   node --conditions=@tickwarden/source apps/scheduler/bench/history-memory.ts [N]
 */
import { DEFAULT_HISTORY } from '@tickwarden/config';
import { RunHistory } from '@tickwarden/runtime';
import { startRedisNodes } from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { RedisReplicaStore } from '../src/replica-store.ts';

const count = Number(process.argv[2] ?? 10_000);
const retention = { keep: DEFAULT_HISTORY.keep, maxAgeMs: DEFAULT_HISTORY.maxAge };
const nodes = await startRedisNodes({ count: 1, aof: false });
const redis = new Redis(nodes.urls[0] as string);
const usedMemory = async (): Promise<number> => Number(/^used_memory:(\d+)/m.exec(await redis.info('memory'))?.[1]);
try {
  const before = await usedMemory();
  const store = new RedisReplicaStore(redis);
  const runs = new RunHistory(redis);
  const now = Date.now();
  for (let i = 0; i < count; i++) {
    const scheduleId = `team-${i % 100}/schedule-${i}`;
    const ticks = Array.from({ length: retention.keep }, (_, k) => now - k * 60_000);
    await store.record(
      ticks.map((tickMs) => ({
        scheduleId,
        keepMs: 60_000,
        retention,
        record: {
          tickMs,
          outcome: 'enqueued',
          lagMs: -9512,
          fence: tickMs * 1000 + 123,
          jobId: `${scheduleId}@${tickMs}`,
          replica: 'tickwarden-scheduler-7d9f8c6b5-x2x4q',
        },
      })),
    );
    await Promise.all(
      ticks.map((tickMs, k) =>
        runs.append(
          scheduleId,
          {
            tickMs,
            jobId: `${scheduleId}@${tickMs}`,
            outcome: k % 5 === 0 ? 'failed' : 'succeeded',
            attempt: 1,
            worker: 'tickwarden-worker-5c7b9d8f4-q8z7m',
            fence: tickMs * 1000 + 456,
            startedAtMs: tickMs + 40,
            endedAtMs: tickMs + 1840,
            exitCode: k % 5 === 0 ? 1 : 0,
            error: k % 5 === 0 ? 'x'.repeat(200) : undefined,
          },
          retention,
        ),
      ),
    );
    await Promise.all(
      ticks.map((tickMs) =>
        store.audit(
          scheduleId,
          {
            action: 'pause',
            by: 'alice@tickwarden-scheduler-7d9f8c6b5-x2x4q',
            atMs: tickMs,
            note: 'incident INC-1234: payments API degraded',
          },
          retention,
        ),
      ),
    );
  }
  const after = await usedMemory();
  const mb = (bytes: number): string => (bytes / 1e6).toFixed(1);
  process.stdout.write(
    `${count} schedules x ${retention.keep} tick records, ${retention.keep} runs and ${retention.keep} control actions: queue Redis used_memory ${mb(before)} -> ${mb(after)} MB, ${Math.round((after - before) / count)} bytes per schedule\n`,
  );
} finally {
  redis.disconnect();
  await nodes.close();
}
