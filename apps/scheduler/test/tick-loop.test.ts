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
  it('hands out each tick once, in order, with its window; a skip tick whose previous run is due within the lead is contested when due', () => {
    const clock = new ManualClock(START);
    const { loop, wakes, contested } = loopOn(clock, 9500);
    // The lead is a third of the lease TTL, 2 s: more than the period, so each tick waits for its due time.
    loop.setSchedules([scheduleFixture({ id: 'a/every-second', cron: '* * * * * *', leaseTtlMs: 6000 })]);
    loop.start();
    clock.advance(5000);
    expect(contested()).toEqual([1, 2, 3, 4, 5].map((s) => START - 500 + s * 1000));
    const [first] = wakes.flatMap((wake) => wake.due);
    expect(first).toMatchObject({ jobId: `a/every-second@${START + 500}`, startDeadlineMs: 16_000, ahead: false });
    expect(wakes.every((wake) => wake.due.every((tick) => wake.nowMs >= tick.dueMs))).toBe(true);
  });

  it('a skip schedule whose previous run is due before the lead is contested the whole lead ahead, with the tick before it', () => {
    const clock = new ManualClock(START);
    const { loop, wakes } = loopOn(clock, 2000);
    loop.setSchedules([
      scheduleFixture({ id: 'a/every-5s', cron: '*/5 * * * * *' }),
      scheduleFixture({ id: 'b/every-5s', cron: '*/5 * * * * *', overlap: 'allow' }),
    ]);
    loop.start();
    clock.advance(10_000);
    const due = wakes.flatMap((wake) => wake.due.map((tick) => ({ tick, leadMs: tick.dueMs - wake.nowMs })));
    expect(due.map(({ leadMs }) => leadMs)).toEqual([2000, 2000, 2000, 2000]);
    const first = START - 500 + 5000;
    expect(due.map(({ tick }) => [tick.schedule.id, tick.previous?.tickMs])).toEqual([
      ['a/every-5s', first - 5000],
      ['b/every-5s', undefined],
      ['a/every-5s', first],
      ['b/every-5s', undefined],
    ]);
  });

  it("a skip schedule's first tick taken up is contested ahead when its previous tick was due before the lead, as any other", () => {
    const clock = new ManualClock(START);
    const { loop, wakes } = loopOn(clock, 9500);
    loop.setSchedules([scheduleFixture({ id: 'a/minutely', cron: '0 * * * * *' })]);
    loop.start();
    clock.advance(60_000);
    const [first] = wakes.flatMap((wake) => wake.due);
    const due = START - 500 + 60_000;
    expect(first).toMatchObject({ tickMs: due, ahead: true });
    expect(wakes.find((wake) => wake.due.length > 0)?.nowMs).toBe(due - 9500);
  });

  it('stopped: takes no tick up, but hands a tick deferred to its due time out then, and is idle after', async () => {
    const clock = new ManualClock(START);
    const { loop, wakes } = loopOn(clock, 2000);
    loop.setSchedules(['a', 'b'].map((team) => scheduleFixture({ id: `${team}/every-5s`, cron: '*/5 * * * * *' })));
    loop.start();
    clock.advance(2500);
    const ahead = wakes.flatMap((wake) => wake.due);
    expect(ahead.map((tick) => [tick.schedule.id, tick.ahead])).toEqual([
      ['a/every-5s', true],
      ['b/every-5s', true],
    ]);
    const [deferred] = ahead;
    if (!deferred) throw new Error('no tick contested ahead');
    loop.againAtDue(deferred);
    loop.stop();
    expect(loop.deferred).toBe(1);
    let idle = false;
    void loop.idle().then(() => (idle = true));
    wakes.length = 0;
    clock.advance(20_000);
    await Promise.resolve();
    expect(wakes.map((wake) => wake.due.map((tick) => [tick.jobId, tick.ahead, wake.nowMs - tick.dueMs]))).toEqual([
      [[deferred.jobId, false, 0]],
    ]);
    expect(wakes.flatMap((wake) => wake.takenUp)).toEqual([]);
    expect([loop.deferred, idle]).toEqual([0, true]);
  });

  it('stopped: a tick deferred to a due time past the limit given is left to recovery, logged', async () => {
    const clock = new ManualClock(START);
    const { loop, wakes, logs } = loopOn(clock, 2000);
    loop.setSchedules([scheduleFixture({ id: 'a/every-5s', cron: '*/5 * * * * *' })]);
    loop.start();
    clock.advance(2500);
    const [deferred] = wakes.flatMap((wake) => wake.due);
    if (!deferred) throw new Error('no tick contested ahead');
    loop.againAtDue(deferred);
    loop.stop(deferred.dueMs - 1);
    expect(loop.deferred).toBe(0);
    await loop.idle();
    // Deferred after the stop (a contest in flight): the same limit.
    loop.againAtDue(deferred);
    expect(loop.deferred).toBe(0);
    wakes.length = 0;
    clock.advance(20_000);
    expect(wakes).toEqual([]);
    const left = logs.filter((log) => String(log['msg']).startsWith('stopping: ticks deferred'));
    expect(left.map((log) => log['ticks'])).toEqual([1, 1]);
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
