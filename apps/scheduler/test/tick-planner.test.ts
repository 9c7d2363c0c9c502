import { describe, expect, it } from 'vitest';
import { TickPlanner, type Schedule } from '../src/index.ts';
import { scheduleFixture } from './support.ts';

const schedule = (cron: string, timezone: string, jitterMs = 0): Schedule => scheduleFixture({ id: 'team/job', cron, timezone, jitterMs });

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

describe('TickPlanner (croner as a calculator)', () => {
  it('Europe/Berlin spring gap: 02:30 does not exist on 2026-03-29 and runs at the next valid time, 03:00 CEST', () => {
    const planner = new TickPlanner(schedule('30 2 * * *', 'Europe/Berlin'));
    const ticks = [Date.parse('2026-03-27T12:00:00Z')];
    for (let i = 0; i < 3; i++) ticks.push(planner.next(ticks.at(-1) as number) as number);
    expect(ticks.slice(1).map(iso)).toEqual(['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z']);
  });

  it('Europe/Berlin autumn overlap: 02:30 happens twice on 2026-10-25 and runs once', () => {
    const planner = new TickPlanner(schedule('30 2 * * *', 'Europe/Berlin'));
    const ticks: number[] = [];
    for (let t = planner.next(Date.parse('2026-10-24T12:00:00Z')); t !== undefined && t < Date.parse('2026-10-26T00:00:00Z'); t = planner.next(t)) ticks.push(t);
    expect(ticks.map(iso)).toEqual(['2026-10-25T00:30:00.000Z']);
  });

  it('6-field patterns tick every second; latestWithin finds the most recent tick of a window', () => {
    const planner = new TickPlanner(schedule('* * * * * *', 'UTC'));
    expect(iso(planner.next(Date.parse('2026-01-01T00:00:00.500Z')))).toBe('2026-01-01T00:00:01.000Z');
    expect(iso(planner.latestWithin(Date.parse('2026-01-01T00:00:09.700Z'), 5000))).toBe('2026-01-01T00:00:09.000Z');
    expect(new TickPlanner(schedule('0 0 1 1 *', 'UTC')).latestWithin(Date.parse('2026-06-01T00:00:00Z'), 60_000)).toBeUndefined();
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
});
