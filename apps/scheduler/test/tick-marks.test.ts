import { Redlock } from '@tickwarden/redlock';
import { sleep, startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Scheduler, type Schedule, type TickOutcome } from '../src/index.ts';
import { RedisReplicaStore } from '../src/replica-store.ts';
import { TickMarks } from '../src/tick-marks.ts';
import { scheduleFixture } from './support.ts';

/** Lock nodes that keep no progress (these tests look at the queue Redis's marks alone). */
const noProgress = { raiseMark: () => Promise.resolve(false), readMark: () => Promise.resolve(undefined) };

const everySecond = (id: string, catchUpMs = 0): Schedule =>
  scheduleFixture({ id, cron: '* * * * * *', overlap: 'allow', leaseTtlMs: 5000, catchUpMs });

/** The whole seconds strictly between two ticks. */
const secondsBetween = (after: number, before: number): number[] =>
  Array.from({ length: Math.max(0, (before - after) / 1000 - 1) }, (_, i) => after + (i + 1) * 1000);

interface Outcome {
  replica: string;
  outcome: TickOutcome;
  schedule: string;
  tickMs: number;
  /** Recorded on the enqueuer's behalf by recovery, which found its job published: not an add. */
  found: boolean;
  recorded: boolean;
  reason: string | undefined;
}

describe('high-water marks: ticks missed while no replica ran', () => {
  let locks: RedisNodes;
  let queueRedis: RedisNodes;
  const outcomes: Outcome[] = [];
  const logs: Record<string, unknown>[] = [];

  beforeAll(async () => {
    [locks, queueRedis] = await Promise.all([
      startRedisNodes({ count: 3, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([locks.close(), queueRedis.close()]);
  });

  interface Replica {
    scheduler: Scheduler;
    stop: () => Promise<void>;
  }

  function startReplica(name: string, schedules: Schedule[], gapCheckDelayMs = 1500): Replica {
    const redlock = new Redlock(locks.urls, { nodeTimeoutMs: 250 });
    const queue = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    const logger = pino(
      { level: 'warn' },
      { write: (line: string) => void logs.push({ ...(JSON.parse(line) as Record<string, unknown>), replica: name }) },
    );
    const scheduler = new Scheduler({
      replicaId: name,
      redlock,
      queueConnection: queue,
      logger,
      gapCheckDelayMs,
      // A short lead: the test places the gap between replicas within seconds.
      contestLeadMs: 1000,
      onOutcome: ({ outcome, scheduleId, tickMs, found, recorded, reason }) =>
        outcomes.push({ replica: name, outcome, schedule: scheduleId, tickMs, found, recorded, reason }),
    });
    scheduler.setSchedules(schedules);
    scheduler.start();
    const stop = async () => {
      await scheduler.stop();
      await redlock.close();
      queue.disconnect();
    };
    return { scheduler, stop };
  }

  const of = (schedule: string, replicas: string[]) =>
    outcomes.filter((o) => o.schedule === schedule && replicas.includes(o.replica));
  const gapLines = (schedule: string) =>
    logs.filter((line) => line['schedule'] === schedule && line['msg'] === 'ticks missed while no replica ran');
  /** The gap check found the schedule's gap, and the replicas took a tick of it (the first after the gap). */
  const gapAndTickAfter = (schedule: string, replicas: string[]) =>
    gapLines(schedule).length > 0 && of(schedule, replicas).some((o) => o.outcome !== 'missed');

  it('all replicas down for N ticks: the next start records the N ticks as missed (N-1 with catchUp, whose latest fires), once for all replicas, in one log line', async () => {
    const plain = everySecond('gap/plain');
    const withCatchUp = everySecond('gap/catch-up', 10_000);
    const first = startReplica('a0', [plain, withCatchUp], 300);
    await sleep(2500);
    await first.stop();
    await sleep(5500); // every replica down: about 4 ticks of each schedule fall in the gap (a0 took up ticks up to its contest lead, 1 s, ahead)
    const restarted = [startReplica('b0', [plain, withCatchUp]), startReplica('b1', [plain, withCatchUp])];
    // Until the gap check ran (1.5 s after start; a replica whose check has not run runs it as it stops)
    // and a tick was taken after the gap: a fixed wait can end before either on a slow machine.
    await waitUntil(
      () => [plain, withCatchUp].every((schedule) => gapAndTickAfter(schedule.id, ['b0', 'b1'])),
      'the gaps recorded and a tick taken after each',
      { timeoutMs: 15_000 },
    );
    await Promise.all(restarted.map((replica) => replica.stop()));

    for (const schedule of [plain, withCatchUp]) {
      const lastBefore = Math.max(...of(schedule.id, ['a0']).map((o) => o.tickMs));
      const after = of(schedule.id, ['b0', 'b1']);
      const firstAfter = Math.min(...after.filter((o) => o.outcome !== 'missed').map((o) => o.tickMs));
      const expected = secondsBetween(lastBefore, firstAfter);
      const missed = after.filter((o) => o.outcome === 'missed');
      expect(missed.map((o) => o.tickMs).sort(), schedule.id).toEqual(expected);
      expect(new Set(missed.map((o) => o.replica)).size, `${schedule.id}: one replica records the gap`).toBe(1);
      expect(gapLines(schedule.id).map((line) => [line['missed'], line['firstTick'], line['lastTick']])).toEqual([
        [
          expected.length,
          new Date(expected[0] as number).toISOString(),
          new Date(expected.at(-1) as number).toISOString(),
        ],
      ]);
      // The history `tickwarden status` shows: one entry for the gap.
      const connection = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
      const gaps = (await new RedisReplicaStore(connection).history(schedule.id)).filter((run) => run.gap);
      connection.disconnect();
      expect(gaps).toEqual([
        expect.objectContaining({
          outcome: 'missed',
          tickMs: expected.at(-1),
          gap: { firstTickMs: expected[0], count: expected.length, atLeast: false },
        }),
      ]);
    }
    const missedPlain = of(plain.id, ['b0', 'b1']).filter((o) => o.outcome === 'missed').length;
    const missedCatchUp = of(withCatchUp.id, ['b0', 'b1']).filter((o) => o.outcome === 'missed');
    expect(missedPlain).toBeGreaterThanOrEqual(3);
    expect(missedCatchUp).toHaveLength(missedPlain - 1);
    // The tick catch-up fired is the one left out: the latest of the gap, enqueued once (recovery may also
    // find its job published before its record lands: `found`, no add) and recorded once.
    const caughtUp = (missedCatchUp.at(-1)?.tickMs ?? 0) + 1000;
    const ofCaughtUp = of(withCatchUp.id, ['b0', 'b1']).filter((o) => o.tickMs === caughtUp);
    expect(ofCaughtUp.filter((o) => o.outcome === 'enqueued' && !o.found)).toHaveLength(1);
    expect(ofCaughtUp.filter((o) => o.recorded).map((o) => o.outcome)).toEqual(['enqueued']);
  });

  it('all replicas down, then the queue Redis loses its data after they started and before their gap check: the marks they found are written back, and the gap is recorded once', async () => {
    const lost = everySecond('gap/lost-marks');
    const first = startReplica('c0', [lost], 300);
    await sleep(2500);
    await first.stop();
    await sleep(3500);
    const restarted = [startReplica('d0', [lost], 4000), startReplica('d1', [lost], 4000)];
    // Both started (each read the marks at its first connection) and took up a tick; their gap checks are seconds away.
    await waitUntil(() => of(lost.id, ['d0', 'd1']).length > 0, 'a tick taken up after the restart');
    await flushed(queueRedis.urls[0] ?? '');
    await waitUntil(() => gapLines(lost.id).length > 0, 'the gap recorded', { timeoutMs: 15_000 });
    await Promise.all(restarted.map((replica) => replica.stop()));

    const lastBefore = Math.max(...of(lost.id, ['c0']).map((o) => o.tickMs));
    // The ticks c0 took up are decided again after the loss (recovery): the gap is what comes after them.
    const after = of(lost.id, ['d0', 'd1']).filter((o) => o.tickMs > lastBefore);
    const firstAfter = Math.min(...after.filter((o) => o.outcome !== 'missed').map((o) => o.tickMs));
    const missed = after.filter((o) => o.outcome === 'missed');
    expect(missed.map((o) => o.tickMs).sort()).toEqual(secondsBetween(lastBefore, firstAfter));
    expect(missed.length).toBeGreaterThanOrEqual(2);
    expect(new Set(missed.map((o) => o.replica)).size, 'one replica records the gap').toBe(1);
    expect(gapLines(lost.id)).toHaveLength(1);
  });

  it('replicas up: a rolling restart records no missed tick, and neither does a schedule removed and added again', async () => {
    const rolling = everySecond('gap/rolling');
    const removed = everySecond('gap/removed');
    // A fresh deployment: no progress left on the lock nodes by the test before, which stopped its
    // replicas right after the queue Redis lost its data. Progress tagged with the lost epoch would
    // (rightly) make the first replica here judge every schedule, these new ones too, by it.
    await Promise.all(locks.urls.map((url) => flushed(url)));
    const r0 = startReplica('r0', [rolling, removed], 300);
    await sleep(1500);
    r0.scheduler.setSchedules([rolling]); // its mark is dropped: no gap when it comes back
    const r1 = startReplica('r1', [rolling]);
    await sleep(2000);
    await r0.stop();
    const r2 = startReplica('r2', [rolling]);
    await sleep(3000);
    await r1.stop();
    await sleep(2000);
    const r3 = startReplica('r3', [rolling, removed]);
    await sleep(2500);
    await Promise.all([r2.stop(), r3.stop()]);

    expect(of(rolling.id, ['r0', 'r1', 'r2', 'r3']).filter((o) => o.outcome === 'enqueued').length).toBeGreaterThan(5);
    expect(outcomes.filter((o) => o.schedule.startsWith('gap/r') && o.outcome === 'missed')).toEqual([]);
    expect([...gapLines(rolling.id), ...gapLines(removed.id)]).toEqual([]);
  });

  it('a gap longer than 10,000 ticks: 10,000 counted, logged as at least that many, with the real last missed tick', async () => {
    const schedule = everySecond('gap/huge');
    const connection = new Redis(queueRedis.urls[0] ?? '');
    const markedAt = Math.floor(Date.now() / 1000) * 1000 - 3 * 3_600_000; // three hours of per-second ticks ago
    await new RedisReplicaStore(connection).raiseMarks(new Map([[schedule.id, markedAt]]));
    connection.disconnect();
    const replica = startReplica('h0', [schedule], 200);
    // Until the gap check ran and a tick was taken after the gap (Math.min() of none is Infinity).
    await waitUntil(() => gapAndTickAfter(schedule.id, ['h0']), 'the gap recorded and a tick taken after it', {
      timeoutMs: 15_000,
    });
    await replica.stop();

    const missed = of(schedule.id, ['h0']).filter((o) => o.outcome === 'missed');
    const firstTaken = Math.min(
      ...of(schedule.id, ['h0'])
        .filter((o) => o.outcome !== 'missed')
        .map((o) => o.tickMs),
    );
    expect(missed).toHaveLength(10_000);
    expect(missed[0]?.tickMs).toBe(markedAt + 1000);
    expect(
      gapLines(schedule.id).map((line) => [line['missed'], line['missedAtLeast'], line['firstTick'], line['lastTick']]),
    ).toEqual([[10_000, true, new Date(markedAt + 1000).toISOString(), new Date(firstTaken - 1000).toISOString()]]);
  });

  it('the gap check of 100,000 schedules finds every gap, a slice at a time: the event loop turns in between', async () => {
    const redis = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    try {
      const store = new RedisReplicaStore(redis);
      const ids = Array.from({ length: 100_000 }, (_, i) => `bulk/s${i}`);
      /** The check, and how often the event loop turned before its write and after it. */
      const checkOnce = async (firstTickMs: number) => {
        let turns = 0;
        let counting = true;
        const count = (): void => {
          turns++;
          if (counting) setImmediate(count);
        };
        const at = { write: 0, written: 0 };
        const marks = new TickMarks({
          store: {
            raiseMarks: async (raised) => {
              at.write = turns;
              const previous = await store.raiseMarks(raised);
              at.written = turns;
              return previous;
            },
            forgetMarks: (ids) => store.forgetMarks(ids),
            marks: () => store.marks(),
          },
          progress: noProgress,
          logger: pino({ level: 'silent' }),
        });
        for (const id of ids) marks.planned(id, firstTickMs);
        marks.start(0, 0);
        setImmediate(count);
        const gaps = await marks.flush(firstTickMs);
        counting = false;
        return { gaps, before: at.write, after: turns - at.written };
      };
      const firstMs = Date.parse('2026-01-01T00:00:00Z');
      expect((await checkOnce(firstMs)).gaps).toEqual([]);
      // A replica starting an hour later, nobody having run in between: every schedule has the same gap.
      const { gaps, before, after } = await checkOnce(firstMs + 3_600_000);
      expect(gaps).toHaveLength(ids.length);
      expect(gaps[99_999]).toEqual({ scheduleId: 'bulk/s99999', afterMs: firstMs - 1, beforeMs: firstMs + 3_600_000 });
      // Counted in turns, not milliseconds (a loaded CI stretches both): 100,000 schedules, 2,000 a turn, before the
      // write and after it (while the write waits for Redis the loop turns anyway).
      expect(before).toBeGreaterThanOrEqual(45);
      expect(after).toBeGreaterThanOrEqual(45);
    } finally {
      redis.disconnect();
    }
  });

  it('a flush while the gap check runs (each wake flushes) waits for it instead of starting another', async () => {
    const redis = new Redis(queueRedis.urls[0] ?? '', { maxRetriesPerRequest: null });
    try {
      const store = new RedisReplicaStore(redis);
      let claims = 0;
      const marks = new TickMarks({
        store: {
          raiseMarks: (raised) => {
            claims++;
            return store.raiseMarks(raised);
          },
          forgetMarks: (ids) => store.forgetMarks(ids),
          marks: () => store.marks(),
        },
        progress: noProgress,
        logger: pino({ level: 'silent' }),
      });
      for (let i = 0; i < 10_000; i++) marks.planned(`concurrent/s${i}`, Date.parse('2026-01-01T00:00:00Z'));
      marks.start(0, 0);
      const checking = marks.flush(Date.now());
      const meanwhile = marks.flush(Date.now());
      expect(await meanwhile).toEqual([]);
      await checking;
      expect(claims).toBe(1);
    } finally {
      redis.disconnect();
    }
  });

  it('prunes the parsed patterns no schedule uses after a reload', async () => {
    const replica = startReplica('p0', [
      scheduleFixture({ id: 'prune/a', cron: '0 0 * * *' }),
      scheduleFixture({ id: 'prune/b', cron: '0 0 * * *' }),
      scheduleFixture({ id: 'prune/c', cron: '0 12 * * *', timezone: 'Europe/Berlin' }),
    ]);
    expect(replica.scheduler.parsedPatterns).toBe(2);
    replica.scheduler.setSchedules([
      scheduleFixture({ id: 'prune/a', cron: '0 0 * * *' }),
      scheduleFixture({ id: 'prune/d', cron: '0 6 * * *' }),
    ]);
    expect(replica.scheduler.parsedPatterns).toBe(2);
    replica.scheduler.setSchedules([scheduleFixture({ id: 'prune/a', cron: '0 0 * * *' })]);
    expect(replica.scheduler.parsedPatterns).toBe(1);
    await replica.stop();
  });
});

describe("the replicas' progress on the lock nodes (TickMarks, on fakes)", () => {
  function marksOn(progress: { value: number; tag: string } | undefined | Error, epoch: string | undefined) {
    const raised: { value: number; tag: string }[] = [];
    const held = { ok: true };
    const logs: Record<string, unknown>[] = [];
    const marks = new TickMarks({
      store: {
        raiseMarks: (m) => Promise.resolve(new Map([...m.keys()].map((id) => [id, undefined]))),
        forgetMarks: () => Promise.resolve(),
        marks: () => Promise.resolve({ marks: new Map([['t/a', 5000]]), epoch }),
      },
      progress: {
        raiseMark: (_resource, mark) => {
          raised.push(mark);
          return Promise.resolve(held.ok);
        },
        readMark: () => (progress instanceof Error ? Promise.reject(progress) : Promise.resolve(progress)),
      },
      logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
    });
    return { marks, raised, held, logs };
  }

  it('finds the queue Redis lost its data when its epoch is not the one the progress was written in', async () => {
    expect((await marksOn({ value: 9000, tag: 'e1' }, 'e1').marks.find()).lostThroughMs).toBeUndefined();
    expect((await marksOn(undefined, 'e1').marks.find()).lostThroughMs).toBeUndefined();
    const lost = marksOn({ value: 9000, tag: 'e1' }, 'e2');
    expect(await lost.marks.find()).toEqual({ marks: new Map([['t/a', 5000]]), lostThroughMs: 9000 });
    expect((await marksOn({ value: 9000, tag: 'e1' }, undefined).marks.find()).lostThroughMs).toBe(9000);
    // Lock nodes out of reach: the queue's marks alone, said at warn.
    const unread = marksOn(new Error('no quorum'), 'e1');
    expect((await unread.marks.find()).lostThroughMs).toBeUndefined();
    expect(unread.logs.map((line) => line['level'])).toEqual([40]);
  });

  it('written once the gap check ran, at most once a second, tagged with the epoch; a failure said once until it works', async () => {
    const { marks, raised, held, logs } = marksOn(undefined, 'e1');
    marks.planned('t/a', 10_000);
    marks.start(0, 0);
    marks.progressed(11_000);
    await marks.writeProgress(0, 'e1');
    expect(raised).toEqual([]);
    await marks.flush(0);
    await marks.writeProgress(0, undefined);
    expect(raised).toEqual([]);
    await marks.writeProgress(0, 'e1');
    marks.progressed(12_000);
    await marks.writeProgress(500, 'e1');
    expect(raised).toEqual([{ value: 11_000, tag: 'e1' }]);
    held.ok = false;
    await marks.writeProgress(1000, 'e1');
    await marks.writeProgress(2000, 'e1');
    held.ok = true;
    await marks.writeProgress(3000, 'e2');
    // Nothing new to write; a final write goes out at once.
    await marks.writeProgress(4000, 'e2');
    marks.progressed(13_000);
    await marks.writeProgress(4100, 'e2', true);
    expect(raised.map((mark) => `${mark.value} ${mark.tag}`)).toEqual([
      '11000 e1',
      '12000 e1',
      '12000 e1',
      '12000 e2',
      '13000 e2',
    ]);
    expect(logs.map((line) => line['level'])).toEqual([40, 30]);
  });
});

/** Empties one of the test's own Redis servers. */
async function flushed(url: string): Promise<void> {
  const connection = new Redis(url);
  await connection.flushall();
  connection.disconnect();
}
