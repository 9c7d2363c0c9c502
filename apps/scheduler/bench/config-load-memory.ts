/**
 * How much memory loading a big config leaves behind (not part of `npm run bench:scheduler`):
 * generates N schedules (default 10,000), loads them, collects garbage, and prints the heap in use
 * and the process RSS. By default one file of one pattern, loaded with `loadConfig` (the CLI's
 * loader); with `--off-thread`, team files of at most MAX_SCHEDULES_PER_FILE, in 4 time zones and
 * a spread of daily patterns, loaded with `loadConfigOffThread` (the replicas' and workers').
 *
 *   node --expose-gc --conditions=@tickwarden/source apps/scheduler/bench/config-load-memory.ts [N] [--off-thread]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, loadConfigOffThread, MAX_SCHEDULES_PER_FILE } from '@tickwarden/config';

const offThread = process.argv.includes('--off-thread');
const count = Number(process.argv.slice(2).find((arg) => !arg.startsWith('--')) ?? 10_000);
if (!Number.isInteger(count) || count < 1) throw new Error(`N: a positive whole number, got ${process.argv[2]}`);
const ZONES = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo'];
const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-config-memory-'));
const perFile = offThread ? MAX_SCHEDULES_PER_FILE : count;
for (let from = 0; from < count; from += perFile) {
  const lines = [`team: bench-${from}`, 'schedules:'];
  for (let i = from; i < Math.min(count, from + perFile); i++) {
    const spread = Math.imul(i + 1, 2654435761) >>> 0;
    lines.push(
      `  - name: s${i}`,
      offThread ? `    cron: "${spread % 60} ${(spread >>> 8) % 24} * * *"` : '    cron: "0 * * * * *"',
      ...(offThread ? [`    timezone: ${ZONES[(spread >>> 20) % ZONES.length]}`] : []),
      '    handler: { kind: command, argv: ["true"] }',
      '    overlap: allow',
    );
  }
  writeFileSync(path.join(dir, `team-${from}.yaml`), `${lines.join('\n')}\n`);
}
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
const mb = (bytes: number) => (bytes / 1e6).toFixed(0);
gc();
const before = process.memoryUsage();
const loaded = await (offThread ? loadConfigOffThread(dir) : loadConfig(dir));
gc();
const after = process.memoryUsage();
rmSync(dir, { recursive: true, force: true });
if (!loaded.ok) throw new Error(`config invalid: ${JSON.stringify(loaded.errors.slice(0, 2))}`);
process.stdout.write(
  `${loaded.config.schedules.length} schedules: heap used ${mb(before.heapUsed)} -> ${mb(after.heapUsed)} MB, RSS ${mb(before.rss)} -> ${mb(after.rss)} MB\n`,
);
