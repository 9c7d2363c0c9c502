/**
 * `npm run bench:scheduler`: Tickwarden (scheduler replicas contesting every
 * tick through a Redlock lease, the winner enqueues into BullMQ) next to
 * BullMQ's own Job Schedulers (`upsertJobScheduler`) as the peer, on this
 * machine in one run, with the same consumer (one BullMQ Worker process,
 * concurrency 100, that only records each job's tick and start time).
 *
 * (a) 1,000 per-second schedules, 3 replicas / producers, a 60 s window;
 * (b) the same while the 3 restart one after another (rolling deploy);
 * (c) 100,000 schedules due at the same minute boundary, 3 replicas / producers.
 *
 * A script, not a test: it measures and reports, it asserts nothing (targets
 * are printed as MET / MISSED). Results go to `bench-results/scheduler.json`
 * and `bench-results/scheduler.md` at the repo root. Every process it starts
 * is killed by PID, every Redis stopped, also on error or Ctrl-C.
 *
 * Knobs (for quick runs; the defaults are the benchmark): BENCH_WINDOW_S (60), BENCH_REPLICAS (3),
 * BENCH_BOUNDARIES (2), BENCH_SCENARIOS (`ab,c`), BENCH_SYSTEMS (`tickwarden,bullmq`);
 * BENCH_LOG_DIR=<dir> keeps every process's output there; BENCH_TW_LOG_LEVEL (`info`) is the replicas' LOG_LEVEL;
 * BENCH_TW_NODE_FLAGS (default the deployed `PROCESS_NODE_FLAGS.scheduler` of @tickwarden/runtime; empty for none) are the replicas' node flags;
 * BENCH_STALL_S=<s> stops every replica / producer (SIGSTOP) for that long 10 s into (a)'s window: does the system catch up?
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MAX_SCHEDULES_PER_FILE } from '@tickwarden/config';
import { queueName } from '@tickwarden/contracts';
import { PROCESS_NODE_FLAGS } from '@tickwarden/runtime';
import { DEFAULT_CONTEST_LEAD_MS } from '@tickwarden/config';
import {
  freePort,
  ManagedProcess,
  sleep,
  startAppProcess,
  startRedisNodes,
  type RedisNode,
  type RedisNodes,
} from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { compiledScheduler, strippedScript } from './compiled.ts';

// ---------------------------------------------------------------- settings

// A knob set to something the bench does not know stops it at once: a typo must not run another benchmark.
function badKnob(message: string): never {
  process.stderr.write(`scheduler bench: ${message}\n`);
  process.exit(2);
}

const envNumber = (name: string, fallback: number): number => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) badKnob(`${name}: expected a number above 0, got "${raw}"`);
  return value;
};

function envList<T extends string>(name: string, known: readonly T[]): T[] {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return [...known];
  const items = raw.split(',');
  const unknown = items.filter((item) => !known.includes(item as T));
  if (unknown.length > 0) badKnob(`${name}: unknown ${unknown.join(', ')} (known: ${known.join(', ')})`);
  return known.filter((item) => items.includes(item));
}

/** Scheduler replicas / BullMQ producers (BENCH_REPLICAS; the benchmark runs 3, and (a) again with 6: lock work must not grow with them). */
const REPLICAS = envNumber('BENCH_REPLICAS', 3);
const LOCK_NODES = 5;
const PER_SECOND_SCHEDULES = 1_000;
const PER_SECOND_PATTERN = '* * * * * *';
/** (c)'s schedules (BENCH_BURST_SCHEDULES), in team files of at most MAX_SCHEDULES_PER_FILE each. */
const BURST_SCHEDULES = envNumber('BENCH_BURST_SCHEDULES', 100_000);
const BURST_PATTERN = '0 * * * * *';
/**
 * From all replicas/producers ready to the window of (a): steady state. Tickwarden replicas that
 * start together contest every tick of their first contest lead at once (9,500 per replica at
 * 1,000 per-second schedules), which took several seconds here; the window starts after that.
 */
const WARMUP_MS = DEFAULT_CONTEST_LEAD_MS + 5000;
const WINDOW_S = envNumber('BENCH_WINDOW_S', 60);
/** Off unless set: a stall of every replica / producer in (a), to see the system catch up after it. */
const STALL_S = envNumber('BENCH_STALL_S', 0);
/** When in (a)'s window the stall starts, ms. */
const STALL_AT_MS = 10_000;
/** Pause after each replacement is ready, before the next restart. */
const ROLLING_PAUSE_MS = 10_000;
const BOUNDARIES = envNumber('BENCH_BOUNDARIES', 2);
const SCENARIOS = envList('BENCH_SCENARIOS', ['ab', 'c']);
const SAMPLE_MS = 1_000;
/** The replicas' LOG_LEVEL (the bench needs at least `info`; `debug` adds lost-race and the like to the logs BENCH_LOG_DIR keeps). */
const TW_LOG_LEVEL = process.env['BENCH_TW_LOG_LEVEL'] ?? 'info';
/** Node flags of the scheduler replicas (space-separated; empty: none); default the deployed ones (`PROCESS_NODE_FLAGS`). */
const TW_NODE_FLAGS = (process.env['BENCH_TW_NODE_FLAGS'] ?? PROCESS_NODE_FLAGS.scheduler.join(' '))
  .split(' ')
  .filter((flag) => flag !== '');
/** When set, every process's output is written there (`<phase>-<process>.log`) at the end of its phase. */
const LOG_DIR = process.env['BENCH_LOG_DIR'];
/** How long after a window the consumer may still bring in its ticks. */
const DRAIN_MS = 10_000;
/** After a burst boundary, how long to wait for all its jobs. */
const BURST_WAIT_MS = 20_000;
/** The whole run is cut off after this (cleanup included). */
const RUN_LIMIT_MS = 16 * 60_000;
const TEAM = 'bench';
const PEER_QUEUE = 'bench-peer';
const TW_QUEUE = queueName('default');

// Both systems' members run as plain JavaScript, as deployed (compiled.ts); the consumer, the same
// process for both, runs from its source.
const MAIN = compiledScheduler();
const CONSUMER = fileURLToPath(new URL('../../worker/bench/consumer.ts', import.meta.url));
const PRODUCER = strippedScript(fileURLToPath(new URL('./bullmq-producer.ts', import.meta.url)));
const ROOT = new URL('../../../', import.meta.url);

type System = 'tickwarden' | 'bullmq';
const SYSTEMS = envList('BENCH_SYSTEMS', ['tickwarden', 'bullmq'] as const);
const LABEL: Record<System, string> = { tickwarden: 'Tickwarden', bullmq: 'BullMQ 6.7.0 Job Schedulers' };

const scheduleName = (i: number): string => `s${String(i).padStart(5, '0')}`;
const noop = (): void => undefined;
const log = (message: string): void => {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 23)}] ${message}\n`);
};
const ceilTo = (ms: number, step: number): number => Math.ceil(ms / step) * step;
const sleepUntil = async (wallMs: number): Promise<void> => {
  const wait = wallMs - Date.now();
  if (wait > 0) await sleep(wait);
};

/** Every cleanup step, run in reverse order on exit, error or Ctrl-C. */
const closers = new Set<() => Promise<void>>();

// ---------------------------------------------------------------- processes and sampling

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

interface Sample {
  t: number;
  cpuS: number;
  rssMb: number;
}

/** CPU seconds (user + system) and RSS of a process, from /proc. */
function readProc(pid: number): { cpuS: number; rssMb: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const cpuS = (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
    const rss = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return { cpuS, rssMb: rss ? Number(rss[1]) / 1024 : Number.NaN };
  } catch {
    return undefined;
  }
}

/** A process the bench started: its output read incrementally, its CPU and RSS sampled. */
class Tracked {
  readonly name: string;
  readonly proc: ManagedProcess;
  readonly startedAt = Date.now();
  readyAt: number | undefined;
  termAt: number | undefined;
  exit: { code: number | null; signal: string | null; atMs: number } | undefined;
  readonly samples: Sample[] = [];
  cursor = 0;
  /** Tickwarden replicas: the port of their HTTP server (/metrics). */
  httpPort: number | undefined;

  /** Whether it exited without the bench asking it to. */
  get crashed(): boolean {
    return this.exit !== undefined && (this.termAt === undefined || this.exit.atMs < this.termAt);
  }

  constructor(name: string, proc: ManagedProcess) {
    this.name = name;
    this.proc = proc;
    void proc.exited.then((exit) => (this.exit = { ...exit, atMs: Date.now() }));
  }

  sample(): void {
    if (this.exit || !this.proc.pid) return;
    const reading = readProc(this.proc.pid);
    if (reading) this.samples.push({ t: Date.now(), ...reading });
  }

  /** Lines written since the last call. */
  newLines(): string[] {
    const lines = this.proc.lines.slice(this.cursor);
    this.cursor += lines.length;
    return lines;
  }

  /** Mean CPU (% of one core) and peak / mean RSS (MB) between `from` and `to`. */
  stats(from: number, to: number): { cpuPct: number; rssMaxMb: number; rssMeanMb: number } | undefined {
    const inside = this.samples.filter((s) => s.t >= from - SAMPLE_MS / 2 && s.t <= to + SAMPLE_MS / 2);
    const first = inside[0];
    const last = inside.at(-1);
    if (!first || !last || last === first) return undefined;
    return {
      cpuPct: ((last.cpuS - first.cpuS) / ((last.t - first.t) / 1000)) * 100,
      rssMaxMb: Math.max(...inside.map((s) => s.rssMb)),
      rssMeanMb: inside.reduce((sum, s) => sum + s.rssMb, 0) / inside.length,
    };
  }

  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 25_000): Promise<void> {
    this.termAt ??= Date.now();
    await this.proc.stop(signal, graceMs);
  }
}

/** Every process started, so cleanup can kill it by PID. */
const started = new Set<Tracked>();

/** The bench's own scripts (consumer, producers), from the repository root. */
function spawnTracked(name: string, script: string, env: Record<string, string>): Tracked {
  const condition = script.endsWith('.ts') ? ['--conditions=@tickwarden/source'] : [];
  return track(
    name,
    ManagedProcess.start({
      name,
      command: process.execPath,
      args: [...condition, script],
      env,
      cwd: fileURLToPath(ROOT),
    }),
  );
}

function track(name: string, proc: ManagedProcess): Tracked {
  const tracked = new Tracked(name, proc);
  started.add(tracked);
  return tracked;
}

closers.add(async () => {
  await Promise.all([...started].map((tracked) => tracked.proc.stop('SIGKILL', 0).catch(noop)));
});

// ---------------------------------------------------------------- redis statistics

/** CPU seconds the whole machine spent busy (all cores, /proc/stat), and this bench process's own. */
function machineCpu(): { t: number; busyS: number; benchS: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
  const total = fields.slice(0, 8).reduce((sum, x) => sum + x, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  const own = process.cpuUsage();
  return { t: Date.now(), busyS: (total - idle) / CLK_TCK, benchS: (own.user + own.system) / 1e6 };
}

/** Machine CPU use between two readings, in % of one core: everything, and the bench process itself. */
function machineDelta(
  before: ReturnType<typeof machineCpu>,
  after: ReturnType<typeof machineCpu>,
): { busyPct: number; benchPct: number } {
  const seconds = (after.t - before.t) / 1000;
  return {
    busyPct: ((after.busyS - before.busyS) / seconds) * 100,
    benchPct: ((after.benchS - before.benchS) / seconds) * 100,
  };
}

type Role = 'lock' | 'queue';
interface RoleNode {
  node: RedisNode;
  role: Role;
}

interface RoleCounters {
  calls: number;
  cpuS: number;
  byCommand: Record<string, number>;
  /** EVALSHA / EVAL calls (Lua scripts: lock batches, BullMQ's commands) and their total server time. */
  scriptCalls: number;
  scriptUsec: number;
}

interface RedisSnapshot {
  t: number;
  calls: number;
  cpuS: number;
  byCommand: Record<string, number>;
  byRole: Partial<Record<Role, RoleCounters>>;
}

/** INFO commandstats (INFO itself excluded) and INFO cpu, summed over `nodes`, and per role. */
async function redisSnapshot(nodes: readonly RoleNode[]): Promise<RedisSnapshot> {
  const snapshot: RedisSnapshot = { t: Date.now(), calls: 0, cpuS: 0, byCommand: {}, byRole: {} };
  const infos = await Promise.all(
    nodes.map(async ({ node, role }) => ({
      role,
      commands: await node.info('commandstats', 5000),
      cpu: await node.info('cpu', 5000),
    })),
  );
  for (const { role, commands, cpu } of infos) {
    const counters = (snapshot.byRole[role] ??= { calls: 0, cpuS: 0, byCommand: {}, scriptCalls: 0, scriptUsec: 0 });
    const cpuS = Number(cpu['used_cpu_user'] ?? 0) + Number(cpu['used_cpu_sys'] ?? 0);
    snapshot.cpuS += cpuS;
    counters.cpuS += cpuS;
    for (const [key, value] of Object.entries(commands)) {
      if (!key.startsWith('cmdstat_') || key === 'cmdstat_info') continue;
      const calls = Number(/calls=(\d+)/.exec(value)?.[1] ?? 0);
      const command = key.slice('cmdstat_'.length);
      snapshot.byCommand[command] = (snapshot.byCommand[command] ?? 0) + calls;
      snapshot.calls += calls;
      counters.calls += calls;
      counters.byCommand[command] = (counters.byCommand[command] ?? 0) + calls;
      if (command === 'evalsha' || command === 'eval') {
        counters.scriptCalls += calls;
        counters.scriptUsec += Number(/usec=(\d+)/.exec(value)?.[1] ?? 0);
      }
    }
  }
  return snapshot;
}

interface RoleDelta {
  calls: number;
  cpuPct: number;
  scriptsPerS: number;
  /** Mean server time of one script call, ms (INFO commandstats usec / calls). */
  scriptMeanMs: number;
  /** Calls of each command in the interval, most called first (Lua-internal calls included). */
  byCommand: Record<string, number>;
}

interface RedisDelta {
  seconds: number;
  calls: number;
  cpuPct: number;
  byRole: Partial<Record<Role, RoleDelta>>;
  /** The ten most called commands in the interval. */
  top: Record<string, number>;
}

function redisDelta(before: RedisSnapshot, after: RedisSnapshot): RedisDelta {
  const byCommand = Object.entries(after.byCommand)
    .map(([command, calls]): [string, number] => [command, calls - (before.byCommand[command] ?? 0)])
    .filter(([, calls]) => calls > 0)
    .sort((x, y) => y[1] - x[1])
    .slice(0, 10);
  const seconds = (after.t - before.t) / 1000;
  const byRole: Partial<Record<Role, RoleDelta>> = {};
  for (const role of ['lock', 'queue'] as const) {
    const a = after.byRole[role];
    const b = before.byRole[role];
    if (!a || !b) continue;
    const scripts = a.scriptCalls - b.scriptCalls;
    byRole[role] = {
      calls: a.calls - b.calls,
      cpuPct: ((a.cpuS - b.cpuS) / seconds) * 100,
      scriptsPerS: scripts / seconds,
      scriptMeanMs: scripts > 0 ? (a.scriptUsec - b.scriptUsec) / scripts / 1000 : Number.NaN,
      byCommand: Object.fromEntries(
        Object.entries(a.byCommand)
          .map(([command, calls]): [string, number] => [command, calls - (b.byCommand[command] ?? 0)])
          .filter(([, calls]) => calls > 0)
          .sort((x, y) => y[1] - x[1]),
      ),
    };
  }
  return {
    seconds,
    calls: after.calls - before.calls,
    cpuPct: ((after.cpuS - before.cpuS) / seconds) * 100,
    byRole,
    top: Object.fromEntries(byCommand),
  };
}

/** SLOWLOG threshold: commands (scripts) slower than this are logged by each Redis with their duration. */
const SLOWLOG_US = 5_000;

/** Makes every node log commands slower than {@link SLOWLOG_US} and keep plenty of entries. */
async function configureSlowlog(nodes: readonly RoleNode[]): Promise<void> {
  await Promise.all(
    nodes.map(async ({ node }) => {
      const client = new Redis(node.url, { maxRetriesPerRequest: 1 });
      client.on('error', noop);
      try {
        await client.config('SET', 'slowlog-log-slower-than', String(SLOWLOG_US));
        await client.config('SET', 'slowlog-max-len', '100000');
      } finally {
        client.disconnect();
      }
    }),
  );
}

interface SlowEntry {
  role: Role;
  node: string;
  /** Unix time of the entry, ms (second resolution). */
  atMs: number;
  ms: number;
  command: string;
  /** A script call's number of keys (resources, for the lock nodes' batch scripts). */
  keys: number;
}

async function readSlowlog(nodes: readonly RoleNode[]): Promise<SlowEntry[]> {
  const perNode = await Promise.all(
    nodes.map(async ({ node, role }) => {
      const client = new Redis(node.url, { maxRetriesPerRequest: 1 });
      client.on('error', noop);
      try {
        const entries = (await client.call('SLOWLOG', 'GET', '100000')) as [number, number, number, string[]][];
        return entries.map(([, atS, usec, args]): SlowEntry => ({
          role,
          node: node.id,
          atMs: atS * 1000,
          ms: usec / 1000,
          command: String(args[0] ?? '?').toLowerCase(),
          keys: /^eval/i.test(String(args[0])) ? Number(args[2] ?? 0) : 0,
        }));
      } catch {
        return [];
      } finally {
        client.disconnect();
      }
    }),
  );
  return perNode.flat();
}

interface SlowSummary {
  /** Entries slower than the threshold, per role: count, and the slowest, ms. */
  byRole: Partial<
    Record<Role, { count: number; maxMs: number; p50Ms: number; over10Ms: number; keysOfSlowest: number[] }>
  >;
}

function summarizeSlowlog(
  entries: readonly SlowEntry[],
  from: number,
  to: number,
  nodes: readonly RoleNode[],
): SlowSummary {
  const byRole: SlowSummary['byRole'] = {};
  for (const role of new Set(nodes.map((n) => n.role))) {
    const ms = sortedOf(
      entries.filter((e) => e.role === role && e.atMs >= from - 1000 && e.atMs < to + 1000).map((e) => e.ms),
    );
    const slowest = entries
      .filter((e) => e.role === role && e.atMs >= from - 1000 && e.atMs < to + 1000)
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 5);
    byRole[role] = {
      count: ms.length,
      maxMs: ms.at(-1) ?? 0,
      p50Ms: percentile(ms, 0.5),
      over10Ms: ms.filter((x) => x > 10).length,
      keysOfSlowest: slowest.map((e) => e.keys),
    };
  }
  return { byRole };
}

// ---------------------------------------------------------------- what the processes report

interface SeenTick {
  count: number;
  /** Processor start of the first delivery. */
  startMs: number;
  /** The job's `timestamp` (BullMQ: when the job was created). */
  timestamp: number;
}

/** `enqueued` or `recovered` log lines of one tick (all replicas). */
interface EnqueuedTick {
  count: number;
  lagMs: number;
}

/** Everything a fleet's processes said, keyed by `<schedule>@<tickMs>`. */
class Observations {
  readonly seen = new Map<string, SeenTick>();
  readonly enqueued = new Map<string, EnqueuedTick>();
  /** Ticks whose lease takeover failed in the consumer (Tickwarden; such a run does not start). */
  readonly takeoverFailed = new Set<string>();
  /** Tickwarden outcomes other than `enqueued` logged at info level or above (`recovered`, warnings): outcome -> tick keys. */
  readonly warned = new Map<string, string[]>();
  /** The first few raw log lines of each warning outcome (evidence for the reading). */
  readonly warnExamples: Record<string, string[]> = {};
  errorLines: string[] = [];

  readConsumer(consumer: Tracked): void {
    for (const line of consumer.newLines()) {
      if (!line.startsWith('{"jobs":')) continue;
      const { jobs, failed } = JSON.parse(line) as {
        jobs: [string, number, number, number, number][];
        failed?: [string, number][];
      };
      for (const [schedule, tickMs] of failed ?? []) this.takeoverFailed.add(`${schedule}@${tickMs}`);
      for (const [schedule, tickMs, startMs, timestamp] of jobs) {
        const key = `${schedule}@${tickMs}`;
        const entry = this.seen.get(key);
        if (entry) entry.count++;
        else this.seen.set(key, { count: 1, startMs, timestamp });
      }
    }
  }

  readReplica(replica: Tracked): void {
    for (const line of replica.newLines()) {
      if (!line.includes('"outcome":"')) {
        if (/"level":(50|60)/.test(line) && this.errorLines.length < 20)
          this.errorLines.push(`${replica.name}: ${line.slice(0, 400)}`);
        continue;
      }
      let record: { level?: number; schedule?: string; tick?: string; outcome?: string; lagMs?: number };
      try {
        record = JSON.parse(line) as typeof record;
      } catch {
        continue;
      }
      const schedule = record.schedule?.slice(record.schedule.indexOf('/') + 1) ?? '?';
      const key = `${schedule}@${Date.parse(record.tick ?? '')}`;
      // `recovered`: a replica that lost the contest enqueued the tick because its winner's job never showed up.
      if (record.outcome === 'enqueued' || record.outcome === 'recovered') {
        const entry = this.enqueued.get(key);
        if (entry) entry.count++;
        else this.enqueued.set(key, { count: 1, lagMs: record.lagMs ?? Number.NaN });
      }
      // Debug-level outcomes (lost-race, ...) appear only with BENCH_TW_LOG_LEVEL=debug; they are not counted.
      if (record.outcome !== 'enqueued' && (record.level ?? 30) >= 30) {
        const examples = (this.warnExamples[record.outcome ?? '?'] ??= []);
        if (examples.length < 3) examples.push(`${replica.name}: ${line.slice(0, 3000)}`);
        const keys = this.warned.get(record.outcome ?? '?') ?? [];
        keys.push(key);
        this.warned.set(record.outcome ?? '?', keys);
      }
    }
  }
}

/** A replica's own view from its /metrics (prom-client default metrics): memory and event-loop delay since the previous scrape. */
interface ReplicaMetrics {
  name: string;
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  /** Event-loop delay p99 and max, ms (prom-client resets its histogram at every scrape). */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
}

/** A scrape's timeout, ms: Prometheus's default (a replica writing 100,000 schedules' series at a boundary takes seconds). */
const SCRAPE_TIMEOUT_MS = 10_000;

async function scrape(tracked: Tracked): Promise<ReplicaMetrics | undefined> {
  if (!tracked.httpPort || tracked.exit) return undefined;
  try {
    const text = await (
      await fetch(`http://127.0.0.1:${tracked.httpPort}/metrics`, { signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS) })
    ).text();
    const value = (name: string): number =>
      Number(new RegExp(`^${name} ([0-9.e+-]+)`, 'm').exec(text)?.[1] ?? Number.NaN);
    return {
      name: tracked.name,
      rssMb: value('process_resident_memory_bytes') / 2 ** 20,
      heapUsedMb: value('nodejs_heap_size_used_bytes') / 2 ** 20,
      heapTotalMb: value('nodejs_heap_size_total_bytes') / 2 ** 20,
      loopDelayP99Ms: value('nodejs_eventloop_lag_p99_seconds') * 1000,
      loopDelayMaxMs: value('nodejs_eventloop_lag_max_seconds') * 1000,
    };
  } catch {
    return undefined;
  }
}

/** A process that exited on its own: its name, exit and last output lines. */
interface Crash {
  name: string;
  at: string;
  code: number | null;
  signal: string | null;
  lastLines: string[];
}

function crashesOf(tracked: readonly Tracked[]): Crash[] {
  return tracked
    .filter((t) => t.crashed)
    .map((t) => ({
      name: t.name,
      at: new Date(t.exit?.atMs ?? 0).toISOString(),
      code: t.exit?.code ?? null,
      signal: t.exit?.signal ?? null,
      lastLines: t.proc.lines.slice(-8).map((line) => line.slice(0, 300)),
    }));
}

// ---------------------------------------------------------------- fleets

/** One system under test: its Redis servers, its consumer and its 3 replicas (Tickwarden) or producers (BullMQ). */
class Fleet {
  readonly system: System;
  readonly schedules: number;
  readonly pattern: string;
  readonly obs = new Observations();
  /** The current member in each slot. */
  readonly members: Tracked[] = [];
  /** Every member ever started (replaced ones included). */
  readonly everyMember: Tracked[] = [];
  consumer!: Tracked;
  #locks: RedisNodes | undefined;
  #queue!: RedisNodes;
  #dir: string | undefined;
  #sampler: ReturnType<typeof setInterval> | undefined;
  readonly upserts: { name: string; ms: number; errors: number; firstError?: string }[] = [];

  /** Names the phase in log files. */
  get phase(): string {
    return `${this.schedules === BURST_SCHEDULES ? 'c' : 'ab'}-${this.system}`;
  }

  constructor(system: System, schedules: number, pattern: string) {
    this.system = system;
    this.schedules = schedules;
    this.pattern = pattern;
  }

  get nodes(): RoleNode[] {
    return [
      ...(this.#locks?.nodes ?? []).map((node) => ({ node, role: 'lock' as const })),
      ...this.#queue.nodes.map((node) => ({ node, role: 'queue' as const })),
    ];
  }
  get queueUrl(): string {
    return this.#queue.urls[0] as string;
  }
  get scheduleNames(): string[] {
    return Array.from({ length: this.schedules }, (_, i) => scheduleName(i));
  }

  readonly #closer = (): Promise<void> => this.close();

  async start(readyTimeoutMs: number): Promise<void> {
    closers.add(this.#closer);
    if (this.system === 'tickwarden') {
      [this.#locks, this.#queue] = await Promise.all([
        startRedisNodes({ count: LOCK_NODES, aof: false }),
        startRedisNodes({ count: 1, aof: false }),
      ]);
      this.#dir = mkdtempSync(path.join(os.tmpdir(), 'tickwarden-scheduler-bench-'));
      // One team per file, as teams would: names stay unique across teams (the consumer drops the team).
      const names = this.scheduleNames;
      for (let from = 0, file = 0; from < names.length; from += MAX_SCHEDULES_PER_FILE, file++) {
        const entries = names
          .slice(from, from + MAX_SCHEDULES_PER_FILE)
          .map(
            (name) =>
              `  - name: ${name}\n    cron: "${this.pattern}"\n    handler: { kind: command, argv: ["true"] }\n`,
          );
        writeFileSync(
          path.join(this.#dir, `${TEAM}-${file}.yaml`),
          `team: ${TEAM}-${file}\nschedules:\n${entries.join('')}`,
        );
      }
    } else {
      this.#queue = await startRedisNodes({ count: 1, aof: false });
    }
    await configureSlowlog(this.nodes);
    this.consumer = spawnTracked(`${this.system}-consumer`, CONSUMER, {
      BENCH_QUEUE_REDIS: this.queueUrl,
      BENCH_QUEUE: this.system === 'tickwarden' ? TW_QUEUE : PEER_QUEUE,
      BENCH_KIND: this.system,
      ...(this.#locks ? { BENCH_LOCK_NODES: this.#locks.urls.join(','), BENCH_CRON: this.pattern } : {}),
    });
    await this.consumer.proc.waitForLine((line) => line.includes('consumer ready'), 'consumer ready', 30_000);
    this.consumer.readyAt = Date.now();
    this.#sampler = setInterval(() => {
      for (const tracked of [this.consumer, ...this.members]) tracked.sample();
    }, SAMPLE_MS);
    await Promise.all(Array.from({ length: REPLICAS }, (_, slot) => this.startMember(slot, 0, readyTimeoutMs)));
  }

  /** Starts the member of `slot` (replacing the reference to the previous one) and waits until it is ready. */
  async startMember(slot: number, generation: number, readyTimeoutMs: number): Promise<Tracked> {
    const name = `${this.system === 'tickwarden' ? 'replica' : 'producer'}-${slot}${generation > 0 ? `-gen${generation}` : ''}`;
    let member: Tracked;
    if (this.system === 'tickwarden') {
      const port = await freePort();
      member = track(
        name,
        startAppProcess({
          role: 'scheduler',
          name,
          main: MAIN,
          compiled: true,
          nodeFlags: TW_NODE_FLAGS,
          configDir: this.#dir,
          lockNodes: (this.#locks as RedisNodes).urls,
          queueRedis: this.queueUrl,
          replicaId: name,
          httpPort: port,
          logLevel: TW_LOG_LEVEL,
        }),
      );
      member.httpPort = port;
    } else {
      member = spawnTracked(name, PRODUCER, {
        BENCH_QUEUE_REDIS: this.queueUrl,
        BENCH_QUEUE: PEER_QUEUE,
        BENCH_SCHEDULES: String(this.schedules),
        BENCH_PATTERN: this.pattern,
        BENCH_PRODUCER: name,
      });
    }
    this.members[slot] = member;
    this.everyMember.push(member);
    const readyLine = this.system === 'tickwarden' ? 'scheduler started' : '"msg":"upserted"';
    await member.proc.waitForLine((line) => line.includes(readyLine), 'ready', readyTimeoutMs);
    member.readyAt = Date.now();
    if (this.system === 'bullmq') {
      const line = member.proc.lines.find((l) => l.includes('"msg":"upserted"')) as string;
      const { ms, errors, firstError } = JSON.parse(line) as { ms: number; errors: number; firstError?: string };
      this.upserts.push({ name, ms, errors, firstError });
    }
    return member;
  }

  /** /metrics of every running Tickwarden replica (empty for BullMQ). */
  async scrapeMembers(): Promise<ReplicaMetrics[]> {
    const all = await Promise.all(this.members.map((member) => scrape(member)));
    return all.filter((m): m is ReplicaMetrics => m !== undefined);
  }

  /**
   * Tickwarden: adds a comment to one team file, a reload that changes no schedule but parses,
   * compares and hashes them all, and waits until every replica logged `config reloaded`. The
   * time from the write (the replicas poll every 2 s), and each replica's event-loop delay max.
   */
  async reload(): Promise<ReloadResult | undefined> {
    if (this.system !== 'tickwarden' || this.#dir === undefined) return undefined;
    const reloads = (member: Tracked) => member.proc.lines.filter((line) => line.includes('"config reloaded"')).length;
    const before = this.members.map(reloads);
    await this.scrapeMembers(); // resets the event-loop delay histograms
    const writtenAt = Date.now();
    appendFileSync(path.join(this.#dir, `${TEAM}-0.yaml`), `# reloaded at ${writtenAt}\n`);
    const deadline = writtenAt + 60_000;
    while (this.members.some((member, i) => reloads(member) <= (before[i] as number)) && Date.now() < deadline)
      await sleep(50);
    const ms = Date.now() - writtenAt;
    const metrics = await this.scrapeMembers();
    // The next boundary's contests start its lead (9.5 s by default) ahead: 10 s, to be safe.
    return { ms, metrics, overlapped: Date.now() > ceilTo(writtenAt, 60_000) - 10_000 };
  }

  /** Reads what the consumer and the replicas wrote since the last call. */
  read(): void {
    this.obs.readConsumer(this.consumer);
    if (this.system === 'tickwarden') for (const member of this.everyMember) this.obs.readReplica(member);
  }

  /** Waits until the consumer has seen every one of `keys` (and, for Tickwarden, the logs name them), or until `deadline`. */
  async waitFor(keys: readonly string[], deadline: number): Promise<void> {
    for (;;) {
      this.read();
      const missing = keys.some(
        (key) => !this.obs.seen.has(key) || (this.system === 'tickwarden' && !this.obs.enqueued.has(key)),
      );
      if (!missing || Date.now() >= deadline) return;
      await sleep(250);
    }
  }

  /** SIGTERM to every member still running, then to the consumer; exits are recorded on each. */
  async stopAll(): Promise<void> {
    await Promise.all(this.members.map((member) => member.stop()));
    await this.consumer.stop();
    this.read();
    clearInterval(this.#sampler);
  }

  async close(): Promise<void> {
    closers.delete(this.#closer);
    clearInterval(this.#sampler);
    if (LOG_DIR) {
      mkdirSync(LOG_DIR, { recursive: true });
      for (const tracked of [this.consumer, ...this.everyMember].filter(Boolean)) {
        writeFileSync(path.join(LOG_DIR, `${this.phase}-${tracked.name}.log`), `${tracked.proc.lines.join('\n')}\n`);
      }
    }
    await Promise.all(
      [this.consumer, ...this.everyMember]
        .filter(Boolean)
        .map((tracked) => tracked.proc.stop('SIGKILL', 0).catch(noop)),
    );
    await Promise.all([this.#locks?.close(), this.#queue?.close()]);
    if (this.#dir) rmSync(this.#dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- analysis

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] as number;
}
const sortedOf = (values: number[]): number[] => values.toSorted((x, y) => x - y);

interface TickAnalysis {
  from: string;
  to: string;
  expected: number;
  /** Expected ticks the consumer never started. */
  missed: number;
  /** Expected ticks the consumer started more than once. */
  duplicates: number;
  /** Extra deliveries of those ticks. */
  extraDeliveries: number;
  /** Expected ticks whose lease takeover failed in the consumer at least once (Tickwarden). */
  takeoverFailed: number;
  /** Jobs seen for ticks in the window that no schedule expects (e.g. off the second grid). */
  unexpected: number;
  startP50Ms: number;
  startP99Ms: number;
  startMaxMs: number;
  /** BullMQ: tick minus the job's creation `timestamp` (how far ahead it was created), p50. */
  createdAheadP50Ms: number;
  /** Tickwarden logs: ticks with no `enqueued`/`recovered` line, with more than one, lag percentiles (both outcomes). */
  enqueue: { none: number; multiple: number; lagP50Ms: number; lagP99Ms: number; lagMaxMs: number } | null;
  /** Tickwarden outcomes other than `enqueued` at info level or above (recovered, missed, lock-unavailable, enqueue-failed) for ticks in the window. */
  warnings: Record<string, number>;
  /** Missed ticks per tick second (ISO), for finding their cause. */
  missedBySecond: Record<string, number>;
  missedExamples: string[];
  /** Missed ticks whose schedule's previous tick (one second earlier) was started by the consumer only after this tick's time (BullMQ computes the next run when a job starts). */
  missedAfterLateStart: number;
  duplicateExamples: string[];
}

function analyze(fleet: Fleet, ticks: readonly number[]): TickAnalysis {
  const { obs } = fleet;
  const names = fleet.scheduleNames;
  const tickSet = new Set(ticks);
  const nameSet = new Set(names);
  const starts: number[] = [];
  const ahead: number[] = [];
  const lags: number[] = [];
  const missedBySecond: Record<string, number> = {};
  const missedExamples: string[] = [];
  let missed = 0;
  let missedAfterLateStart = 0;
  const duplicateExamples: string[] = [];
  let duplicates = 0;
  let extraDeliveries = 0;
  let takeoverFailed = 0;
  let none = 0;
  let multiple = 0;
  for (const tick of ticks) {
    for (const name of names) {
      const key = `${name}@${tick}`;
      if (obs.takeoverFailed.has(key)) takeoverFailed++;
      const seen = obs.seen.get(key);
      if (!seen) {
        missed++;
        const second = new Date(tick).toISOString();
        missedBySecond[second] = (missedBySecond[second] ?? 0) + 1;
        if (missedExamples.length < 10) missedExamples.push(`${name} ${second}`);
        const previous = obs.seen.get(`${name}@${tick - 1000}`);
        if (previous && previous.startMs >= tick) missedAfterLateStart++;
      } else {
        starts.push(seen.startMs - tick);
        ahead.push(tick - seen.timestamp);
        if (seen.count > 1) {
          duplicates++;
          if (duplicateExamples.length < 10)
            duplicateExamples.push(`${name} ${new Date(tick).toISOString()} x${seen.count}`);
          extraDeliveries += seen.count - 1;
        }
      }
      if (fleet.system === 'tickwarden') {
        const enqueued = obs.enqueued.get(key);
        if (!enqueued) none++;
        else {
          lags.push(enqueued.lagMs);
          if (enqueued.count > 1) multiple++;
        }
      }
    }
  }
  const first = ticks[0] as number;
  const last = ticks.at(-1) as number;
  let unexpected = 0;
  for (const key of obs.seen.keys()) {
    const at = key.lastIndexOf('@');
    const tick = Number(key.slice(at + 1));
    if (tick >= first && tick <= last && (!tickSet.has(tick) || !nameSet.has(key.slice(0, at)))) unexpected++;
  }
  const warnings: Record<string, number> = {};
  for (const [outcome, keys] of obs.warned) {
    const inside = keys.filter((key) => tickSet.has(Number(key.slice(key.lastIndexOf('@') + 1)))).length;
    if (inside > 0) warnings[outcome] = inside;
  }
  const startSorted = sortedOf(starts);
  const lagSorted = sortedOf(lags);
  return {
    from: new Date(first).toISOString(),
    to: new Date(last).toISOString(),
    expected: ticks.length * names.length,
    missed,
    duplicates,
    extraDeliveries,
    takeoverFailed,
    unexpected,
    startP50Ms: percentile(startSorted, 0.5),
    startP99Ms: percentile(startSorted, 0.99),
    startMaxMs: startSorted.at(-1) ?? Number.NaN,
    createdAheadP50Ms: percentile(sortedOf(ahead), 0.5),
    enqueue:
      fleet.system === 'tickwarden'
        ? {
            none,
            multiple,
            lagP50Ms: percentile(lagSorted, 0.5),
            lagP99Ms: percentile(lagSorted, 0.99),
            lagMaxMs: lagSorted.at(-1) ?? Number.NaN,
          }
        : null,
    warnings,
    missedBySecond,
    missedExamples,
    missedAfterLateStart,
    duplicateExamples,
  };
}

const secondsOf = (from: number, to: number): number[] =>
  Array.from({ length: Math.round((to - from) / 1000) }, (_, i) => from + i * 1000);

interface ProcessStats {
  name: string;
  cpuPct: number;
  rssMaxMb: number;
  rssMeanMb: number;
}

function processStats(tracked: readonly Tracked[], from: number, to: number): ProcessStats[] {
  return tracked.flatMap((t) => {
    const stats = t.stats(from, to);
    return stats ? [{ name: t.name, ...stats }] : [];
  });
}

// ---------------------------------------------------------------- scenarios (a) and (b)

interface Restart {
  slot: number;
  stopped: string;
  started: string;
  /** SIGTERM to the replacement being ready (Tickwarden: "scheduler started"; BullMQ: all schedulers upserted). */
  readyAfterMs: number;
  /** SIGTERM to exit of the stopped process. */
  drainMs: number | null;
  exitCode: number | null;
  exitSignal: string | null;
  at: string;
}

/** Where the machine's CPU went in a window, % of one core (the machine has nproc x 100). */
interface MachineShare {
  busyPct: number;
  systemPct: number;
  benchPct: number;
  /** Busy time not accounted for by this system's processes, its Redis servers or the bench: other work on the machine. */
  otherPct: number;
}

function machineShare(
  delta: { busyPct: number; benchPct: number },
  members: readonly ProcessStats[],
  consumer: ProcessStats | undefined,
  redis: RedisDelta,
): MachineShare {
  const systemPct = members.reduce((sum, m) => sum + m.cpuPct, 0) + (consumer?.cpuPct ?? 0) + redis.cpuPct;
  return {
    busyPct: delta.busyPct,
    systemPct,
    benchPct: delta.benchPct,
    otherPct: delta.busyPct - systemPct - delta.benchPct,
  };
}

interface PerSecondResult {
  system: System;
  machine: MachineShare;
  window: TickAnalysis;
  rolling: TickAnalysis;
  restarts: Restart[];
  /** Missed ticks (b) due between a SIGTERM and 2 s after its replacement was ready. */
  missedNearRestart: number;
  commandsPerTickPerSchedule: number;
  commandsPerTickPerScheduleRolling: number;
  redis: RedisDelta;
  redisRolling: RedisDelta;
  slow: SlowSummary;
  slowRolling: SlowSummary;
  /** Tickwarden replicas' /metrics at the end of the window (event-loop delay over the window). */
  replicaMetrics: ReplicaMetrics[];
  crashes: Crash[];
  members: ProcessStats[];
  consumer: ProcessStats | undefined;
  upserts: Fleet['upserts'];
  errorLines: string[];
  warnExamples: Record<string, string[]>;
}

/** Stops every member (SIGSTOP) at `atMs` for STALL_S, then continues them. */
async function stall(members: readonly Tracked[], atMs: number): Promise<void> {
  await sleepUntil(atMs);
  const pids = members.flatMap((member) => (member.proc.pid ? [member.proc.pid] : []));
  log(`  (a) stalling ${pids.length} processes for ${STALL_S} s`);
  try {
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    await sleep(STALL_S * 1000);
  } finally {
    for (const pid of pids) process.kill(pid, 'SIGCONT');
  }
}

async function runPerSecond(system: System): Promise<PerSecondResult> {
  log(
    `(a)+(b) ${LABEL[system]}: starting Redis, consumer and ${REPLICAS} ${system === 'tickwarden' ? 'replicas' : 'producers'} with ${PER_SECOND_SCHEDULES} per-second schedules`,
  );
  const fleet = new Fleet(system, PER_SECOND_SCHEDULES, PER_SECOND_PATTERN);
  try {
    await fleet.start(60_000);
    if (system === 'bullmq')
      log(
        `  upserts: ${fleet.upserts.map((u) => `${u.name} ${u.ms} ms${u.errors ? ` (${u.errors} errors)` : ''}`).join(', ')}`,
      );
    const w0 = ceilTo(Date.now() + WARMUP_MS, 1000);
    const w1 = w0 + WINDOW_S * 1000;
    log(`  (a) window ${new Date(w0).toISOString()} + ${WINDOW_S} s`);
    await sleepUntil(w0 - 500);
    await fleet.scrapeMembers(); // resets the replicas' event-loop delay histograms
    const cpu0 = machineCpu();
    const snap0 = await redisSnapshot(fleet.nodes);
    const progress = setInterval(() => fleet.read(), 2000);
    if (STALL_S > 0) await stall(fleet.members, w0 + STALL_AT_MS);
    await sleepUntil(w1 - 500);
    const cpu1 = machineCpu();
    const snap1 = await redisSnapshot(fleet.nodes);
    const replicaMetrics = await fleet.scrapeMembers();
    log(`  (b) rolling restart of ${REPLICAS}, ${ROLLING_PAUSE_MS / 1000} s apart`);
    const restarts: Restart[] = [];
    const exits: Promise<void>[] = [];
    for (let slot = 0; slot < REPLICAS; slot++) {
      const old = fleet.members[slot] as Tracked;
      const termAt = Date.now();
      const restart: Restart = {
        slot,
        stopped: old.name,
        started: '',
        readyAfterMs: Number.NaN,
        drainMs: null,
        exitCode: null,
        exitSignal: null,
        at: new Date(termAt).toISOString(),
      };
      restarts.push(restart);
      exits.push(
        old.stop('SIGTERM', 25_000).then(() => {
          restart.drainMs = (old.exit?.atMs ?? Date.now()) - termAt;
          restart.exitCode = old.exit?.code ?? null;
          restart.exitSignal = old.exit?.signal ?? null;
        }),
      );
      const replacement = await fleet.startMember(slot, 1, 60_000);
      restart.started = replacement.name;
      restart.readyAfterMs = (replacement.readyAt as number) - termAt;
      log(`  ${old.name} -> ${replacement.name}: ready after ${restart.readyAfterMs} ms`);
      await sleep(ROLLING_PAUSE_MS);
    }
    await Promise.all(exits);
    const b1 = ceilTo(Date.now(), 1000);
    await sleepUntil(b1 - 500);
    const snap2 = await redisSnapshot(fleet.nodes);
    clearInterval(progress);
    const windowTicks = secondsOf(w0, w1);
    const rollingTicks = secondsOf(w1, b1);
    const keys = [...windowTicks, ...rollingTicks].flatMap((tick) =>
      fleet.scheduleNames.map((name) => `${name}@${tick}`),
    );
    log(`  draining (up to ${DRAIN_MS / 1000} s)`);
    await fleet.waitFor(keys, Date.now() + DRAIN_MS);
    const slow = await readSlowlog(fleet.nodes);
    await fleet.stopAll();
    const members = processStats(fleet.everyMember, w0, w1);
    const consumer = processStats([fleet.consumer], w0, w1)[0];
    const redis = redisDelta(snap0, snap1);
    const result: PerSecondResult = {
      system,
      machine: machineShare(machineDelta(cpu0, cpu1), members, consumer, redis),
      window: analyze(fleet, windowTicks),
      rolling: analyze(fleet, rollingTicks),
      restarts,
      missedNearRestart: 0,
      commandsPerTickPerSchedule: (snap1.calls - snap0.calls) / windowTicks.length / fleet.schedules,
      commandsPerTickPerScheduleRolling: (snap2.calls - snap1.calls) / rollingTicks.length / fleet.schedules,
      redis,
      redisRolling: redisDelta(snap1, snap2),
      replicaMetrics,
      crashes: crashesOf([fleet.consumer, ...fleet.everyMember]),
      slow: summarizeSlowlog(slow, w0, w1, fleet.nodes),
      slowRolling: summarizeSlowlog(slow, w1, b1, fleet.nodes),
      members,
      consumer,
      upserts: fleet.upserts,
      errorLines: fleet.obs.errorLines,
      warnExamples: fleet.obs.warnExamples,
    };
    for (const [second, count] of Object.entries(result.rolling.missedBySecond)) {
      const tick = Date.parse(second);
      if (restarts.some((x) => tick >= Date.parse(x.at) && tick <= Date.parse(x.at) + x.readyAfterMs + 2000))
        result.missedNearRestart += count;
    }
    log(
      `  (a) missed ${result.window.missed}, duplicates ${result.window.duplicates}, start p99 ${result.window.startP99Ms} ms; ` +
        `(b) missed ${result.rolling.missed}, duplicates ${result.rolling.duplicates}, start p99 ${result.rolling.startP99Ms} ms`,
    );
    return result;
  } finally {
    await fleet.close();
  }
}

// ---------------------------------------------------------------- scenario (c)

interface BoundaryResult {
  boundary: string;
  analysis: TickAnalysis;
  /** Tickwarden: boundary to the last `enqueued` (max lagMs; negative: before the boundary) when all were enqueued. */
  allEnqueuedMs: number | null;
  /** Boundary to the moment no job of this tick was left in the delayed set (polled every 20 ms). */
  allPromotedMs: number | null;
  /** Boundary to the consumer's start of the last of the jobs, when it started all. */
  allStartedMs: number | null;
  commandsPerSchedule: number;
  redis: RedisDelta;
  slow: SlowSummary;
  /** Tickwarden replicas' /metrics after the boundary (event-loop delay from `BURST_LEAD_IN_MS` before it). */
  replicaMetrics: ReplicaMetrics[];
  /** Members that had exited on their own and were started again (as Kubernetes would) before this boundary. */
  restartedBefore: string[];
}

/** A reload of (c)'s config while no tick is due (Fleet.reload). */
interface ReloadResult {
  /** From the write to the last replica's `config reloaded`, ms. */
  ms: number;
  /** Each replica's /metrics after it: the event-loop delay over the reload. */
  metrics: ReplicaMetrics[];
  /** Whether it ran into the next boundary's contests (then the delay is theirs too). */
  overlapped: boolean;
}

interface BurstResult {
  system: System;
  startupMs: number;
  reload: ReloadResult | undefined;
  boundaries: BoundaryResult[];
  members: ProcessStats[];
  consumer: ProcessStats | undefined;
  upserts: Fleet['upserts'];
  errorLines: string[];
  warnExamples: Record<string, string[]>;
  /** Tickwarden replicas' /metrics once all were ready, before any boundary. */
  readyMetrics: ReplicaMetrics[];
  crashes: Crash[];
}

/** A boundary's statistics (Redis commands, SLOWLOG, event-loop delay) start this long before it: Tickwarden contests its ticks up to its contest lead (9.5 s) ahead. */
const BURST_LEAD_IN_MS = 12_000;

/** Polls the count of the queue's delayed jobs due at or before `tickMs` until it is 0; resolves the wall time, or null. */
async function pollDelayedDrained(
  url: string,
  queue: string,
  tickMs: number,
  deadline: number,
): Promise<number | null> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', noop);
  try {
    await sleepUntil(tickMs - 200);
    for (;;) {
      const left = await client.zcount(`bull:${queue}:delayed`, 0, (tickMs + 1) * 0x1000 - 1);
      const now = Date.now();
      if (left === 0 && now >= tickMs) return now;
      if (now >= deadline) return null;
      await sleep(20);
    }
  } finally {
    client.disconnect();
  }
}

async function runBurst(system: System): Promise<BurstResult> {
  log(
    `(c) ${LABEL[system]}: starting Redis, consumer and ${REPLICAS} ${system === 'tickwarden' ? 'replicas' : 'producers'} with ${BURST_SCHEDULES} schedules "${BURST_PATTERN}"`,
  );
  const fleet = new Fleet(system, BURST_SCHEDULES, BURST_PATTERN);
  try {
    // Started at a minute boundary, the replicas are ready (13-20 s) and reloaded (12-15 s) before
    // the next boundary's contests begin (its lead): the reload is measured alone, as its row says.
    if (system === 'tickwarden') await sleepUntil(ceilTo(Date.now(), 60_000));
    const t0 = Date.now();
    await fleet.start(120_000);
    const startupMs = Date.now() - t0;
    const readyMetrics = await fleet.scrapeMembers();
    const reload = await fleet.reload();
    if (reload)
      log(
        `  reload: ${reload.ms} ms, event-loop delay max ${reload.metrics.map((m) => fmt(m.loopDelayMaxMs)).join(' / ')} ms${reload.overlapped ? " (ran into the next boundary's contests)" : ''}`,
      );
    if (system === 'bullmq')
      log(
        `  upserts: ${fleet.upserts.map((u) => `${u.name} ${u.ms} ms${u.errors ? ` (${u.errors} errors)` : ''}`).join(', ')}`,
      );
    const first = ceilTo(Date.now() + BURST_LEAD_IN_MS + 2000, 60_000);
    const boundaries: BoundaryResult[] = [];
    const from = Date.now();
    for (let k = 0; k < BOUNDARIES; k++) {
      const boundary = first + k * 60_000;
      const restartedBefore: string[] = [];
      for (const [slot, member] of fleet.members.entries()) {
        if (!member.crashed) continue;
        log(
          `  ${member.name} exited on its own (code ${member.exit?.code}, signal ${member.exit?.signal}): starting it again, as Kubernetes would`,
        );
        restartedBefore.push(member.name);
        await fleet.startMember(slot, k, 120_000);
      }
      log(`  boundary ${new Date(boundary).toISOString()} (in ${Math.round((boundary - Date.now()) / 1000)} s)`);
      await sleepUntil(boundary - BURST_LEAD_IN_MS);
      await fleet.scrapeMembers();
      const snap0 = await redisSnapshot(fleet.nodes);
      const deadline = boundary + BURST_WAIT_MS;
      const promoted = pollDelayedDrained(
        fleet.queueUrl,
        system === 'bullmq' ? PEER_QUEUE : TW_QUEUE,
        boundary,
        deadline,
      );
      const keys = fleet.scheduleNames.map((name) => `${name}@${boundary}`);
      await sleepUntil(boundary);
      await fleet.waitFor(keys, deadline);
      const promotedAt = await promoted;
      await sleep(1000);
      const snap1 = await redisSnapshot(fleet.nodes);
      const replicaMetrics = await fleet.scrapeMembers();
      fleet.read();
      const analysis = analyze(fleet, [boundary]);
      const all = analysis.missed === 0;
      const enq = analysis.enqueue;
      const result: BoundaryResult = {
        boundary: new Date(boundary).toISOString(),
        analysis,
        allEnqueuedMs: enq && enq.none === 0 ? enq.lagMaxMs : null,
        allPromotedMs: promotedAt === null ? null : promotedAt - boundary,
        allStartedMs: all ? analysis.startMaxMs : null,
        commandsPerSchedule: (snap1.calls - snap0.calls) / fleet.schedules,
        redis: redisDelta(snap0, snap1),
        slow: { byRole: {} },
        replicaMetrics,
        restartedBefore,
      };
      boundaries.push(result);
      log(
        `  missed ${analysis.missed}, duplicates ${analysis.duplicates}, all enqueued ${result.allEnqueuedMs ?? 'n/a'} ms, ` +
          `all promoted ${result.allPromotedMs ?? 'n/a'} ms, all started ${result.allStartedMs ?? 'n/a'} ms`,
      );
    }
    const to = Date.now();
    const slow = await readSlowlog(fleet.nodes);
    for (const b of boundaries) {
      const at = Date.parse(b.boundary);
      b.slow = summarizeSlowlog(slow, at - BURST_LEAD_IN_MS, at + BURST_WAIT_MS, fleet.nodes);
    }
    await fleet.stopAll();
    return {
      system,
      startupMs,
      boundaries,
      members: processStats(fleet.everyMember, from, to),
      consumer: processStats([fleet.consumer], from, to)[0],
      upserts: fleet.upserts,
      errorLines: fleet.obs.errorLines,
      warnExamples: fleet.obs.warnExamples,
      readyMetrics,
      reload,
      crashes: crashesOf([fleet.consumer, ...fleet.everyMember]),
    };
  } finally {
    await fleet.close();
  }
}

// ---------------------------------------------------------------- report

const fmt = (value: number | null | undefined, digits = 0): string =>
  value === null || value === undefined || Number.isNaN(value)
    ? 'n/a'
    : value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const list = (stats: readonly ProcessStats[], pick: (s: ProcessStats) => number, digits = 0): string =>
  stats.length > 0 ? stats.map((s) => fmt(pick(s), digits)).join(' / ') : 'n/a';
const warningsText = (w: Record<string, number>): string =>
  Object.keys(w).length === 0
    ? 'none'
    : Object.entries(w)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');

const metricsText = (metrics: readonly ReplicaMetrics[], pick: (m: ReplicaMetrics) => string): string =>
  metrics.length > 0 ? metrics.map(pick).join(' / ') : 'n/a';
const crashText = (crashes: readonly Crash[]): string =>
  crashes.length === 0
    ? 'none'
    : crashes
        .map(
          (c) =>
            `${c.name} (exit ${c.code ?? c.signal}): ${(c.lastLines.find((l) => /Error/.test(l)) ?? c.lastLines.at(-1) ?? '').trim().slice(0, 90).replaceAll('|', '\\|')}`,
        )
        .join('; ');

const lockScripts = (d: RedisDelta): string => {
  const lock = d.byRole.lock;
  return lock ? `${fmt(lock.scriptsPerS, 1)}, ${fmt(lock.scriptMeanMs, 1)} ms` : 'n/a (no lock nodes)';
};
const slowText = (slow: SlowSummary): string =>
  (['lock', 'queue'] as const)
    .map((role) => {
      const x = slow.byRole[role];
      return x
        ? `${fmt(x.count)} (${fmt(x.over10Ms)} over 10 ms), ${fmt(x.maxMs, 1)} (keys: ${x.keysOfSlowest.join(' ')})`
        : 'n/a';
    })
    .join(' / ');

interface Target {
  name: string;
  value: string;
  target: string;
  met: boolean;
}

type Row = [string, (system: System) => string];
const tableOf = (rows: readonly Row[], systems: readonly System[]): string[] => [
  `| metric | ${systems.map((s) => LABEL[s]).join(' | ')} |`,
  `|---|${systems.map(() => '---:').join('|')}|`,
  ...rows.map(([name, cell]) => `| ${name} | ${systems.map((s) => cell(s)).join(' | ')} |`),
];

function perSecondTables(results: Partial<Record<System, PerSecondResult>>): string[] {
  const systems = SYSTEMS.filter((s) => results[s]);
  const r = (s: System): PerSecondResult => results[s] as PerSecondResult;
  const member = (s: System): string => (s === 'tickwarden' ? 'replica' : 'producer');
  const rowsA: Row[] = [
    ['expected ticks (schedules x seconds)', (s) => fmt(r(s).window.expected)],
    ['missed ticks (never started by the consumer)', (s) => fmt(r(s).window.missed)],
    ['duplicate ticks (started twice or more)', (s) => fmt(r(s).window.duplicates)],
    [
      'ticks whose lease takeover failed in the consumer',
      (s) => (s === 'tickwarden' ? fmt(r(s).window.takeoverFailed) : 'n/a (no lease)'),
    ],
    ['missed ticks whose previous tick started only after their time', (s) => fmt(r(s).window.missedAfterLateStart)],
    [
      'Tickwarden `enqueued`/`recovered` log lines per tick: ticks with 0 / with >1',
      (s) =>
        r(s).window.enqueue ? `${fmt(r(s).window.enqueue?.none)} / ${fmt(r(s).window.enqueue?.multiple)}` : 'n/a',
    ],
    [
      'tick-to-enqueue p50 / p99 / max, ms (negative: enqueued before its tick)',
      (s) =>
        r(s).window.enqueue
          ? `${fmt(r(s).window.enqueue?.lagP50Ms)} / ${fmt(r(s).window.enqueue?.lagP99Ms)} / ${fmt(r(s).window.enqueue?.lagMaxMs)}`
          : `n/a (job created ${fmt(r(s).window.createdAheadP50Ms)} ms before its tick, p50)`,
    ],
    [
      'tick-to-worker-start p50 / p99 / max, ms',
      (s) => `${fmt(r(s).window.startP50Ms)} / ${fmt(r(s).window.startP99Ms)} / ${fmt(r(s).window.startMaxMs)}`,
    ],
    [
      'Redis commands per tick per schedule (all servers, INFO commandstats)',
      (s) => fmt(r(s).commandsPerTickPerSchedule, 1),
    ],
    ['Redis CPU, % of one core (all servers)', (s) => fmt(r(s).redis.cpuPct, 1)],
    ['lock nodes: script calls per s, mean server ms per script (commandstats)', (s) => lockScripts(r(s).redis)],
    [
      `Redis scripts slower than ${SLOWLOG_US / 1000} ms (SLOWLOG): lock nodes count (over 10 ms), max ms (keys of the 5 slowest) / queue Redis the same`,
      (s) => slowText(r(s).slow),
    ],
    [`RSS per ${'replica'}/producer, peak MB`, (s) => list(r(s).members, (m) => m.rssMaxMb)],
    [`CPU per ${'replica'}/producer, % of one core`, (s) => list(r(s).members, (m) => m.cpuPct, 1)],
    ['consumer CPU %, peak RSS MB', (s) => `${fmt(r(s).consumer?.cpuPct, 1)}, ${fmt(r(s).consumer?.rssMaxMb)}`],
    [
      'Tickwarden outcomes other than `enqueued` (info and above) for these ticks',
      (s) => (s === 'tickwarden' ? warningsText(r(s).window.warnings) : 'n/a'),
    ],
    [
      "replica event-loop delay p99 / max over the window, ms (each replica's /metrics)",
      (s) => metricsText(r(s).replicaMetrics, (m) => `${fmt(m.loopDelayP99Ms)}/${fmt(m.loopDelayMaxMs)}`),
    ],
    [
      'replica V8 heap used / RSS at the end of the window, MB (/metrics)',
      (s) => metricsText(r(s).replicaMetrics, (m) => `${fmt(m.heapUsedMb)}/${fmt(m.rssMb)}`),
    ],
    ['processes that exited on their own (a and b)', (s) => crashText(r(s).crashes)],
    [
      `machine CPU busy, % of one core (of ${os.availableParallelism() * 100}): all / this system / the bench / other processes`,
      (s) =>
        [r(s).machine.busyPct, r(s).machine.systemPct, r(s).machine.benchPct, r(s).machine.otherPct]
          .map((x) => fmt(x))
          .join(' / '),
    ],
  ];
  const rowsB: Row[] = [
    ['expected ticks', (s) => fmt(r(s).rolling.expected)],
    ['missed ticks', (s) => fmt(r(s).rolling.missed)],
    ['duplicate ticks', (s) => fmt(r(s).rolling.duplicates)],
    [
      'ticks whose lease takeover failed in the consumer',
      (s) => (s === 'tickwarden' ? fmt(r(s).rolling.takeoverFailed) : 'n/a (no lease)'),
    ],
    ['missed ticks whose previous tick started only after their time', (s) => fmt(r(s).rolling.missedAfterLateStart)],
    ['missed ticks due between a SIGTERM and 2 s after its replacement was ready', (s) => fmt(r(s).missedNearRestart)],
    [
      'Tickwarden `enqueued`/`recovered` log lines per tick: ticks with 0 / with >1',
      (s) =>
        r(s).rolling.enqueue ? `${fmt(r(s).rolling.enqueue?.none)} / ${fmt(r(s).rolling.enqueue?.multiple)}` : 'n/a',
    ],
    ['tick-to-enqueue p99, ms', (s) => (r(s).rolling.enqueue ? fmt(r(s).rolling.enqueue?.lagP99Ms) : 'n/a')],
    [
      'tick-to-worker-start p50 / p99 / max, ms',
      (s) => `${fmt(r(s).rolling.startP50Ms)} / ${fmt(r(s).rolling.startP99Ms)} / ${fmt(r(s).rolling.startMaxMs)}`,
    ],
    [
      'SIGTERM to replacement ready, ms (each)',
      (s) =>
        r(s)
          .restarts.map((x) => fmt(x.readyAfterMs))
          .join(' / '),
    ],
    [
      'SIGTERM to exit of the stopped process, ms (exit code)',
      (s) =>
        r(s)
          .restarts.map((x) => `${fmt(x.drainMs)} (${x.exitCode ?? x.exitSignal})`)
          .join(' / '),
    ],
    [
      'BullMQ upserts per producer: ms (errors)',
      (s) =>
        s === 'bullmq'
          ? r(s)
              .upserts.map((u) => `${fmt(u.ms)} (${u.errors})`)
              .join(' / ')
          : 'n/a',
    ],
    ['Redis commands per tick per schedule', (s) => fmt(r(s).commandsPerTickPerScheduleRolling, 1)],
    ['lock nodes: script calls per s, mean server ms per script (commandstats)', (s) => lockScripts(r(s).redisRolling)],
    [
      `Redis scripts slower than ${SLOWLOG_US / 1000} ms (SLOWLOG): lock nodes count (over 10 ms), max ms (keys of the 5 slowest) / queue Redis the same`,
      (s) => slowText(r(s).slowRolling),
    ],
    [
      'Tickwarden outcomes other than `enqueued` (info and above) for these ticks',
      (s) => (s === 'tickwarden' ? warningsText(r(s).rolling.warnings) : 'n/a'),
    ],
  ];
  const any = r(systems[0] as System);
  return [
    `### (a) ${fmt(PER_SECOND_SCHEDULES)} schedules \`${PER_SECOND_PATTERN}\`, ${REPLICAS} ${member('tickwarden')}s / producers, ${WINDOW_S} s window (${any.window.from} .. ${any.window.to} for ${LABEL[systems[0] as System]})`,
    '',
    ...tableOf(rowsA, systems),
    '',
    ...commandBreakdown(systems.map((s) => [s, r(s).redis, r(s).window.expected])),
    `### (b) the same during a rolling restart of the ${REPLICAS} (SIGTERM one, start its replacement, ${ROLLING_PAUSE_MS / 1000} s after it is ready the next)`,
    '',
    ...tableOf(rowsB, systems),
    '',
  ];
}

/** Where the Redis commands of (a) go: per tick, by server role and command (Lua-internal calls included), the 0.1 and over. */
function commandBreakdown(rows: readonly [System, RedisDelta, number][]): string[] {
  const lines = ['Redis commands per tick of (a), by server role and command (INFO commandstats):', ''];
  for (const [system, redis, ticks] of rows) {
    const cells = (['lock', 'queue'] as const).flatMap((role) => {
      const delta = redis.byRole[role];
      if (!delta) return [];
      const perTick = Object.entries(delta.byCommand)
        .map(([command, calls]): [string, number] => [command, calls / ticks])
        .filter(([, n]) => n >= 0.05);
      return [`${role} ${fmt(delta.calls / ticks, 1)}: ${perTick.map(([c, n]) => `${c} ${fmt(n, 1)}`).join(', ')}`];
    });
    lines.push(`- ${LABEL[system]}: ${cells.join('; ')}`);
  }
  return [...lines, ''];
}

function burstTables(results: Partial<Record<System, BurstResult>>): string[] {
  const systems = SYSTEMS.filter((s) => results[s]);
  const r = (s: System): BurstResult => results[s] as BurstResult;
  const rows: Row[] = [
    [`start-up (Redis, consumer, ${REPLICAS} ready), ms`, (s) => fmt(r(s).startupMs)],
    [
      'reload (a comment added to one team file): write to every replica reloaded, ms; replica event-loop delay max, ms',
      (s) => {
        const reload = r(s).reload;
        if (!reload) return 'n/a';
        const overlap = reload.overlapped ? " (ran into the next boundary's contests)" : '';
        return `${fmt(reload.ms)}; ${metricsText(reload.metrics, (m) => fmt(m.loopDelayMaxMs))}${overlap}`;
      },
    ],
    [
      'replica V8 heap used / RSS once ready, before any boundary, MB (/metrics)',
      (s) => metricsText(r(s).readyMetrics, (m) => `${fmt(m.heapUsedMb)}/${fmt(m.rssMb)}`),
    ],
    [
      'BullMQ upserts per producer: ms (errors)',
      (s) =>
        s === 'bullmq'
          ? r(s)
              .upserts.map((u) => `${fmt(u.ms)} (${u.errors})`)
              .join(' / ')
          : 'n/a',
    ],
  ];
  const count = Math.max(...systems.map((s) => r(s).boundaries.length));
  for (let k = 0; k < count; k++) {
    const b = (s: System): BoundaryResult | undefined => r(s).boundaries[k];
    const cell = (f: (x: BoundaryResult) => string) => (s: System) => {
      const x = b(s);
      return x ? f(x) : 'not run';
    };
    rows.push(
      [
        `boundary ${k + 1}: missed / duplicate ticks (of ${fmt(BURST_SCHEDULES)})`,
        cell((x) => `${fmt(x.analysis.missed)} / ${fmt(x.analysis.duplicates)}`),
      ],
      [
        `boundary ${k + 1}: ticks whose lease takeover failed in the consumer`,
        (s) => (s === 'tickwarden' ? cell((x) => fmt(x.analysis.takeoverFailed))(s) : 'n/a (no lease)'),
      ],
      [
        `boundary ${k + 1}: boundary to all enqueued, ms (negative: before it); all promoted from delayed to wait`,
        (s) => {
          const x = b(s);
          if (!x) return 'not run';
          const promoted = `all promoted to wait: ${x.allPromotedMs === null ? 'n/a' : `${fmt(x.allPromotedMs)} ms`}`;
          if (s === 'tickwarden')
            return x.allEnqueuedMs === null
              ? `not all (${fmt(x.analysis.enqueue?.none)} missing)`
              : `${fmt(x.allEnqueuedMs)}; ${promoted}`;
          return `n/a (pre-created as delayed jobs ${fmt(x.analysis.createdAheadP50Ms / 1000, 1)} s ahead, p50); ${promoted}`;
        },
      ],
      [
        `boundary ${k + 1}: tick-to-enqueue p50 / p99, ms (negative: before the tick)`,
        cell((x) =>
          x.analysis.enqueue ? `${fmt(x.analysis.enqueue.lagP50Ms)} / ${fmt(x.analysis.enqueue.lagP99Ms)}` : 'n/a',
        ),
      ],
      [
        `boundary ${k + 1}: boundary to all started by the consumer, ms`,
        cell((x) => (x.allStartedMs === null ? 'not all' : fmt(x.allStartedMs))),
      ],
      [
        `boundary ${k + 1}: tick-to-worker-start p50 / p99, ms`,
        cell((x) => `${fmt(x.analysis.startP50Ms)} / ${fmt(x.analysis.startP99Ms)}`),
      ],
      [`boundary ${k + 1}: Redis commands per schedule (all servers)`, cell((x) => fmt(x.commandsPerSchedule, 1))],
      [
        `boundary ${k + 1}: lock nodes: mean server ms per script; SLOWLOG (> ${SLOWLOG_US / 1000} ms) lock / queue count, max ms`,
        cell((x) => `${lockScripts(x.redis)}; ${slowText(x.slow)}`),
      ],
      [
        `boundary ${k + 1}: Tickwarden outcomes other than \`enqueued\``,
        (s) =>
          s === 'tickwarden' ? (b(s) ? warningsText((b(s) as BoundaryResult).analysis.warnings) : 'not run') : 'n/a',
      ],
      [
        `boundary ${k + 1}: replica event-loop delay max, ms (/metrics)`,
        cell((x) => metricsText(x.replicaMetrics, (m) => fmt(m.loopDelayMaxMs))),
      ],
      [
        `boundary ${k + 1}: processes that exited on their own around it (restarted before the next boundary)`,
        (s) => {
          const x = b(s);
          if (!x) return 'not run';
          const at = Date.parse(x.boundary);
          return crashText(
            r(s).crashes.filter(
              (c) => Date.parse(c.at) >= at - BURST_LEAD_IN_MS && Date.parse(c.at) <= at + BURST_WAIT_MS,
            ),
          );
        },
      ],
    );
  }
  rows.push(
    [
      `RSS per replica/producer at ${fmt(BURST_SCHEDULES)} schedules, peak MB`,
      (s) => list(r(s).members, (m) => m.rssMaxMb),
    ],
    ['CPU per replica/producer over the boundaries, % of one core', (s) => list(r(s).members, (m) => m.cpuPct, 1)],
    ['consumer CPU %, peak RSS MB', (s) => `${fmt(r(s).consumer?.cpuPct, 1)}, ${fmt(r(s).consumer?.rssMaxMb)}`],
  );
  return [
    `### (c) ${fmt(BURST_SCHEDULES)} schedules \`${BURST_PATTERN}\` (all due at second 0 of every minute), ${REPLICAS} replicas / producers`,
    '',
    ...tableOf(rows, systems),
    '',
  ];
}

/**
 * The targets of issue #43 ("Plan ahead") that one run measures; with 6 replicas against 3 needs a
 * second run (BENCH_REPLICAS=6), and the lock library's its own bench.
 */
function targets(
  perSecond: Partial<Record<System, PerSecondResult>>,
  burst: Partial<Record<System, BurstResult>>,
): Target[] {
  const list: Target[] = [];
  const tw = perSecond.tickwarden;
  const peer = perSecond.bullmq;
  if (tw) {
    const loopP99 = Math.max(...tw.replicaMetrics.map((m) => m.loopDelayP99Ms));
    list.push(
      {
        name: '(a) Tickwarden missed / duplicate ticks',
        value: `${tw.window.missed} / ${tw.window.duplicates}`,
        target: '0 / 0',
        met: tw.window.missed === 0 && tw.window.duplicates === 0,
      },
      {
        name: '(b) Tickwarden missed / duplicate ticks during the rolling restart',
        value: `${tw.rolling.missed} / ${tw.rolling.duplicates}`,
        target: '0 / 0',
        met: tw.rolling.missed === 0 && tw.rolling.duplicates === 0,
      },
      {
        name: '(a) ticks whose lease takeover failed in the consumer',
        value: fmt(tw.window.takeoverFailed),
        target: '0',
        met: tw.window.takeoverFailed === 0,
      },
      {
        name: '(a) Tickwarden replica event-loop delay p99 (worst replica)',
        value: `${fmt(loopP99)} ms`,
        target: '< 50 ms',
        met: loopP99 < 50,
      },
    );
    if (peer) {
      const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
      const lock = tw.redis.byRole.lock?.calls ?? 0;
      const queue = tw.redis.byRole.queue?.calls ?? 0;
      const queuePerTick = lock + queue > 0 ? (tw.commandsPerTickPerSchedule * queue) / (lock + queue) : 0;
      const lockSlowestMs = tw.slow.byRole.lock?.maxMs ?? 0;
      const peerSlowestMs = peer.slow.byRole.queue?.maxMs ?? 0;
      list.push(
        {
          name: '(a) tick-to-worker-start p99, Tickwarden / BullMQ Job Schedulers',
          value: `${fmt(tw.window.startP99Ms)} ms / ${fmt(peer.window.startP99Ms)} ms = ${ratio(tw.window.startP99Ms, peer.window.startP99Ms)}`,
          target: '<= 1.1x',
          met: tw.window.startP99Ms <= 1.1 * peer.window.startP99Ms,
        },
        {
          name: '(a) Redis commands per tick, Tickwarden / BullMQ',
          value: `${fmt(tw.commandsPerTickPerSchedule, 1)} / ${fmt(peer.commandsPerTickPerSchedule, 1)} = ${ratio(tw.commandsPerTickPerSchedule, peer.commandsPerTickPerSchedule)}`,
          target: '<= 1.2x',
          met: tw.commandsPerTickPerSchedule <= 1.2 * peer.commandsPerTickPerSchedule,
        },
        {
          name: "(a) Tickwarden's queue Redis commands per tick / BullMQ's whole",
          value: `${fmt(queuePerTick, 1)} / ${fmt(peer.commandsPerTickPerSchedule, 1)}`,
          target: '<= 1.0x',
          met: queuePerTick <= peer.commandsPerTickPerSchedule,
        },
        {
          // Both systems run the same ticks per second: the ratio of their CPU is the ratio per tick.
          name: '(a) CPU of the whole system (members, every Redis, the consumer), Tickwarden / BullMQ',
          value: ratio(tw.machine.systemPct, peer.machine.systemPct),
          target: '<= 1.3x',
          met: tw.machine.systemPct <= 1.3 * peer.machine.systemPct,
        },
        {
          name: "(a) slowest lock-node script call / BullMQ's slowest queue script (SLOWLOG, over 5 ms)",
          value: `${fmt(lockSlowestMs, 1)} ms / ${fmt(peerSlowestMs, 1)} ms`,
          target: 'no slower',
          met: lockSlowestMs <= peerSlowestMs,
        },
      );
    }
  }
  const twBurst = burst.tickwarden;
  if (twBurst) {
    const missed = twBurst.boundaries.reduce((sum, b) => sum + b.analysis.missed, 0);
    const dups = twBurst.boundaries.reduce((sum, b) => sum + b.analysis.duplicates, 0);
    const enqueued = twBurst.boundaries.map((b) => b.allEnqueuedMs);
    const started = twBurst.boundaries.map((b) => b.allStartedMs);
    const peerStarted = burst.bullmq?.boundaries.map((b) => b.allStartedMs) ?? [];
    const rss = Math.max(...twBurst.members.map((m) => m.rssMaxMb));
    const takeoverFailed = twBurst.boundaries.reduce((sum, b) => sum + b.analysis.takeoverFailed, 0);
    const each = (values: (number | null)[]) =>
      values.map((ms) => (ms === null ? 'not all' : `${fmt(ms)} ms`)).join(', ');
    list.push(
      {
        name: `(c) Tickwarden missed / duplicate ticks (${twBurst.boundaries.length} boundaries)`,
        value: `${missed} / ${dups}`,
        target: '0 / 0',
        met: missed === 0 && dups === 0 && twBurst.boundaries.length > 0,
      },
      {
        name: '(c) ticks whose lease takeover failed in the consumer',
        value: fmt(takeoverFailed),
        target: '0',
        met: takeoverFailed === 0 && twBurst.boundaries.length > 0,
      },
      {
        name: `(c) Tickwarden: all ${fmt(BURST_SCHEDULES)} enqueued, ms after the boundary (each; negative: before it)`,
        value: each(enqueued),
        target: '< 0 ms',
        met: enqueued.length > 0 && enqueued.every((ms) => ms !== null && ms < 0),
      },
      {
        name: '(c) all started by the consumer, ms after the boundary (each), Tickwarden / BullMQ',
        value: `${each(started)} / ${peerStarted.length > 0 ? each(peerStarted) : 'not run'}`,
        target: '<= 1.1x BullMQ, each boundary',
        met:
          started.length > 0 &&
          started.length === peerStarted.length &&
          started.every((ms, i) => {
            const peerMs = peerStarted[i];
            return ms !== null && peerMs !== null && peerMs !== undefined && ms <= 1.1 * peerMs;
          }),
      },
      {
        name: `(c) Tickwarden RSS per replica at ${fmt(BURST_SCHEDULES)} schedules (peak of the ${REPLICAS})`,
        value: `${fmt(rss)} MB`,
        target: '<= 300 MB',
        met: rss <= 300,
      },
      {
        name: `(c) reload of ${fmt(BURST_SCHEDULES)} schedules: replica event-loop delay max (worst replica)`,
        value:
          twBurst.reload && twBurst.reload.metrics.length > 0
            ? `${fmt(Math.max(...twBurst.reload.metrics.map((m) => m.loopDelayMaxMs)))} ms (${twBurst.reload.metrics.length} of ${REPLICAS} answered${twBurst.reload.overlapped ? "; it ran into the next boundary's contests" : ''})`
            : 'n/a',
        target: '<= 100 ms',
        met:
          twBurst.reload !== undefined &&
          !twBurst.reload.overlapped &&
          twBurst.reload.metrics.length === REPLICAS &&
          twBurst.reload.metrics.every((m) => m.loopDelayMaxMs <= 100),
      },
    );
  }
  return list;
}

// ---------------------------------------------------------------- main

function git(...args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const redisVersion =
    /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? 'unknown';
  const env = {
    date: startedAt.toISOString(),
    nproc: os.availableParallelism(),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    redisServer: redisVersion,
    bullmq: (JSON.parse(readFileSync(new URL('node_modules/bullmq/package.json', ROOT), 'utf8')) as { version: string })
      .version,
    command: 'npm run bench:scheduler',
    commit: git('rev-parse', '--short', 'HEAD'),
    /** Uncommitted changes in what the replicas run when the run started (the code measured may differ from the commit). */
    srcChanges: git('status', '--porcelain', '--', 'apps/scheduler/src', 'libs')
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => line.replace(/^\s*\S+\s+/, '')),
    loadAverageAtStart: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
  const perSecond: Partial<Record<System, PerSecondResult>> = {};
  const burst: Partial<Record<System, BurstResult>> = {};
  if (SCENARIOS.includes('ab')) for (const system of SYSTEMS) perSecond[system] = await runPerSecond(system);
  // The order is reversed for (c), so neither system always runs first.
  if (SCENARIOS.includes('c')) for (const system of SYSTEMS.toReversed()) burst[system] = await runBurst(system);
  const seconds = (Date.now() - startedAt.getTime()) / 1000;
  const loadAverageAtEnd = os.loadavg().map((x) => Math.round(x * 100) / 100);
  const targetList = targets(perSecond, burst);

  const header = [
    `Scheduler benchmark, ${env.date}: ${env.nproc} CPUs (${env.cpu}), ${env.memoryGb} GB, Node ${env.node}, redis-server ${env.redisServer} (local processes, AOF off), BullMQ ${env.bullmq}; total ${fmt(seconds)} s.`,
    `Code at commit ${env.commit}${env.srcChanges.length > 0 ? ` with uncommitted changes in ${env.srcChanges.join(', ')}` : ''}, built once at the start (every phase's replicas run that build); load average (1/5/15 min) ${env.loadAverageAtStart.join(' / ')} at start, ${loadAverageAtEnd.join(' / ')} at end.${STALL_S > 0 ? ` BENCH_STALL_S=${STALL_S}: every replica / producer stopped (SIGSTOP) for ${STALL_S} s, ${STALL_AT_MS / 1000} s into (a)'s window.` : ''}`,
    `Tickwarden: ${REPLICAS} scheduler processes (\`node ${[...TW_NODE_FLAGS, ''].join(' ')}apps/scheduler/dist/main.js\`, compiled by \`nx run scheduler:build\` as the image runs it; LOG_LEVEL=${TW_LOG_LEVEL}), ${LOCK_NODES} lock Redis + 1 queue Redis, one config file, every setting but cron and handler at its default (\`overlap: skip\`, lease TTL 30 s). ` +
      `BullMQ: ${REPLICAS} producer processes (bench/bullmq-producer.ts type-stripped to plain JavaScript) each upserting the same job schedulers at start (100 upserts in flight), one Redis. ` +
      'The systems run one after the other (never at the same time), each on fresh Redis servers; the consumer is the same process for both: one BullMQ Worker, concurrency 100, that records each job and completes it at once.',
    `Ticks: Tickwarden \`job.data.tickMs\`; BullMQ the \`<ms>\` of the job id \`repeat:<scheduler>:<ms>\`. Missed = an expected tick the consumer never started (waited up to ${DRAIN_MS / 1000} s after the window); duplicate = a tick it started more than once. ` +
      `Tick-to-enqueue is Tickwarden's logged \`lagMs\` (negative: its job was enqueued, as a delayed job, before the tick: the contest lead of apps/scheduler/README.md); BullMQ creates each run's job ahead of time as a delayed job, so it has no enqueue moment after the tick. CPU and RSS are sampled from /proc every ${SAMPLE_MS / 1000} s; Redis commands are INFO commandstats deltas (Lua-internal calls included, INFO excluded) summed over every Redis of the system, workers' commands included.`,
    '',
  ].join('\n');
  const body = [
    ...(Object.keys(perSecond).length > 0 ? perSecondTables(perSecond) : []),
    ...(Object.keys(burst).length > 0 ? burstTables(burst) : []),
    'Targets:',
    '',
    ...targetList.map((t) => `- ${t.met ? 'MET' : 'MISSED'}: ${t.name}: ${t.value} (target ${t.target})`),
    '',
  ].join('\n');
  const markdown = `${header}\n${body}`;
  const outDir = new URL('bench-results/', ROOT);
  await mkdir(outDir, { recursive: true });
  await writeFile(
    new URL('scheduler.json', outDir),
    `${JSON.stringify(
      {
        env: { ...env, loadAverageAtEnd },
        durationSeconds: seconds,
        settings: {
          REPLICAS,
          LOCK_NODES,
          PER_SECOND_SCHEDULES,
          PER_SECOND_PATTERN,
          BURST_SCHEDULES,
          BURST_PATTERN,
          WARMUP_MS,
          WINDOW_S,
          ROLLING_PAUSE_MS,
          BOUNDARIES,
          SAMPLE_MS,
          DRAIN_MS,
          BURST_WAIT_MS,
          CONSUMER_CONCURRENCY: 100,
        },
        perSecond,
        burst,
        targets: targetList,
      },
      null,
      2,
    )}\n`,
  );
  await writeFile(new URL('scheduler.md', outDir), markdown);
  process.stdout.write(`${markdown}\n`);
  log('wrote bench-results/scheduler.json and bench-results/scheduler.md');
}

async function cleanUp(): Promise<void> {
  const pending = [...closers].reverse();
  closers.clear();
  for (const close of pending) await close().catch(noop);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: cleaning up`);
    void cleanUp().finally(() => process.exit(130));
  });
}
const limit = setTimeout(() => {
  log(`run limit of ${RUN_LIMIT_MS / 60_000} min reached: cleaning up`);
  void cleanUp().finally(() => process.exit(1));
}, RUN_LIMIT_MS);
limit.unref();

try {
  await main();
} catch (error) {
  process.exitCode = 1;
  console.error(error);
} finally {
  clearTimeout(limit);
  await cleanUp();
}
