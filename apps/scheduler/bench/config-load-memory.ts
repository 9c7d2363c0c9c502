/**
 * How much memory loading a big config leaves behind (not part of `npm run bench:scheduler`):
 * generates one file of N schedules (default 10,000), loads it with `loadConfig`, collects
 * garbage, and prints the heap in use and the process RSS.
 *
 *   node --expose-gc --conditions=@tickwarden/source apps/scheduler/bench/config-load-memory.ts [N]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '@tickwarden/config';

const count = Number(process.argv[2] ?? 10_000);
const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-config-memory-'));
const lines = ['team: bench', 'schedules:'];
for (let i = 0; i < count; i++)
  lines.push(
    `  - name: s${i}`,
    '    cron: "0 * * * * *"',
    '    handler: { kind: command, argv: ["true"] }',
    '    overlap: allow',
  );
writeFileSync(path.join(dir, 'bench.yaml'), `${lines.join('\n')}\n`);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
const mb = (bytes: number) => (bytes / 1e6).toFixed(0);
gc();
const before = process.memoryUsage();
const loaded = await loadConfig(dir);
gc();
const after = process.memoryUsage();
rmSync(dir, { recursive: true, force: true });
if (!loaded.ok) throw new Error(`config invalid: ${loaded.errors.length} error(s)`);
process.stdout.write(
  `${loaded.config.schedules.length} schedules: heap used ${mb(before.heapUsed)} -> ${mb(after.heapUsed)} MB, RSS ${mb(before.rss)} -> ${mb(after.rss)} MB\n`,
);
