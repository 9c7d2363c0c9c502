import { Cron } from 'croner';
import { describe, expect, it, vi } from 'vitest';
import { TickPlanner, type Schedule } from '../src/index.ts';
import { CronCache, sharesYearTable } from '../src/tick-planner.ts';
import { scheduleFixture } from './support.ts';

const schedule = (cron: string, timezone: string, jitterMs = 0): Schedule =>
  scheduleFixture({ id: 'team/job', cron, timezone, jitterMs });

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** `latestWithin` the slow way: every tick of the window. */
function latestByWalking(planner: TickPlanner, atMs: number, windowMs: number): number | undefined {
  let latest: number | undefined;
  for (let tick = planner.next(atMs - windowMs - 1); tick !== undefined && tick <= atMs; tick = planner.next(tick))
    latest = tick;
  return latest;
}

/** `firstDue` the slow way: every tick from `atMs - jitter` on. */
function firstDueByWalking(planner: TickPlanner, atMs: number): number | undefined {
  let tick = planner.next(atMs - planner.schedule.jitterMs - 1);
  while (tick !== undefined && planner.dueMs(tick) < atMs) tick = planner.next(tick);
  return tick;
}

/** How long `fn` takes, ms. */
function timed(fn: () => void): number {
  const started = performance.now();
  fn();
  return performance.now() - started;
}

describe('TickPlanner (croner as a calculator)', () => {
  it('Europe/Berlin spring gap: 02:30 does not exist on 2026-03-29 and runs at the next valid time, 03:00 CEST', () => {
    const planner = new TickPlanner(schedule('30 2 * * *', 'Europe/Berlin'));
    const ticks = [Date.parse('2026-03-27T12:00:00Z')];
    for (let i = 0; i < 3; i++) ticks.push(planner.next(ticks.at(-1) as number) as number);
    expect(ticks.slice(1).map(iso)).toEqual([
      '2026-03-28T01:30:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-30T00:30:00.000Z',
    ]);
  });

  it('Europe/Berlin autumn overlap: 02:30 happens twice on 2026-10-25 and runs once', () => {
    const planner = new TickPlanner(schedule('30 2 * * *', 'Europe/Berlin'));
    const ticks: number[] = [];
    for (
      let t = planner.next(Date.parse('2026-10-24T12:00:00Z'));
      t !== undefined && t < Date.parse('2026-10-26T00:00:00Z');
      t = planner.next(t)
    )
      ticks.push(t);
    expect(ticks.map(iso)).toEqual(['2026-10-25T00:30:00.000Z']);
  });

  it('6-field patterns tick every second; latestWithin finds the most recent tick of a window', () => {
    const planner = new TickPlanner(schedule('* * * * * *', 'UTC'));
    expect(iso(planner.next(Date.parse('2026-01-01T00:00:00.500Z')))).toBe('2026-01-01T00:00:01.000Z');
    expect(iso(planner.latestWithin(Date.parse('2026-01-01T00:00:09.700Z'), 5000))).toBe('2026-01-01T00:00:09.000Z');
    expect(
      new TickPlanner(schedule('0 0 1 1 *', 'UTC')).latestWithin(Date.parse('2026-06-01T00:00:00Z'), 60_000),
    ).toBeUndefined();
  });

  it('jitter is deterministic per schedule and tick, within [0, jitter]', () => {
    const a = new TickPlanner(schedule('* * * * *', 'UTC', 10_000));
    const b = new TickPlanner(schedule('* * * * *', 'UTC', 10_000));
    const tick = Date.parse('2026-01-01T00:01:00Z');
    expect(a.dueMs(tick)).toBe(b.dueMs(tick));
    const offsets = Array.from({ length: 50 }, (_, i) => a.dueMs(tick + i * 60_000) - (tick + i * 60_000));
    expect(offsets.every((o) => o >= 0 && o <= 10_000)).toBe(true);
    expect(new Set(offsets).size).toBeGreaterThan(10);
  });

  it('jitter never delays a run past the next tick, so runs stay in tick order', () => {
    const planner = new TickPlanner(schedule('* * * * * *', 'UTC', 3_600_000));
    const ticks = planner.ticksBetween(Date.parse('2026-01-01T00:00:00Z'), Number.POSITIVE_INFINITY, 200);
    const offsets = ticks.map((tick) => planner.dueMs(tick) - tick);
    expect(offsets.every((offset) => offset >= 0 && offset <= 1000)).toBe(true);
    expect(new Set(offsets).size).toBeGreaterThan(50);
  });

  it('firstDue: the first tick whose run is not due yet, which with jitter may lie in the past; ticksBetween lists a gap', () => {
    const start = Date.parse('2026-01-01T00:00:00.000Z');
    let inThePast = 0;
    for (const [cron, jitterMs, stepMs] of [
      ['*/10 * * * * *', 8000, 1_319],
      ['* * * * * *', 60_000, 30_011],
      ['0,5 * * * *', 600_000, 47_917],
    ] as const) {
      const planner = new TickPlanner(schedule(cron, 'UTC', jitterMs));
      for (let now = start; now < start + 3_600_000; now += stepMs) {
        const first = planner.firstDue(now);
        expect(first, `${cron} at ${iso(now)}`).toBe(firstDueByWalking(planner, now));
        if (first !== undefined && first < now) inThePast++;
      }
    }
    expect(inThePast).toBeGreaterThan(20);
    const planner = new TickPlanner(schedule('* * * * * *', 'UTC'));
    const after = start;
    expect(planner.ticksBetween(after, after + 4000, 100).map(iso)).toEqual([
      '2026-01-01T00:00:01.000Z',
      '2026-01-01T00:00:02.000Z',
      '2026-01-01T00:00:03.000Z',
    ]);
    expect(planner.ticksBetween(after, after + 4000, 2)).toHaveLength(2);
    expect(iso(planner.previous(after + 4000))).toBe('2026-01-01T00:00:03.000Z');
  });

  it('latestWithin finds what walking the window finds, across DST changes and sparse patterns', () => {
    const patterns: [string, string][] = [
      ['30 2 * * *', 'Europe/Berlin'],
      ['*/7 * * * *', 'UTC'],
      ['0 9 * * MON-FRI', 'America/New_York'],
      ['0 0 L * *', 'Asia/Tokyo'],
    ];
    for (const [cron, timezone] of patterns) {
      const planner = new TickPlanner(schedule(cron, timezone));
      for (let at = Date.parse('2026-03-27T00:00:00Z'); at < Date.parse('2026-04-02T00:00:00Z'); at += 7_199_993) {
        for (const windowMs of [0, 7000, 3_600_000, 86_400_000])
          expect(planner.latestWithin(at, windowMs), `${cron} ${timezone} at ${iso(at)} within ${windowMs}`).toBe(
            latestByWalking(planner, at, windowMs),
          );
      }
    }
    const exact = new TickPlanner(schedule('* * * * * *', 'UTC'));
    expect(iso(exact.latestWithin(Date.parse('2026-01-01T00:00:09.000Z'), 0))).toBe('2026-01-01T00:00:09.000Z');
  });

  it('catch-up and jitter take the same time whatever their window: a per-second cron with a 24h catch-up and a 1h jitter', () => {
    const now = Date.parse('2026-01-01T12:00:00.500Z');
    let latest: number | undefined;
    let first: number | undefined;
    // A call takes about a millisecond; walking the jitter window's 3,600 ticks takes hundreds. The
    // fastest of three calls, each on fresh planners (nothing remembered): a loaded machine can stall one.
    const fastest = (call: () => number) => {
      let ms = Infinity;
      for (let i = 0; i < 3 && ms >= 50; i++) ms = Math.min(ms, call());
      return ms;
    };
    expect(
      fastest(() => {
        const catchUp = new TickPlanner(schedule('* * * * * *', 'UTC'));
        return timed(() => (latest = catchUp.latestWithin(now, 86_400_000)));
      }),
    ).toBeLessThan(50);
    expect(
      fastest(() => {
        const jittered = new TickPlanner(schedule('* * * * * *', 'UTC', 3_600_000));
        return timed(() => (first = jittered.firstDue(now)));
      }),
    ).toBeLessThan(50);
    expect(iso(latest)).toBe('2026-01-01T12:00:00.000Z');
    expect(first === Date.parse('2026-01-01T12:00:00.000Z') || first === Date.parse('2026-01-01T12:00:01.000Z')).toBe(
      true,
    );
  });
});

describe('CronCache', () => {
  const patterns: [string, string][] = [
    ['30 2 * * *', 'Europe/Berlin'],
    ['*/7 * * * * *', 'UTC'],
    ['0 9 * * MON-FRI', 'America/New_York'],
    ['0 0 L * *', 'Asia/Tokyo'],
    ['15 3 29 2 *', 'UTC'],
    ['@hourly', 'Europe/Berlin'],
  ];

  it('shares one year table between patterns (croner 11 gives each its own 80 KB one) and answers exactly as a fresh Cron', () => {
    const crons = new CronCache();
    for (const [pattern, timezone] of patterns) {
      const shared = crons.get(pattern, timezone);
      expect(sharesYearTable(shared.cron), pattern).toBe(true);
      const fresh = new Cron(pattern, { timezone, paused: true });
      let at = new Date('2026-01-01T00:00:00Z');
      for (let i = 0; i < 50; i++) {
        const expected = fresh.nextRun(at);
        expect(shared.cron.nextRun(at)?.getTime(), `${pattern} after ${at.toISOString()}`).toBe(expected?.getTime());
        if (!expected) break;
        at = expected;
      }
    }
  });

  it('searches once per instant for the planners that share a pattern, and answers as a fresh Cron whatever the order', () => {
    const crons = new CronCache();
    const planners = ['a', 'b', 'c'].map(
      (id) =>
        new TickPlanner(scheduleFixture({ id: `team/${id}`, cron: '30 2 * * *', timezone: 'Europe/Berlin' }), crons),
    );
    const shared = crons.get('30 2 * * *', 'Europe/Berlin');
    const backward = vi.spyOn(shared.cron, 'previousRuns');
    const forward = vi.spyOn(shared.cron, 'nextRun');
    const fresh = new Cron('30 2 * * *', { timezone: 'Europe/Berlin', paused: true });
    const instants = ['2026-03-29T00:40:00Z', '2026-10-25T05:00:00Z', '2026-03-29T00:40:00Z'].map(Date.parse);
    for (const at of instants)
      for (const planner of planners) {
        expect(planner.previous(at)).toBe(fresh.previousRuns(1, new Date(at))[0]?.getTime());
        expect(planner.next(at)).toBe(fresh.nextRun(new Date(at))?.getTime());
      }
    expect(backward).toHaveBeenCalledTimes(instants.length);
    expect(forward).toHaveBeenCalledTimes(instants.length);
  });

  it('keeps one parsed pattern per pattern and time zone, and drops those no schedule uses any more', () => {
    const crons = new CronCache();
    const a = crons.get('0 * * * *', 'UTC');
    expect(crons.get('0 * * * *', 'UTC')).toBe(a);
    crons.get('0 * * * *', 'Europe/Berlin');
    crons.get('0 2 * * *', 'UTC');
    expect(crons.size).toBe(3);
    crons.retainOnly([
      { cron: '0 2 * * *', timezone: 'UTC' },
      { cron: '0 * * * *', timezone: 'Europe/Berlin' },
    ]);
    expect(crons.size).toBe(2);
    expect(crons.get('0 * * * *', 'UTC')).not.toBe(a);
    expect(crons.size).toBe(3);
    crons.retainOnly([{ cron: '0 2 * * *', timezone: 'UTC' }]);
    expect(crons.size).toBe(1);
  });
});

describe('TickPlanner.lastDueBy: the latest tick due at or before an instant, jitter included', () => {
  it('agrees with walking the ticks, for jittered and plain schedules', () => {
    for (const planner of [
      new TickPlanner(schedule('* * * * * *', 'UTC', 900)),
      new TickPlanner(schedule('*/5 * * * * *', 'Europe/Berlin', 4000)),
      new TickPlanner(schedule('0 * * * *', 'UTC')),
    ]) {
      const from = Date.parse('2026-03-29T00:00:00Z');
      for (let atMs = from; atMs < from + 20_000; atMs += 137) {
        let walked: number | undefined;
        for (let tick = planner.next(atMs - 3_600_001); tick !== undefined && tick <= atMs; tick = planner.next(tick))
          if (planner.dueMs(tick) <= atMs) walked = tick;
        expect(planner.lastDueBy(atMs), `${planner.schedule.cron} at ${iso(atMs)}`).toBe(walked);
      }
    }
  });
});
