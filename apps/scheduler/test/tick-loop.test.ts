// The tick loop on a clock the test drives: no Redis, no real timers.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { MAX_TICKS_PER_WAKE, SCHEDULES_PER_SLICE, TickLoop, type Wake } from '../src/tick-loop.ts';
import { ManualClock, scheduleFixture } from './support.ts';

function loopOn(clock: ManualClock, contestLeadMs = 0) {
  const wakes: Wake[] = [];
  const logs: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  });
  const loop = new TickLoop({
    clock,
    logger: pino({ level: 'info' }, stream),
    maxWaitMs: 30_000,
    contestLeadMs,
    onWake: (wake) => wakes.push(wake),
  });
  const contested = () => wakes.flatMap((wake) => wake.due.map((tick) => tick.tickMs));
  const late = () => wakes.flatMap((wake) => wake.late.map((tick) => tick.tickMs));
  return { loop, wakes, logs, contested, late };
}

const START = Date.UTC(2026, 10, 27, 12, 0, 0, 500);

describe('TickLoop', () => {
  it('hands out each tick once, in order, with its window, the whole lead ahead of its due time whatever its overlap policy', () => {
    const clock = new ManualClock(START);
    const { loop, wakes, contested } = loopOn(clock, 2000);
    loop.setSchedules([
      scheduleFixture({ id: 'a/every-second', cron: '* * * * * *', leaseTtlMs: 3000 }),
      scheduleFixture({ id: 'b/every-second', cron: '* * * * * *', overlap: 'cancel-previous' }),
      scheduleFixture({ id: 'c/every-second', cron: '* * * * * *', overlap: 'allow' }),
    ]);
    loop.start();
    clock.advance(5000);
    const first = START + 500;
    expect(contested()).toEqual(
      [0, 1, 2, 3, 4, 5, 6].flatMap((s) => [first + s * 1000, first + s * 1000, first + s * 1000]),
    );
    const [tick] = wakes.flatMap((wake) => wake.due);
    expect(tick).toMatchObject({ jobId: `a/every-second@${first}`, startDeadlineMs: 13_000 });
    // Those due within the lead at the start at once, every later one the whole lead ahead.
    const leads = wakes.flatMap((wake) => wake.due.map((t) => t.dueMs - wake.nowMs));
    expect(leads.slice(0, 6)).toEqual([500, 500, 500, 1500, 1500, 1500]);
    expect(leads.slice(6).every((leadMs) => leadMs === 2000)).toBe(true);
  });

  it("a wake's progress: every tick due at or before it was taken up, never past the lead", async () => {
    const clock = new ManualClock(START);
    const { loop, wakes } = loopOn(clock, 2000);
    await loop.setSchedules([
      scheduleFixture({ id: 'a/every-10s', cron: '*/10 * * * * *' }),
      scheduleFixture({ id: 'b/every-second-jittered', cron: '* * * * * *', jitterMs: 900 }),
    ]);
    loop.start();
    clock.advance(30_000);
    const ids = ['a/every-10s', 'b/every-second-jittered'];
    for (const wake of wakes) {
      expect(wake.throughMs).toBeLessThanOrEqual(wake.nowMs + 2000);
      const taken = new Set(
        wakes.filter((w) => w.nowMs <= wake.nowMs).flatMap((w) => w.takenUp.map((t) => `${t.schedule.id}@${t.tickMs}`)),
      );
      for (let tickMs = START + 500; tickMs <= wake.throughMs; tickMs += 1000)
        for (const id of ids) {
          const tick = loop.tick(id, tickMs);
          if (tick && tick.tickMs % (id.startsWith('a/') ? 10_000 : 1000) === 0 && tick.dueMs <= wake.throughMs)
            expect(taken, `${id}@${tickMs} by ${wake.throughMs}`).toContain(`${id}@${tickMs}`);
        }
    }
    // Once the jittered schedule is gone, the 10 s one's next tick bounds it.
    await loop.setSchedules([scheduleFixture({ id: 'a/every-10s', cron: '*/10 * * * * *' })]);
    clock.advance(15_000);
    const last = wakes.at(-1) as Wake;
    const next10s = Math.ceil((last.nowMs + 2001) / 10_000) * 10_000;
    expect(last.throughMs).toBe(Math.min(next10s - 1, last.nowMs + 2000));
  });

  it('stopped: takes no tick up any more', () => {
    const clock = new ManualClock(START);
    const { loop, wakes } = loopOn(clock, 2000);
    loop.setSchedules([scheduleFixture({ id: 'a/every-5s', cron: '*/5 * * * * *' })]);
    loop.start();
    clock.advance(2500);
    expect(wakes.flatMap((wake) => wake.due)).toHaveLength(1);
    loop.stop();
    wakes.length = 0;
    clock.advance(20_000);
    expect(wakes).toEqual([]);
  });

  it(`takes up at most ${MAX_TICKS_PER_WAKE} ticks per wake, and the rest of those due in the wakes right after`, async () => {
    const clock = new ManualClock(START);
    const { loop, wakes, contested } = loopOn(clock);
    const count = 2 * MAX_TICKS_PER_WAKE + 5;
    await loop.setSchedules(
      Array.from({ length: count }, (_, i) => scheduleFixture({ id: `a/s${i}`, cron: '0 * * * * *' })),
    );
    loop.start();
    clock.advance(60_000);
    expect(wakes.map((wake) => wake.due.length).filter((n) => n > 0)).toEqual([
      MAX_TICKS_PER_WAKE,
      MAX_TICKS_PER_WAKE,
      5,
    ]);
    const boundary = START - 500 + 60_000;
    expect(new Set(contested())).toEqual(new Set([boundary]));
    // A wake that left some of the boundary's ticks waiting has not taken up through the boundary.
    const busy = wakes.filter((wake) => wake.due.length > 0);
    expect(busy.map((wake) => wake.throughMs - boundary)).toEqual([-1, -1, (busy[2]?.nowMs ?? 0) - boundary]);
  });

  it(`plans a big config ${SCHEDULES_PER_SLICE} schedules at a time, the event loop free in between; a newer config takes over`, async () => {
    const clock = new ManualClock(START);
    const { loop } = loopOn(clock);
    const config = (cron: string) =>
      Array.from({ length: 3 * SCHEDULES_PER_SLICE }, (_, i) => scheduleFixture({ id: `a/s${i}`, cron }));
    const planned: number[] = [];
    const first = loop.setSchedules(config('0 * * * * *'), (change) => planned.push(change.planned.length));
    // Returned after its first slice, with nothing planned yet.
    const sum = () => planned.reduce((total, n) => total + n, 0);
    expect(sum()).toBe(0);
    expect(loop.planner('a/s0')).toBeUndefined();
    await first;
    expect(sum()).toBe(3 * SCHEDULES_PER_SLICE);
    expect(planned.filter((n) => n > 0).length).toBeGreaterThan(1);

    const older = loop.setSchedules(config('30 * * * * *'));
    const newer = loop.setSchedules(config('45 * * * * *'));
    await Promise.all([older, newer]);
    const crons = new Set(
      Array.from({ length: 3 * SCHEDULES_PER_SLICE }, (_, i) => loop.planner(`a/s${i}`)?.schedule.cron),
    );
    expect(crons).toEqual(new Set(['45 * * * * *']));
  });

  it('a wall clock stepped forward: logged, and the ticks skipped are late (recovery decides them), not contested', () => {
    const clock = new ManualClock(START);
    const { loop, logs, contested, late } = loopOn(clock);
    loop.setSchedules([scheduleFixture({ id: 'a/every-second', cron: '* * * * * *', leaseTtlMs: 3000 })]);
    loop.start();
    clock.advance(2000);
    clock.step(60_000);
    clock.advance(1000);
    expect(logs.find((log) => log['msg']?.toString().startsWith('wall clock jumped'))?.['jumpMs']).toBe(60_000);
    // Up to the late window behind the new time, ticks are still contested; the ones before are late.
    expect(late()).toHaveLength(50);
    expect(contested().slice(-11)).toEqual(Array.from({ length: 11 }, (_, i) => START - 500 + (53 + i) * 1000));
    expect(new Set([...contested(), ...late()]).size).toBe(contested().length + late().length);
  });

  it('a wall clock stepped back: logged, and nothing fires twice; ticks resume once wall time passes the last one planned', () => {
    const clock = new ManualClock(START);
    const { loop, logs, contested, late } = loopOn(clock);
    loop.setSchedules([scheduleFixture({ id: 'a/every-second', cron: '* * * * * *', leaseTtlMs: 3000 })]);
    loop.start();
    clock.advance(3000);
    const before = contested();
    clock.step(-60_000);
    clock.advance(30_000);
    expect(logs.find((log) => log['msg']?.toString().startsWith('wall clock jumped'))?.['jumpMs']).toBe(-60_000);
    expect(contested()).toEqual(before);
    clock.advance(33_000);
    expect(contested().length).toBeGreaterThan(before.length);
    expect(new Set(contested()).size).toBe(contested().length);
    expect(late()).toEqual([]);
  });
});
