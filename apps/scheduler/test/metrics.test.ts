import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { configHash } from '@tickwarden/runtime';
import { loadConfig } from '@tickwarden/config';
import { startAppProcess, startRedisNodes, waitUntil, type ManagedProcess, type RedisNodes } from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchedulerMetrics } from '../src/metrics.ts';
import { DEFAULT_CONTEST_LEAD_MS } from '@tickwarden/config';
import { longestTickIntervalMs, SchedulePeriods, tickIntervalWalk } from '../src/schedule-period.ts';

const HOUR = 3_600_000;
const NOW = Date.parse('2025-03-05T12:00:00Z');

/** The value of one series in a Prometheus text exposition, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('schedule periods', () => {
  it.each([
    ['* * * * * *', 'UTC', 1000],
    ['17 3 * * *', 'UTC', 24 * HOUR],
    ['5 * * * *', 'UTC', HOUR],
    ['0 */4 * * *', 'UTC', 4 * HOUR],
    // weekdays: the weekend
    ['0 9 * * 1-5', 'UTC', 72 * HOUR],
    // office hours, every 5 minutes: from Friday 17:55 to Monday 09:00 (Berlin)
    ['*/5 9-17 * * 1-5', 'Europe/Berlin', 63 * HOUR + 5 * 60_000],
    // uneven within the hour: 1, 58 and 1 minutes
    ['0,1,59 * * * *', 'UTC', 58 * 60_000],
    // monthly and yearly: at least 3 intervals, however long
    ['0 0 1 * *', 'UTC', 31 * 24 * HOUR],
    ['0 0 1 1 *', 'UTC', 366 * 24 * HOUR],
    // the first week of each month: the rest of it
    ['0 9 1-7 * *', 'UTC', 25 * 24 * HOUR],
  ])('%s (%s): the longest interval between two ticks ahead', async (cron, timezone, expected) => {
    const periods = new SchedulePeriods(() => NOW);
    expect(periods.get(cron, timezone)).toBeUndefined();
    await periods.idle();
    expect(periods.get(cron, timezone)).toBe(expected);
  });

  it('a pattern with fewer than two ticks left has none; the walk is bounded', () => {
    expect(
      longestTickIntervalMs({ next: (afterMs) => (afterMs < 10 ? 10 : undefined), previous: () => undefined }, 0),
    ).toBeUndefined();
    let calls = 0;
    const everyMs = {
      next: (afterMs: number) => (calls++, Math.floor(afterMs) + 1),
      previous: (beforeMs: number) => (calls++, Math.ceil(beforeMs) - 1),
    };
    expect(longestTickIntervalMs(everyMs, 0)).toBe(1);
    expect(calls).toBeLessThanOrEqual(2_002);
  });

  it('walks one calendar call at a time, so a dense pattern spreads over turns of the event loop', async () => {
    let calls = 0;
    const everyMinute = {
      next: (afterMs: number) => (calls++, (Math.floor(afterMs / 60_000) + 1) * 60_000),
      previous: (beforeMs: number) => (calls++, (Math.ceil(beforeMs / 60_000) - 1) * 60_000),
    };
    const walk = tickIntervalWalk(everyMinute, 0);
    let yields = 0;
    let step = walk.next();
    for (; !step.done; step = walk.next()) yields++;
    expect(step.value).toBe(60_000);
    // The first call comes before the first yield; every other after one.
    expect(yields).toBe(calls - 1);
    expect(calls).toBeGreaterThan(500);

    // Every second over 8 days: hundreds of croner calls, far more than one 5 ms slice holds.
    const periods = new SchedulePeriods(() => NOW);
    let turns = 0;
    let counting = true;
    const count = (): void => {
      turns++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    periods.get('* * * * * *', 'UTC');
    await periods.idle();
    counting = false;
    expect(periods.get('* * * * * *', 'UTC')).toBe(1000);
    expect(turns).toBeGreaterThan(2);
  });

  it('drops a walk under way when no schedule uses its pattern any more', async () => {
    const periods = new SchedulePeriods(() => NOW);
    await periods.retainOnly([{ cron: '* * * * * *', timezone: 'UTC' }]);
    await new Promise((resolve) => setImmediate(resolve));
    await periods.retainOnly([{ cron: '0 2 * * *', timezone: 'UTC' }]);
    await periods.idle();
    expect(periods.get('0 2 * * *', 'UTC')).toBe(24 * HOUR);
    expect(periods.get('* * * * * *', 'UTC')).toBeUndefined();
  });

  it('is computed again from the current time once a day old; patterns no schedule uses are dropped', async () => {
    let now = Date.parse('2025-01-06T12:00:00Z'); // a Monday: weekdays show their weekend
    const periods = new SchedulePeriods(() => now);
    await periods.retainOnly([{ cron: '0 9 * * 1-5', timezone: 'UTC' }]);
    await periods.idle();
    expect(periods.get('0 9 * * 1-5', 'UTC')).toBe(72 * HOUR);
    now += 25 * HOUR;
    periods.get('0 9 * * 1-5', 'UTC');
    await periods.idle();
    expect(periods.get('0 9 * * 1-5', 'UTC')).toBe(72 * HOUR);
    await periods.retainOnly([]);
    expect(periods.get('0 9 * * 1-5', 'UTC')).toBeUndefined();
  });
});

describe('SchedulerMetrics per schedule', () => {
  const schedules = [
    { id: 'payments/nightly', cron: '0 2 * * *', timezone: 'UTC' },
    { id: 'reporting/hourly', cron: '0 * * * *', timezone: 'UTC' },
  ];
  const event = (
    scheduleId: string,
    outcome: 'enqueued' | 'recovered' | 'skipped-paused' | 'missed',
    tickMs: number,
    extra: { reason?: string; recorded?: boolean } = {},
  ) => ({
    scheduleId,
    outcome,
    tickMs,
    lagMs: 5,
    reason: extra.reason,
    recorded: extra.recorded ?? true,
  });

  it('counts recorded outcomes by team, schedule, outcome (and reason when missed), keeps the newest tick and its outcome, and the period', async () => {
    const metrics = new SchedulerMetrics({ now: () => NOW });
    await metrics.setSchedules(schedules);
    metrics.recordOutcome(event('payments/nightly', 'enqueued', NOW - 2 * 24 * HOUR));
    metrics.recordOutcome(event('payments/nightly', 'missed', NOW - 24 * HOUR, { reason: 'no-lock-quorum' }));
    metrics.recordOutcome(event('payments/nightly', 'missed', NOW - 24 * HOUR + 1000, { reason: 'something new' }));
    // another replica's record stands: counted there, not here
    metrics.recordOutcome(event('payments/nightly', 'enqueued', NOW - 1000, { recorded: false }));
    // an older tick recorded late does not move the newest one back
    metrics.recordOutcome(event('payments/nightly', 'enqueued', NOW - 3 * 24 * HOUR));
    // a schedule not configured (removed while its tick was open): the totals only
    metrics.recordOutcome(event('gone/old', 'missed', NOW - 1000, { reason: 'schedule-removed' }));
    await metrics.periodsComputed();
    const text = await metrics.exposition.metrics();
    const nightly = 'team="payments",schedule="payments/nightly"';
    expect(sample(text, `tickwarden_schedule_ticks_total{${nightly},outcome="enqueued"}`)).toBe(2);
    expect(sample(text, `tickwarden_schedule_ticks_total{${nightly},outcome="missed",reason="no-lock-quorum"}`)).toBe(
      1,
    );
    expect(sample(text, `tickwarden_schedule_ticks_total{${nightly},outcome="missed",reason="other"}`)).toBe(1);
    expect(text).not.toContain('gone/old');
    expect(sample(text, 'tickwarden_ticks_total{outcome="missed"}')).toBe(3);
    expect(sample(text, 'tickwarden_ticks_total{outcome="enqueued"}')).toBe(2);
    // one last-tick series per schedule: the newest tick's outcome
    expect(text.match(/^tickwarden_schedule_last_tick_timestamp_seconds\{/gm)).toHaveLength(1);
    expect(sample(text, `tickwarden_schedule_last_tick_timestamp_seconds{${nightly},outcome="missed"}`)).toBe(
      (NOW - 24 * HOUR + 1000) / 1000,
    );
    expect(sample(text, `tickwarden_schedule_period_seconds{${nightly}}`)).toBe(24 * 3600);
    expect(sample(text, 'tickwarden_schedule_period_seconds{team="reporting",schedule="reporting/hourly"}')).toBe(3600);

    metrics.recordOutcome(event('payments/nightly', 'skipped-paused', NOW));
    expect(
      sample(
        await metrics.exposition.metrics(),
        `tickwarden_schedule_last_tick_timestamp_seconds{${nightly},outcome="skipped-paused"}`,
      ),
    ).toBe(NOW / 1000);
    expect(
      (await metrics.exposition.metrics()).match(/^tickwarden_schedule_last_tick_timestamp_seconds\{/gm),
    ).toHaveLength(1);
  });

  it('escapes a backslash, a quote and a newline in a label value, and writes other values as they are', async () => {
    const metrics = new SchedulerMetrics({ now: () => NOW });
    await metrics.setSchedules([{ id: 'a\\b/"q"\nz', cron: '0 * * * *', timezone: 'UTC' }]);
    metrics.recordOutcome(event('a\\b/"q"\nz', 'enqueued', NOW));
    const text = await metrics.exposition.metrics();
    expect(
      sample(text, 'tickwarden_schedule_ticks_total{team="a\\\\b",schedule="a\\\\b/\\"q\\"\\nz",outcome="enqueued"}'),
    ).toBe(1);
  });

  it('drops every series of a schedule that leaves the config', async () => {
    const metrics = new SchedulerMetrics({ now: () => NOW });
    await metrics.setSchedules(schedules);
    metrics.recordOutcome(event('payments/nightly', 'enqueued', NOW));
    metrics.recordOutcome(event('payments/nightly', 'missed', NOW + 1000, { reason: 'queue-unavailable' }));
    metrics.recordOutcome(event('reporting/hourly', 'enqueued', NOW));
    await metrics.periodsComputed();
    expect(await metrics.exposition.metrics()).toContain('payments/nightly');
    await metrics.setSchedules(schedules.slice(1));
    const text = await metrics.exposition.metrics();
    expect(text).not.toContain('payments/nightly');
    expect(
      sample(text, 'tickwarden_schedule_ticks_total{team="reporting",schedule="reporting/hourly",outcome="enqueued"}'),
    ).toBe(1);
  });
});

describe('the scheduler process: per-schedule metrics, build and config info, the bound port (real Redis)', () => {
  const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
  let locks: RedisNodes;
  let queue: RedisNodes;
  let dir: string;
  let replica: ManagedProcess | undefined;

  beforeAll(async () => {
    [locks, queue] = await Promise.all([
      startRedisNodes({ count: 3, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-scheduler-metrics-'));
  });
  afterAll(async () => {
    await replica?.stop('SIGKILL');
    await Promise.all([locks.close(), queue.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  const team = (names: string[]) =>
    `team: ops\nschedules:\n${names.map((name) => `  - { name: ${name}, cron: "* * * * * *", handler: { kind: command, argv: ["true"] }, overlap: allow, leaseTtl: 2s }\n`).join('')}`;

  it('logs the port it bound for port 0, and serves the outcomes of each schedule there; a rejected reload shows until a good one', async () => {
    writeFileSync(path.join(dir, 'ops.yaml'), team(['alpha']));
    replica = startAppProcess({
      role: 'scheduler',
      name: 'm0',
      main: MAIN,
      configDir: dir,
      lockNodes: locks.urls,
      queueRedis: queue.urls[0],
      replicaId: 'm0',
      httpPort: 0,
      logLevel: 'info',
    });
    const started = replica;
    await started.waitForLine((line) => line.includes('scheduler started'), 'start');
    const port = Number(started.records.find((record) => record['msg'] === 'http listening')?.['port']);
    expect(port).toBeGreaterThan(0);
    const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const alpha = 'team="ops",schedule="ops/alpha"';
    // The period is computed off the hot path: it may come after the first ticks.
    await waitUntil(async () => {
      const text = await scrape();
      return (
        (sample(text, `tickwarden_schedule_ticks_total{${alpha},outcome="enqueued"}`) ?? 0) >= 2 &&
        sample(text, `tickwarden_schedule_period_seconds{${alpha}}`) !== undefined
      );
    }, 'two ticks of ops/alpha enqueued, and its period');
    let text = await scrape();
    const lastTick = sample(text, `tickwarden_schedule_last_tick_timestamp_seconds{${alpha},outcome="enqueued"}`) ?? 0;
    // Its newest tick: enqueued up to the contest lead ahead.
    expect(Math.abs(lastTick - Date.now() / 1000)).toBeLessThan(DEFAULT_CONTEST_LEAD_MS / 1000 + 3);
    expect(Number.isInteger(lastTick)).toBe(true);
    expect(sample(text, `tickwarden_schedule_period_seconds{${alpha}}`)).toBe(1);
    expect(text).toMatch(/^tickwarden_build_info\{version="0\.0\.0",node="v\d+\.\d+\.\d+"\} 1$/m);
    const loaded = await loadConfig(dir);
    if (!loaded.ok) throw new Error('invalid test config');
    expect(sample(text, `tickwarden_config_info{hash="${await configHash(loaded.config)}"}`)).toBe(1);
    expect(sample(text, 'tickwarden_config_last_reload_successful')).toBe(1);
    expect(sample(text, 'tickwarden_lock_quorum_reachable')).toBe(1);

    // Rejected: the gauge shows it (and stays), the hash is still the running config's.
    writeFileSync(path.join(dir, 'ops.yaml'), 'team: ops\nschedules: [ { name: broken } ]\n');
    await started.waitForLine((line) => line.includes('config reload rejected'), 'the reload rejected');
    text = await scrape();
    expect(sample(text, 'tickwarden_config_last_reload_successful')).toBe(0);
    expect(sample(text, `tickwarden_config_info{hash="${await configHash(loaded.config)}"}`)).toBe(1);

    // Applied: alpha leaves the config and its series go, beta's come.
    writeFileSync(path.join(dir, 'ops.yaml'), team(['beta']));
    await started.waitForLine((line) => line.includes('"config reloaded"'), 'the reload applied');
    const beta = 'team="ops",schedule="ops/beta"';
    await waitUntil(
      async () => (sample(await scrape(), `tickwarden_schedule_ticks_total{${beta},outcome="enqueued"}`) ?? 0) >= 1,
      'a tick of ops/beta enqueued',
    );
    text = await scrape();
    expect(sample(text, 'tickwarden_config_last_reload_successful')).toBe(1);
    expect(text).not.toContain('ops/alpha');
    expect(text).not.toContain(await configHash(loaded.config));
    expect((await started.stop('SIGTERM')).code).toBe(0);
  });
});
