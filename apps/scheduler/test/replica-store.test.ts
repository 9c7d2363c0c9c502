import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TickRecord } from '../src/ports.ts';
import { RedisReplicaStore } from '../src/replica-store.ts';

const RETENTION = { keep: 20, maxAgeMs: 7 * 86_400_000 };

describe('the replica store (queue Redis)', () => {
  let redis: RedisNodes;
  let connection: Redis;
  let store: RedisReplicaStore;
  beforeAll(async () => {
    redis = await startRedisNodes({ count: 1, aof: false });
    connection = new Redis(redis.urls[0] ?? '', { maxRetriesPerRequest: null });
    store = new RedisReplicaStore(connection);
  });
  afterAll(async () => {
    connection.disconnect();
    await redis.close();
  });

  /** How often the queue Redis ran `command` so far (scripts' own calls included). */
  const calls = async (command: string) =>
    Number(/calls=(\d+)/.exec((await connection.info('commandstats')).split(`cmdstat_${command}:`)[1] ?? '')?.[1] ?? 0);

  const record = (tickMs: number, outcome: TickRecord['outcome'], replica = 'r0'): TickRecord => ({
    tickMs,
    outcome,
    lagMs: 1,
    jobId: `team/a@${tickMs}`,
    replica,
  });

  it('a tick has one record: the first, unless a run enqueued or recovered replaces a skip or a miss', async () => {
    const entry = (r: TickRecord) => ({ scheduleId: 'team/a', record: r, keepMs: 60_000, retention: RETENTION });
    expect(
      await store.record([entry(record(1000, 'missed', 'r0')), entry(record(1000, 'skipped-paused', 'r1'))]),
    ).toEqual([true, false]);
    expect(await store.record([entry(record(1000, 'recovered', 'r2')), entry(record(1000, 'enqueued', 'r1'))])).toEqual(
      [true, false],
    );
    expect(await store.history('team/a')).toEqual([record(1000, 'recovered', 'r2')]);
    expect(
      await store.recorded([
        { scheduleId: 'team/a', tickMs: 1000 },
        { scheduleId: 'team/a', tickMs: 2000 },
      ]),
    ).toEqual([true, false]);
  });

  it("heartbeats by the server's clock: live ones listed, old ones deleted, a leaving or withdrawing replica gone at once", async () => {
    await connection.hset('tickwarden:control:replicas', 'gone', '1', 'quiet', String(Date.now() - 10_000));
    const first = await store.beat('r0', true, 6000, 60_000);
    expect(Math.abs(first.serverMs - Date.now())).toBeLessThan(1000);
    expect(first.live).toEqual(['r0']);
    expect((await store.beat('r1', true, 6000, 60_000)).live.sort()).toEqual(['r0', 'r1']);
    expect(Object.keys(await connection.hgetall('tickwarden:control:replicas')).sort()).toEqual(['quiet', 'r0', 'r1']);
    await store.leave('r0');
    expect((await store.beat('r1', true, 6000, 60_000)).live).toEqual(['r1']);
    // A replica that withdraws reads the others without standing among them.
    expect((await store.beat('r1', false, 6000, 60_000)).live).toEqual([]);
    await connection.del('tickwarden:control:replicas');
  });

  it('whether 1,000 ticks are recorded (a recovery sweep) is asked in round trips of at most 500 reads, answers in order', async () => {
    const sizes: number[] = [];
    const spied = new Redis(redis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const pipeline = spied.pipeline.bind(spied);
    spied.pipeline = ((commands?: unknown[][]) => {
      sizes.push(commands?.length ?? 0);
      return pipeline(commands as never);
    }) as typeof spied.pipeline;
    const ticks = Array.from({ length: 1000 }, (_, i) => ({
      scheduleId: 'team/a',
      tickMs: i === 999 ? 1000 : 100_000 + i,
    }));
    expect(await new RedisReplicaStore(spied).recorded(ticks)).toEqual(ticks.map((_, i) => i === 999));
    expect(sizes).toEqual([500, 500]);
    spied.disconnect();
  });

  it('open ticks: opened unless recorded, handed out once per try, closed by their record', async () => {
    const open = (tickMs: number, recoverAtMs: number) => ({
      scheduleId: 'team/a',
      tickMs,
      jobId: `team/a@${tickMs}`,
      recoverAtMs,
    });
    // 1000 is recorded (above): not reopened by a replica slow to take it up. The others in one ZADD.
    const zadds = await calls('zadd');
    await store.open([open(1000, 0), open(3000, 50), open(4000, 10_000)]);
    expect(await calls('zadd')).toBe(zadds + 1);
    await store.open([open(3000, 99)]); // already open: keeps its time
    expect(await store.takeDue(100, 10, 5000)).toEqual(['team/a@3000']);
    expect(await store.takeDue(100, 10, 5000)).toEqual([]);
    expect(await store.takeDue(5000, 10, 9000)).toEqual(['team/a@3000']);
    await store.record([
      { scheduleId: 'team/a', record: record(3000, 'enqueued'), keepMs: 60_000, retention: RETENTION },
    ]);
    await store.close(['team/a@4000']);
    expect(await store.takeDue(Number.MAX_SAFE_INTEGER, 10, 0)).toEqual([]);
  });

  it('marks: raised only upwards, each call answered with the marks from before, in one HMGET and one HSET per call', async () => {
    const before = { hget: await calls('hget'), hmget: await calls('hmget'), hset: await calls('hset') };
    expect([
      ...(await store.raiseMarks(
        new Map([
          ['team/a', 10],
          ['team/b', 5],
        ]),
      )),
    ]).toEqual([
      ['team/a', undefined],
      ['team/b', undefined],
    ]);
    const many = new Map(Array.from({ length: 1000 }, (_, i) => [`team/m${i}`, i] as const));
    expect(
      [...(await store.raiseMarks(new Map([['team/a', 7], ['team/b', 9], ['team/c', 1], ...many])))].slice(0, 3),
    ).toEqual([
      ['team/a', 10],
      ['team/b', 5],
      ['team/c', undefined],
    ]);
    // Three script calls (1,003 marks go in two: 1,000 a call): an HMGET and an HSET each, no HGET.
    expect({ hget: await calls('hget'), hmget: await calls('hmget'), hset: await calls('hset') }).toEqual({
      hget: before.hget,
      hmget: before.hmget + 3,
      hset: before.hset + 3,
    });
    expect(await connection.hmget('tickwarden:control:marks', 'team/a', 'team/b', 'team/c', 'team/m999')).toEqual([
      '10',
      '9',
      '1',
      '999',
    ]);
    // As a starting replica reads them all (see TickMarks.find).
    const { marks: all } = await store.marks();
    expect(all.size).toBe(1003);
    expect([all.get('team/a'), all.get('team/b'), all.get('team/m999')]).toEqual([10, 9, 999]);
    await connection.del('tickwarden:control:marks');
  });

  it("history: 1,100 ticks of 2 schedules recorded in one call keep each schedule's newest ones within its window (at least `keep`), newest first", async () => {
    const entries = Array.from({ length: 1100 }, (_, i) => ({
      scheduleId: `team-h/h${i % 2}`,
      record: record(i * 1000, 'enqueued'),
      keepMs: i % 2 === 0 ? 0 : 100_000,
      retention: RETENTION,
    }));
    await store.record(entries);
    const h0 = await store.history('team-h/h0', 1000);
    expect(h0).toEqual(Array.from({ length: RETENTION.keep }, (_, i) => record((1098 - 2 * i) * 1000, 'enqueued')));
    // h1 keeps its 100 s window: ticks 999 s ... 1099 s, one every 2 s.
    const h1 = await store.history('team-h/h1', 1000);
    expect(h1.map((r) => r.tickMs)).toEqual(Array.from({ length: 51 }, (_, i) => (1099 - 2 * i) * 1000));
  });

  it('history: entries older than maxAge go, however few are left, but never those within the tick window', async () => {
    const retention = { keep: 50, maxAgeMs: 10_000 };
    const entries = Array.from({ length: 30 }, (_, i) => ({
      scheduleId: 'team-h/age',
      record: record(i * 1000, 'enqueued'),
      keepMs: 5000,
      retention,
    }));
    await store.record(entries);
    expect((await store.history('team-h/age', 100)).map((r) => r.tickMs / 1000)).toEqual(
      Array.from({ length: 11 }, (_, i) => 29 - i),
    );
    // Each write says whether it is a record of its tick now: not when older than the history keeps.
    const late = (tickMs: number) => ({ ...entries[0], record: record(tickMs, 'enqueued') }) as (typeof entries)[0];
    expect(await store.record([late(1500), late(21_500), late(28_500)])).toEqual([false, true, true]);
    // A tick window longer than maxAge wins: whether a tick is recorded decides recovery.
    await store.record(entries.map((entry) => ({ ...entry, scheduleId: 'team-h/window', keepMs: 20_000 })));
    expect(await store.history('team-h/window', 100)).toHaveLength(21);
  });

  it("the audit trail keeps who did what and when, newest first, within the schedule's retention", async () => {
    for (let i = 1; i <= 4; i++)
      await store.audit(
        'team/audited',
        { action: i % 2 === 1 ? 'pause' : 'resume', by: `ops-${i}`, atMs: i * 60_000, note: `step ${i}` },
        { keep: 3, maxAgeMs: 86_400_000 },
      );
    expect(await store.audits('team/audited', 10)).toEqual([
      { action: 'resume', by: 'ops-4', atMs: 240_000, note: 'step 4' },
      { action: 'pause', by: 'ops-3', atMs: 180_000, note: 'step 3' },
      { action: 'resume', by: 'ops-2', atMs: 120_000, note: 'step 2' },
    ]);
  });
});
