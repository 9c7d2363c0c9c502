import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstBytes, RUN_ERROR_BYTES, RunHistory, type RunRecord } from '../src/index.ts';

const run = (endedAtMs: number, extra: Partial<RunRecord> = {}): RunRecord => ({
  tickMs: endedAtMs - 1000,
  jobId: `team/s@${endedAtMs - 1000}`,
  outcome: 'succeeded',
  attempt: 1,
  worker: 'w1',
  fence: endedAtMs,
  startedAtMs: endedAtMs - 500,
  endedAtMs,
  ...extra,
});

describe('RunHistory, against a real Redis', () => {
  let nodes: RedisNodes;
  let redis: Redis;
  beforeAll(async () => {
    nodes = await startRedisNodes({ count: 1, aof: false });
    redis = new Redis(nodes.urls[0] as string);
  });
  afterAll(async () => {
    redis.disconnect();
    await nodes.close();
  });

  it('keeps the newest `keep` runs, newest first', async () => {
    const history = new RunHistory(redis);
    for (let i = 1; i <= 30; i++)
      await history.append('team/keep', run(1_000_000 + i * 1000), { keep: 20, maxAgeMs: 86_400_000 });
    const kept = await history.read('team/keep', 100);
    expect(kept).toHaveLength(20);
    expect(kept[0]?.endedAtMs).toBe(1_030_000);
    expect(kept.at(-1)?.endedAtMs).toBe(1_011_000);
  });

  it('drops runs older than maxAge, whatever keep allows', async () => {
    const history = new RunHistory(redis);
    await history.append('team/age', run(1_000_000), { keep: 100, maxAgeMs: 60_000 });
    await history.append('team/age', run(1_050_000), { keep: 100, maxAgeMs: 60_000 });
    await history.append('team/age', run(1_100_000), { keep: 100, maxAgeMs: 60_000 });
    expect((await history.read('team/age', 10)).map((r) => r.endedAtMs)).toEqual([1_100_000, 1_050_000]);
  });

  it(`keeps the first ${RUN_ERROR_BYTES} bytes of an error, cut on a character boundary`, async () => {
    const history = new RunHistory(redis);
    await history.append(
      'team/error',
      run(1_000_000, { outcome: 'failed', exitCode: 3, error: `${'x'.repeat(RUN_ERROR_BYTES - 1)}€ and more` }),
      { keep: 5, maxAgeMs: 60_000 },
    );
    const [failed] = await history.read('team/error', 1);
    expect(failed).toMatchObject({ outcome: 'failed', exitCode: 3, error: 'x'.repeat(RUN_ERROR_BYTES - 1) });
    expect(firstBytes('short')).toBe('short');
    expect(Buffer.byteLength(firstBytes('€'.repeat(200)))).toBeLessThanOrEqual(RUN_ERROR_BYTES);
  });
});
