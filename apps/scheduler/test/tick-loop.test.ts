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
    expect(new Set(contested())).toEqual(new Set([START - 500 + 60_000]));
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
