/**
 * The memory of one scheduler replica at N schedules (not part of `npm run bench:scheduler`, and
 * much lighter): starts 3 lock Redis and a queue Redis, generates team files of at most
 * MAX_SCHEDULES_PER_FILE schedules each, builds the scheduler and runs
 * `apps/scheduler/dist/main.js` as its own process, compiled as the image runs it (LOG_LEVEL=info,
 * as in the benchmark; `--source` runs `src/main.ts` instead, with Node's type stripper), samples
 * its RSS from /proc every 250 ms and reads its V8 heap from /metrics. Prints the RSS once the
 * replica has started (config loaded, every schedule's first tick planned) and the peak and last
 * RSS over the run, which crosses at least one minute boundary.
 *
 *   node --conditions=@tickwarden/source apps/scheduler/bench/replica-memory.ts \
 *     [--schedules 10000] [--patterns mix|minute|second] [--seconds 75] [--node-flag=--optimize-for-size ...] [--source]
 *
 * `mix`: a realistic spread of patterns in 4 time zones (daily at many times, hourly, every few
 * minutes, a few per-minute; 4,703 distinct patterns at 10,000 schedules), so a few hundred ticks
 * fall in a minute. `minute`: every schedule `0 * * * * *`, so all of them are due at each
 * minute boundary and this single replica enqueues all of them (benchmark (c) shares them among 3).
 * `second`: every schedule `* * * * * *` (with `--schedules 1000`, benchmark (a) on one replica).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { MAX_SCHEDULES_PER_FILE } from '@tickwarden/config';
import { freePort, sleep, startAppProcess, startRedisNodes } from '@tickwarden/testkit';
import { compiledScheduler } from './compiled.ts';

const SAMPLE_MS = 250;
const ZONES = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo'];

const { values } = parseArgs({
  options: {
    schedules: { type: 'string', default: '10000' },
    patterns: { type: 'string', default: 'mix' },
    seconds: { type: 'string', default: '75' },
    'node-flag': { type: 'string', multiple: true, default: [] },
    source: { type: 'boolean', default: false },
  },
});
const count = Number(values.schedules);
const seconds = Number(values.seconds);
const nodeFlags = values['node-flag'];
const main = values.source ? fileURLToPath(new URL('../src/main.ts', import.meta.url)) : compiledScheduler();
const FIXED_PATTERNS: Record<string, string> = { minute: '0 * * * * *', second: '* * * * * *' };
if (values.patterns !== 'mix' && !(values.patterns in FIXED_PATTERNS))
  throw new Error(`--patterns: mix, minute or second, got ${values.patterns}`);

/** The i-th schedule's cron and time zone (spread by a multiplicative hash): 60 % daily, 20 % hourly, 15 % every few minutes, 5 % every minute at some second. */
function mixed(i: number): { cron: string; timezone: string } {
  const spread = Math.imul(i + 1, 2654435761) >>> 0;
  const timezone = ZONES[(spread >>> 20) % ZONES.length] as string;
  const kind = i % 20;
  if (kind < 12) return { cron: `${spread % 60} ${(spread >>> 8) % 24} * * *`, timezone };
  if (kind < 16) return { cron: `${spread % 60} * * * *`, timezone };
  if (kind < 19) return { cron: `*/${2 + ((spread >>> 8) % 29)} * * * *`, timezone };
  return { cron: `${spread % 60} * * * * *`, timezone };
}

/** The team file of schedules from..to-1 (files hold at most MAX_SCHEDULES_PER_FILE each, one team each). */
function configText(from: number, to: number): string {
  const lines = [`team: bench-${from}`, 'schedules:'];
  for (let i = from; i < to; i++) {
    const { cron, timezone } =
      values.patterns === 'mix' ? mixed(i) : { cron: FIXED_PATTERNS[values.patterns] as string, timezone: 'UTC' };
    lines.push(
      `  - name: s${i}`,
      `    cron: "${cron}"`,
      `    timezone: ${timezone}`,
      '    handler: { kind: command, argv: ["true"] }',
      '    overlap: allow',
    );
  }
  return `${lines.join('\n')}\n`;
}

/** CPU seconds (user + system) the process has used, from /proc (clock ticks of 10 ms). */
const cpuSeconds = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
};

/** Resident MB from /proc/PID/status: all, anonymous (heap, malloc) and file-backed (the node binary, libraries). */
function rss(pid: number): { rssMb: number; anonMb: number; fileMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mb = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) / 1024;
  return { rssMb: mb('VmRSS'), anonMb: mb('RssAnon'), fileMb: mb('RssFile') };
}

/** The replica's V8 heap and enqueued ticks, from its /metrics. */
async function metrics(port: number): Promise<{ heapUsedMb: number; heapTotalMb: number; enqueued: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? 0);
  return {
    heapUsedMb: value(/^nodejs_heap_size_used_bytes (\S+)/m) / 2 ** 20,
    heapTotalMb: value(/^nodejs_heap_size_total_bytes (\S+)/m) / 2 ** 20,
    enqueued: value(/^tickwarden_ticks_total\{outcome="enqueued"\} (\S+)/m),
  };
}

const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-replica-memory-'));
for (let from = 0; from < count; from += MAX_SCHEDULES_PER_FILE)
  writeFileSync(path.join(dir, `team-${from}.yaml`), configText(from, Math.min(count, from + MAX_SCHEDULES_PER_FILE)));
const [locks, queue] = await Promise.all([
  startRedisNodes({ count: 3, aof: false }),
  startRedisNodes({ count: 1, aof: false }),
]);
const port = await freePort();
const replica = startAppProcess({
  role: 'scheduler',
  name: 'replica',
  main,
  compiled: !values.source,
  nodeFlags,
  configDir: dir,
  lockNodes: locks.urls,
  queueRedis: queue.urls[0],
  replicaId: 'memory',
  httpPort: port,
  logLevel: 'info',
});
try {
  const pid = replica.pid as number;
  await replica.waitForLine((line) => line.includes('"http listening"'), 'start', 120_000);
  const startCpu = cpuSeconds(pid);
  const started = { ...rss(pid), ...(await metrics(port)) };
  const patterns = replica.records.find((record) => record['msg'] === 'scheduler started')?.['patterns'];
  let peak = { rssMb: started.rssMb, anonMb: started.anonMb, fileMb: started.fileMb };
  const cpuAtStart = cpuSeconds(pid);
  for (const end = Date.now() + seconds * 1000; Date.now() < end;) {
    await sleep(SAMPLE_MS);
    const now = rss(pid);
    if (now.rssMb > peak.rssMb) peak = now;
  }
  const cpuPct = ((cpuSeconds(pid) - cpuAtStart) / seconds) * 100;
  const last = { ...rss(pid), ...(await metrics(port)) };
  const mb = (value: number) => value.toFixed(0);
  process.stdout.write(
    [
      `${count} schedules (${values.patterns}: ${String(patterns)} distinct patterns), node flags: ${nodeFlags.join(' ') || 'none'}, ${values.source ? 'sources (type-stripped)' : 'compiled'}, Node ${process.version}`,
      `started (config loaded, first ticks planned, ${startCpu.toFixed(1)} s CPU): RSS ${mb(started.rssMb)} MB (anonymous ${mb(started.anonMb)}, file-backed ${mb(started.fileMb)}), V8 heap used ${mb(started.heapUsedMb)} / total ${mb(started.heapTotalMb)} MB`,
      `over the next ${seconds} s (${last.enqueued} ticks enqueued, ${cpuPct.toFixed(1)} % of a core): RSS peak ${mb(peak.rssMb)} MB (anonymous ${mb(peak.anonMb)}, file-backed ${mb(peak.fileMb)}), last ${mb(last.rssMb)} MB, V8 heap used ${mb(last.heapUsedMb)} / total ${mb(last.heapTotalMb)} MB`,
      '',
    ].join('\n'),
  );
} finally {
  await replica.stop();
  await Promise.all([locks.close(), queue.close()]);
  rmSync(dir, { recursive: true, force: true });
}
