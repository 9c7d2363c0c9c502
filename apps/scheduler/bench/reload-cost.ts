/**
 * What a reload of N schedules (default 100,000, in team files of 10,000) costs one replica's
 * event loop, step by step, without Redis (not part of `npm run bench:scheduler`): the load off
 * the event loop (`loadConfigOffThread`, given the config in force as a replica's reload is), the
 * tick loop's `setSchedules`, the per-schedule metrics and the config hash, three times: the first
 * load plans every schedule; a reload after a comment was added to one file (as benchmark (c)
 * does) and one with no file changed find every schedule unchanged. For each step: its time, the CPU time of every thread of the process (the worker's
 * included; on a busy machine it varies less than the time), and the longest the event loop waited
 * for a 1 ms timer.
 *
 *   node --optimize-for-size --conditions=@tickwarden/source apps/scheduler/bench/reload-cost.ts [N]
 */
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfigOffThread, MAX_SCHEDULES_PER_FILE, type TickwardenConfig } from '@tickwarden/config';
import { systemClock } from '@tickwarden/redlock';
import { configHash } from '@tickwarden/runtime';
import { withLoopWatch } from '@tickwarden/testkit';
import { pino } from 'pino';
import { SchedulerMetrics } from '../src/metrics.ts';
import { TickLoop } from '../src/tick-loop.ts';

const count = Number(process.argv[2] ?? 100_000);
const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-reload-cost-'));
for (let from = 0; from < count; from += MAX_SCHEDULES_PER_FILE) {
  const lines = [`team: team-${from}`, 'schedules:'];
  for (let i = from; i < Math.min(count, from + MAX_SCHEDULES_PER_FILE); i++)
    lines.push(`  - name: s${i}`, '    cron: "0 * * * * *"', '    handler: { kind: command, argv: ["true"] }');
  writeFileSync(path.join(dir, `team-${from}.yaml`), `${lines.join('\n')}\n`);
}

async function step<T>(name: string, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const { result, longestWaitMs } = await withLoopWatch(work);
  const { user, system } = process.cpuUsage(cpuBefore);
  process.stdout.write(
    `  ${name}: ${Math.round(performance.now() - started)} ms (CPU ${Math.round((user + system) / 1000)} ms), event loop held up to ${Math.round(longestWaitMs)} ms\n`,
  );
  return result;
}

const loop = new TickLoop({
  clock: systemClock,
  logger: pino({ level: 'silent' }),
  maxWaitMs: 30_000,
  contestLeadMs: 9500,
  onWake: () => undefined,
});
const metrics = new SchedulerMetrics();
try {
  let previous: TickwardenConfig | undefined;
  for (const reload of [
    'first load (every schedule new)',
    'reload, every file unchanged but the first (a comment added to it)',
    'reload, every file unchanged',
  ]) {
    process.stdout.write(`${count} schedules, ${reload}:\n`);
    if (previous && reload.includes('comment')) appendFileSync(path.join(dir, 'team-0.yaml'), '# edited\n');
    const loaded = await step('load off the event loop', () => loadConfigOffThread(dir, { previous }));
    if (!loaded.ok) throw new Error(`config invalid: ${loaded.errors.length} error(s)`);
    previous = loaded.config;
    const { schedules } = loaded.config;
    await step('tick loop setSchedules', () => loop.setSchedules(schedules));
    await step('per-schedule metrics', () => metrics.setSchedules(schedules));
    await step('config hash', () => configHash(loaded.config));
    const { rss, heapUsed } = process.memoryUsage();
    process.stdout.write(`  RSS ${Math.round(rss / 1e6)} MB, heap used ${Math.round(heapUsed / 1e6)} MB\n`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
