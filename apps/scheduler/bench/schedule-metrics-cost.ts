/**
 * What the per-schedule metrics cost a replica at N schedules (default 100,000; not part of
 * `npm run bench:scheduler`): `setSchedules` (each reload), one `recordOutcome` per schedule (one
 * tick each), and one /metrics scrape (its time, size, and the longest the event loop waited).
 *
 *   node --optimize-for-size --conditions=@tickwarden/source apps/scheduler/bench/schedule-metrics-cost.ts [N]
 */
import { withLoopWatch } from '@tickwarden/testkit';
import { SchedulerMetrics } from '../src/metrics.ts';

const count = Number(process.argv[2] ?? 100_000);
const metrics = new SchedulerMetrics();
const schedules = Array.from({ length: count }, (_, i) => ({
  id: `team-${i % 10}/s${i}`,
  cron: '0 * * * * *',
  timezone: 'UTC',
}));
const ms = (from: number): string => `${Math.round(performance.now() - from)} ms`;

let started = performance.now();
await metrics.setSchedules(schedules);
const set = ms(started);
await metrics.periodsComputed();
started = performance.now();
for (const { id } of schedules)
  metrics.recordOutcome({
    outcome: 'enqueued',
    scheduleId: id,
    tickMs: Date.now(),
    lagMs: 5,
    reason: undefined,
    recorded: true,
  });
const perTickUs = (((performance.now() - started) / count) * 1000).toFixed(1);
started = performance.now();
const { result: text, longestWaitMs: longest } = await withLoopWatch(() => metrics.exposition.metrics());
const scrape = ms(started);
process.stdout.write(
  `${count} schedules: setSchedules ${set}; recordOutcome ${perTickUs} µs per tick; ` +
    `/metrics ${scrape}, ${(text.length / 1e6).toFixed(1)} MB, event loop held up to ${Math.round(longest)} ms\n`,
);
