/**
 * `npm run bench:redlock`: this library next to node-redlock 5.0.0-beta.2 and a
 * raw SET NX PX / compare-and-delete floor, on the same local Redis nodes, with
 * 5 then 3 nodes. A script, not a test: it measures and reports, it asserts
 * nothing (targets are printed as met / missed). Each implementation runs in a process of its
 * own (impl-worker.ts), which this one drives and around which it reads the nodes' counters.
 * Every measurement runs in
 * `ROUNDS` rounds with the implementations interleaved in a rotating order, and
 * every rate is reported as median [min-max] over the rounds. Results go to
 * `bench-results/redlock.json` and `bench-results/redlock.md` at the repo root.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { closeAllProcesses, ImplProcess } from './impl-process.ts';
import { IMPLS, RETRY, type ContentionOutcome, type ContentionRow, type ImplName } from './implementations.ts';
import { DEFAULT_SETTINGS } from '../src/index.ts';

const NODE_COUNTS = [5, 3] as const;
const ROUNDS = 3;
/**
 * Unmeasured cycles per implementation before the first sequential round: V8 optimizes a function
 * only once it ran hot for a while, and a round that still runs unoptimized code measures the
 * compiler, not the implementation (BENCHMARK.md, "Rounds").
 */
const SEQ_WARMUP = 2_000;
/** Per round and implementation. */
const SEQ_CYCLES = 2_000;
const CONC_LOOPS = 50;
/** Per round and implementation. */
const CONC_MS = 1_000;
/** One unmeasured burst of the concurrent loops per implementation first, for the same reason as SEQ_WARMUP. */
const CONC_WARMUP_MS = 300;
const CONT_CONTENDERS = 20;
/** Per round, row and implementation. */
const CONT_MS = 2_000;
/** One unmeasured contention burst per implementation first, so that no round pays for opening connections. */
const CONT_WARMUP_MS = 300;
/** A short critical section on a short TTL, and none at all on the default-sized TTL. */
const CONTENTION_ROWS = [
  { holdMs: 2, ttlMs: 1_000 },
  { holdMs: 0, ttlMs: 10_000 },
] as const satisfies readonly ContentionRow[];
const BATCH_SIZE = 1_000;
const TTL_MS = 10_000;
/** What `BENCH_ROWS` may name (comma-separated): the measurements to run; all of them by default. */
const MEASUREMENTS = ['sequential', 'concurrent', 'contention', 'batch'] as const;
type Measurement = (typeof MEASUREMENTS)[number];
const isMeasurement = (name: string): name is Measurement => (MEASUREMENTS as readonly string[]).includes(name);

/** The measurements `BENCH_ROWS` names; an unknown name exits with status 2 before any node starts. */
function selectedMeasurements(): ReadonlySet<Measurement> {
  const names = (process.env['BENCH_ROWS'] ?? '').split(',').map((name) => name.trim());
  if (names.every((name) => name === '')) return new Set(MEASUREMENTS);
  const unknown = names.filter((name) => !isMeasurement(name));
  if (unknown.length > 0) {
    process.stderr.write(
      `BENCH_ROWS: unknown ${unknown.map((name) => `"${name}"`).join(', ')}; expected a comma-separated list of ${MEASUREMENTS.join(', ')}\n`,
    );
    process.exit(2);
  }
  return new Set(names.filter(isMeasurement));
}
const MEASURED = selectedMeasurements();
/** `items` when `measurement` runs, else none (its rows and targets are left out of the report). */
const ifMeasured = <T>(measurement: Measurement, items: T[]): T[] => (MEASURED.has(measurement) ? items : []);

/** Issue #22's targets for tickwarden. */
const TARGET = { seqVsPeer: 1, seqVsFloor: 1, concVsPeer: 3, jain: 0.95, maxGapMs: 10 } as const;

const FLOORS = ['floor-plain', 'floor-pipelined'] as const satisfies readonly ImplName[];
const NODE_REDLOCKS = ['node-redlock', 'node-redlock-pipelined'] as const satisfies readonly ImplName[];
/** The implementations that retry, and so can contend: the floor makes one attempt. */
const RETRYING = ['tickwarden', ...NODE_REDLOCKS] as const satisfies readonly ImplName[];
type RetryingName = (typeof RETRYING)[number];
const COLUMN: Record<ImplName, string> = {
  tickwarden: 'tickwarden',
  'node-redlock': 'node-redlock (plain clients)',
  'node-redlock-pipelined': 'node-redlock (auto-pipelined clients)',
  'floor-plain': 'floor (plain clients)',
  'floor-pipelined': 'floor (auto-pipelined clients)',
};

const noop = (): void => undefined;

/** Every node set the run opened, closed on exit even after an error (the workers: closeAllProcesses). */
const closers = new Set<() => Promise<void>>();

// ---------------------------------------------------------------- Redis command counts

type CommandCounts = Record<string, number>;

/** Per node and command: its INFO commandstats calls and usec (server time). */
type CommandStats = Record<string, { calls: number; usec: number }>;

async function commandStats(nodes: RedisNodes, count: number): Promise<CommandStats[]> {
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const info = await nodes.node(i).info('commandstats');
      const stats: CommandStats = {};
      for (const [field, value] of Object.entries(info)) {
        const calls = /(?:^|,)calls=(\d+)/.exec(value);
        const usec = /(?:^|,)usec=(\d+)/.exec(value);
        if (field.startsWith('cmdstat_') && calls)
          stats[field.slice('cmdstat_'.length)] = { calls: Number(calls[1]), usec: Number(usec?.[1] ?? 0) };
      }
      return stats;
    }),
  );
}

/** Per node: the calls (or usec) of each command between two snapshots (Lua's own calls included), without the snapshots' INFO and HELLO. */
function deltas(before: CommandStats[], after: CommandStats[], field: 'calls' | 'usec' = 'calls'): CommandCounts[] {
  return after.map((stats, i) => {
    const delta: CommandCounts = {};
    for (const [name, stat] of Object.entries(stats)) {
      const d = stat[field] - (before[i]?.[name]?.[field] ?? 0);
      if (d > 0 && name !== 'info' && name !== 'hello') delta[name] = d;
    }
    return delta;
  });
}

/** Adds every node's counts into `into`. */
function addCounts(into: CommandCounts, perNode: readonly CommandCounts[]): void {
  for (const counts of perNode) for (const [name, n] of Object.entries(counts)) into[name] = (into[name] ?? 0) + n;
}

const sumCounts = (counts: CommandCounts): number => Object.values(counts).reduce((a, b) => a + b, 0);
const scriptCalls = (d: CommandCounts): number => (d['evalsha'] ?? 0) + (d['eval'] ?? 0);
const isFloor = (impl: ImplName): boolean => (FLOORS as readonly ImplName[]).includes(impl);
/** Commands the client sent (not the ones scripts ran): scripts, and the floor's SETs when acquiring. */
const clientCalls = (d: CommandCounts, impl: ImplName, phase: 'acquire' | 'release' | 'cycle'): number =>
  scriptCalls(d) + (isFloor(impl) && phase !== 'release' ? (d['set'] ?? 0) : 0);

// ---------------------------------------------------------------- measurements

/** A figure measured once per round. */
interface Spread {
  median: number;
  min: number;
  max: number;
  rounds: number[];
}

function spread(rounds: readonly number[]): Spread {
  const sorted = rounds.toSorted((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  return { median, min: sorted[0] ?? Number.NaN, max: sorted.at(-1) ?? Number.NaN, rounds: [...rounds] };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] as number;
}

/** One implementation's accumulated sequential samples over the rounds. */
class SequentialSamples {
  cyclesPerSec: number[] = [];
  acquireMs: number[] = [];
  releaseMs: number[] = [];
  errors = 0;
  /** Server time of the commands the client sent (INFO commandstats usec), all nodes. */
  serverUs = 0;
  /** Calls of each command on all nodes together, Lua's own included. */
  commands: CommandCounts = {};
}

interface Sequential {
  cyclesPerSec: Spread;
  cycles: number;
  acquireP50Ms: number;
  acquireP99Ms: number;
  releaseP50Ms: number;
  releaseP99Ms: number;
  errors: number;
  /** Per cycle, the server time of the commands the client sent (scripts; the floor's SET too), summed over the nodes. */
  serverUsPerCycle: number;
  /** Per cycle, the Redis commands run on all nodes together, Lua's own included. */
  commandsPerCycle: number;
  /** The same, by command. */
  commandsByName: CommandCounts;
}

/** One round of `SEQ_CYCLES` sequential acquire+release cycles on one key. */
async function sequentialRound(
  worker: ImplProcess,
  impl: ImplName,
  key: string,
  nodes: RedisNodes,
  count: number,
  into: SequentialSamples,
): Promise<void> {
  const statsBefore = await commandStats(nodes, count);
  const round = await worker.request<{ acquireMs: number[]; releaseMs: number[]; errors: number; seconds: number }>({
    op: 'sequential',
    key,
    cycles: SEQ_CYCLES,
    ttlMs: TTL_MS,
  });
  for (const ms of round.acquireMs) into.acquireMs.push(ms);
  for (const ms of round.releaseMs) into.releaseMs.push(ms);
  into.errors += round.errors;
  into.cyclesPerSec.push(round.acquireMs.length / round.seconds);
  // The last release's calls past the quorum still run: let them land in this round's counts, not the next one's.
  await sleep(20);
  const statsAfter = await commandStats(nodes, count);
  addCounts(into.commands, deltas(statsBefore, statsAfter));
  into.serverUs += deltas(statsBefore, statsAfter, 'usec').reduce((sum, d) => sum + clientCalls(d, impl, 'cycle'), 0);
}

function summarizeSequential(samples: SequentialSamples): Sequential {
  const acquireMs = samples.acquireMs.toSorted((x, y) => x - y);
  const releaseMs = samples.releaseMs.toSorted((x, y) => x - y);
  const cycles = acquireMs.length;
  return {
    cyclesPerSec: spread(samples.cyclesPerSec),
    cycles,
    acquireP50Ms: percentile(acquireMs, 0.5),
    acquireP99Ms: percentile(acquireMs, 0.99),
    releaseP50Ms: percentile(releaseMs, 0.5),
    releaseP99Ms: percentile(releaseMs, 0.99),
    errors: samples.errors,
    serverUsPerCycle: samples.serverUs / cycles,
    commandsPerCycle: sumCounts(samples.commands) / cycles,
    commandsByName: Object.fromEntries(Object.entries(samples.commands).map(([name, n]) => [name, n / cycles])),
  };
}

/** One implementation's accumulated concurrent samples over the rounds. */
class ConcurrentSamples {
  cyclesPerSec: number[] = [];
  cycles = 0;
  errors = 0;
  clientCpuUs = 0;
  redisCpuUs = 0;
}

interface Concurrent {
  cyclesPerSec: Spread;
  cycles: number;
  errors: number;
  /** CPU time of the implementation's process per cycle (its clients and library), µs. */
  clientCpuUsPerCycle: number;
  /** CPU time of all the redis-server nodes together per cycle (INFO cpu), µs. */
  redisCpuUsPerCycle: number;
}

/** Seconds of CPU (user + sys) each of the first `count` nodes has used. */
async function redisCpuSeconds(nodes: RedisNodes, count: number): Promise<number> {
  const infos = await Promise.all(Array.from({ length: count }, (_, i) => nodes.node(i).info('cpu')));
  return infos.reduce((sum, info) => sum + Number(info['used_cpu_user'] ?? 0) + Number(info['used_cpu_sys'] ?? 0), 0);
}

/** The concurrent loops in `worker` for `ms`: the cycles, errors, seconds and the worker's CPU (µs). */
const concurrentLoops = (worker: ImplProcess, keyBase: string, ms: number) =>
  worker.request<{ cycles: number; errors: number; seconds: number; cpuUs: number }>({
    op: 'concurrent',
    keyBase,
    ms,
    loops: CONC_LOOPS,
    ttlMs: TTL_MS,
  });

/** One round of the concurrent loops, for `CONC_MS`. */
async function concurrentRound(
  worker: ImplProcess,
  keyBase: string,
  nodes: RedisNodes,
  count: number,
  into: ConcurrentSamples,
): Promise<void> {
  const redisBefore = await redisCpuSeconds(nodes, count);
  const { cycles, errors, seconds, cpuUs } = await concurrentLoops(worker, keyBase, CONC_MS);
  into.errors += errors;
  into.cyclesPerSec.push(cycles / seconds);
  into.clientCpuUs += cpuUs;
  into.redisCpuUs += ((await redisCpuSeconds(nodes, count)) - redisBefore) * 1e6;
  into.cycles += cycles;
}

const summarizeConcurrent = (samples: ConcurrentSamples): Concurrent => ({
  cyclesPerSec: spread(samples.cyclesPerSec),
  cycles: samples.cycles,
  errors: samples.errors,
  clientCpuUsPerCycle: samples.clientCpuUs / samples.cycles,
  redisCpuUsPerCycle: samples.redisCpuUs / samples.cycles,
});

interface ContentionRound extends ContentionOutcome {
  /** What the round cost, drain included (contentionPhase measures it): the contenders' process's CPU and all nodes' (INFO cpu), µs. */
  clientCpuUs: number;
  redisCpuUs: number;
  /** All nodes together: the script calls the clients sent (each a request and a reply), the PUBLISHes scripts ran, every command. */
  scriptCalls: number;
  publishes: number;
  commands: number;
  /** All nodes together: the server time of those script calls (INFO commandstats usec, their commands included), µs. */
  scriptUs: number;
}

interface Contention {
  holdMs: number;
  ttlMs: number;
  acquisitionsPerSec: Spread;
  jain: Spread;
  maxGapMs: Spread;
  maxGcPauseMs: Spread;
  gcInMaxGapMs: Spread;
  noCpuInMaxGapMs: Spread;
  /** The lowest and highest per-contender acquisition counts, per round. */
  minPerContender: number[];
  maxPerContender: number[];
  /** Summed over the rounds. */
  exhausted: number;
  otherErrors: number;
  violations: number;
  /** Per acquisition, over all rounds together (see ContentionRound). */
  clientCpuUsPerAcquisition: number;
  redisCpuUsPerAcquisition: number;
  scriptCallsPerAcquisition: number;
  publishesPerAcquisition: number;
  commandsPerAcquisition: number;
  scriptUsPerAcquisition: number;
  rounds: ContentionRound[];
}

/** The round with the longest gap between holders. */
function longestRound(c: Contention): ContentionRound {
  return c.rounds.reduce((a, b) => (b.maxGapMs > a.maxGapMs ? b : a));
}

function summarizeContention(row: ContentionRow, rounds: readonly ContentionRound[]): Contention {
  const total = (f: (r: ContentionRound) => number): number => rounds.reduce((sum, r) => sum + f(r), 0);
  return {
    holdMs: row.holdMs,
    ttlMs: row.ttlMs,
    acquisitionsPerSec: spread(rounds.map((r) => r.acquisitionsPerSec)),
    jain: spread(rounds.map((r) => r.jain)),
    maxGapMs: spread(rounds.map((r) => r.maxGapMs)),
    maxGcPauseMs: spread(rounds.map((r) => r.maxGcPauseMs)),
    gcInMaxGapMs: spread(rounds.map((r) => r.gcInMaxGapMs)),
    noCpuInMaxGapMs: spread(rounds.map((r) => r.noCpuInMaxGapMs)),
    minPerContender: rounds.map((r) => Math.min(...r.perContender)),
    maxPerContender: rounds.map((r) => Math.max(...r.perContender)),
    exhausted: total((r) => r.exhausted),
    otherErrors: total((r) => r.otherErrors),
    violations: total((r) => r.violations),
    clientCpuUsPerAcquisition: total((r) => r.clientCpuUs) / total((r) => r.acquisitions),
    redisCpuUsPerAcquisition: total((r) => r.redisCpuUs) / total((r) => r.acquisitions),
    scriptCallsPerAcquisition: total((r) => r.scriptCalls) / total((r) => r.acquisitions),
    publishesPerAcquisition: total((r) => r.publishes) / total((r) => r.acquisitions),
    commandsPerAcquisition: total((r) => r.commands) / total((r) => r.acquisitions),
    scriptUsPerAcquisition: total((r) => r.scriptUs) / total((r) => r.acquisitions),
    rounds: [...rounds],
  };
}

/** A contention round with what it cost: CPU (the contenders' process and the nodes) and the nodes' commands. */
/** One contention round of the contenders in `worker`: what it saw, and the worker's CPU (µs). */
const contentionRound = (worker: ImplProcess, key: string, row: ContentionRow, ms: number) =>
  worker.request<ContentionOutcome & { cpuUs: number }>({ op: 'contention', key, row, ms });

async function measuredContentionRound(
  worker: ImplProcess,
  key: string,
  row: ContentionRow,
  nodes: RedisNodes,
  count: number,
): Promise<ContentionRound> {
  const [redisBefore, statsBefore] = [await redisCpuSeconds(nodes, count), await commandStats(nodes, count)];
  const { cpuUs, ...round } = await contentionRound(worker, key, row, CONT_MS);
  const statsAfter = await commandStats(nodes, count);
  const counts: CommandCounts = {};
  const usec: CommandCounts = {};
  addCounts(counts, deltas(statsBefore, statsAfter));
  addCounts(usec, deltas(statsBefore, statsAfter, 'usec'));
  return {
    ...round,
    clientCpuUs: cpuUs,
    redisCpuUs: ((await redisCpuSeconds(nodes, count)) - redisBefore) * 1e6,
    scriptCalls: scriptCalls(counts),
    publishes: counts['publish'] ?? 0,
    commands: sumCounts(counts),
    scriptUs: scriptCalls(usec),
  };
}

interface BatchRound {
  acquired: number;
  acquireMs: number;
  releaseMs: number;
  /** Per node, the commands each phase ran (INFO commandstats deltas). */
  acquireCommands: CommandCounts[];
  releaseCommands: CommandCounts[];
}

interface Batch {
  resources: number;
  acquireMs: Spread;
  releaseMs: Spread;
  rounds: BatchRound[];
}

async function batchRound(worker: ImplProcess, nodes: RedisNodes, count: number, keyBase: string): Promise<BatchRound> {
  // Stragglers past the quorum are not awaited by the libraries: let them land before each snapshot.
  const settle = () => sleep(100);
  const s0 = await commandStats(nodes, count);
  const acquired = await worker.request<{ acquired: number; ms: number }>({
    op: 'batch-acquire',
    keyBase,
    size: BATCH_SIZE,
    ttlMs: TTL_MS,
  });
  await settle();
  const s1 = await commandStats(nodes, count);
  const released = await worker.request<{ ms: number }>({ op: 'batch-release' });
  await settle();
  const s2 = await commandStats(nodes, count);
  return {
    acquired: acquired.acquired,
    acquireMs: acquired.ms,
    releaseMs: released.ms,
    acquireCommands: deltas(s0, s1),
    releaseCommands: deltas(s1, s2),
  };
}

const summarizeBatch = (rounds: readonly BatchRound[]): Batch => ({
  resources: BATCH_SIZE,
  acquireMs: spread(rounds.map((r) => r.acquireMs)),
  releaseMs: spread(rounds.map((r) => r.releaseMs)),
  rounds: [...rounds],
});

// ---------------------------------------------------------------- report

interface ImplResult {
  sequential: Sequential;
  concurrent: Concurrent;
  /** One per `CONTENTION_ROWS` entry; none for the floors, which do not retry. */
  contention: Contention[];
  batch: Batch;
}

interface Target {
  name: string;
  value: string;
  /** Undefined for figures printed for the record. */
  target?: string;
  met?: boolean;
}

interface RunResult {
  nodes: number;
  results: Record<ImplName, ImplResult>;
  targets: Target[];
}

const fmt = (x: number, digits = 0): string =>
  Number.isFinite(x)
    ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : 'n/a';
const fmtSpread = (s: Spread, digits = 0): string =>
  `${fmt(s.median, digits)} [${fmt(s.min, digits)}-${fmt(s.max, digits)}]`;
const rowName = (row: ContentionRow): string => `hold ${row.holdMs} ms, TTL ${fmt(row.ttlMs)} ms`;

function table(run: RunResult): string {
  type Row = [string, (x: ImplResult, impl: ImplName) => string];
  const contentionRows = CONTENTION_ROWS.flatMap((row, i): Row[] => {
    const cont = (f: (c: Contention) => string) => (x: ImplResult) => {
      const c = x.contention[i];
      return c ? f(c) : 'n/a (no retries)';
    };
    const label = `contention, ${rowName(row)}`;
    return [
      [
        `${label}: ${CONT_CONTENDERS} contenders on one key (${CONT_MS / 1000} s per round), acquisitions/s`,
        cont((c) => fmtSpread(c.acquisitionsPerSec, 1)),
      ],
      [`${label}: Jain fairness index`, cont((c) => fmtSpread(c.jain, 3))],
      [
        `${label}: per-contender acquisitions min / max, each round`,
        cont((c) =>
          c.minPerContender.map((min, r) => `${fmt(min)} / ${fmt(c.maxPerContender[r] ?? Number.NaN)}`).join(', '),
        ),
      ],
      [`${label}: longest gap between holders, ms`, cont((c) => fmtSpread(c.maxGapMs, 1))],
      [
        `${label}: the contenders' process: its garbage-collection pauses within each round's longest gap / its longest pause, ms`,
        cont((c) => `${fmtSpread(c.gcInMaxGapMs, 1)} / ${fmtSpread(c.maxGcPauseMs, 1)}`),
      ],
      [
        `${label}: the contenders' process: time within each round's longest gap it was due to run but got no CPU, ms`,
        cont((c) => fmtSpread(c.noCpuInMaxGapMs, 1)),
      ],
      [
        `${label}: acquires that exhausted retries (all rounds)`,
        cont((c) => fmt(c.exhausted) + (c.otherErrors ? ` (+${c.otherErrors} other errors)` : '')),
      ],
      [`${label}: mutual-exclusion violations (all rounds)`, cont((c) => fmt(c.violations))],
      [
        `${label}: CPU per acquisition, µs: the contenders' process (all ${CONT_CONTENDERS}) / all redis-servers`,
        cont((c) => `${fmt(c.clientCpuUsPerAcquisition)} / ${fmt(c.redisCpuUsPerAcquisition)}`),
      ],
      [
        `${label}: per acquisition, all nodes: script calls sent / PUBLISHes run / Redis commands (Lua-internal included) / script server time, µs`,
        cont(
          (c) =>
            `${fmt(c.scriptCallsPerAcquisition, 1)} / ${fmt(c.publishesPerAcquisition, 1)} / ${fmt(c.commandsPerAcquisition, 1)} / ${fmt(c.scriptUsPerAcquisition)}`,
        ),
      ],
    ];
  });
  const batchCmds = (phase: 'acquire' | 'release') => (x: ImplResult, impl: ImplName) => {
    const d = x.batch.rounds[0]?.[phase === 'acquire' ? 'acquireCommands' : 'releaseCommands'][0] ?? {};
    const name = isFloor(impl) && phase === 'acquire' ? 'SET' : 'EVALSHA/EVAL';
    return `${fmt(clientCalls(d, impl, phase))} ${name}`;
  };
  // Failed cycles are left out of the rate: say how many there were.
  const failed = (errors: number): string => (errors > 0 ? ` (${fmt(errors)} failed)` : '');
  const rows: Row[] = [
    ...ifMeasured<Row>('sequential', [
      [
        `sequential acquire+release (${fmt(SEQ_CYCLES)} cycles per round), cycles/s`,
        (x) => fmtSpread(x.sequential.cyclesPerSec) + failed(x.sequential.errors),
      ],
      [
        'sequential acquire p50 / p99, ms (all rounds)',
        (x) => `${fmt(x.sequential.acquireP50Ms, 3)} / ${fmt(x.sequential.acquireP99Ms, 3)}`,
      ],
      [
        'sequential release p50 / p99, ms (all rounds)',
        (x) => `${fmt(x.sequential.releaseP50Ms, 3)} / ${fmt(x.sequential.releaseP99Ms, 3)}`,
      ],
      [
        'sequential: Redis commands per cycle (all nodes, Lua-internal included; INFO commandstats)',
        (x) => fmt(x.sequential.commandsPerCycle, 1),
      ],
      [
        'sequential: server time per cycle, µs (the commands the client sent, all nodes summed; INFO commandstats usec)',
        (x) => fmt(x.sequential.serverUsPerCycle, 1),
      ],
    ]),
    ...ifMeasured<Row>('concurrent', [
      [
        `${CONC_LOOPS} concurrent loops (own keys, ${CONC_MS / 1000} s per round), cycles/s`,
        (x) => fmtSpread(x.concurrent.cyclesPerSec) + failed(x.concurrent.errors),
      ],
      [
        `${CONC_LOOPS} concurrent: CPU per cycle, µs: the implementation's process / all redis-servers`,
        (x) => `${fmt(x.concurrent.clientCpuUsPerCycle, 1)} / ${fmt(x.concurrent.redisCpuUsPerCycle, 1)}`,
      ],
    ]),
    ...ifMeasured('contention', contentionRows),
    ...ifMeasured<Row>('batch', [
      [
        `batch of ${fmt(BATCH_SIZE)}: acquire wall time, ms`,
        (x) => {
          const short = x.batch.rounds.filter((r) => r.acquired !== BATCH_SIZE).map((r) => r.acquired);
          return fmtSpread(x.batch.acquireMs, 1) + (short.length > 0 ? ` (${short.join(', ')} acquired)` : '');
        },
      ],
      [`batch of ${fmt(BATCH_SIZE)}: release wall time, ms`, (x) => fmtSpread(x.batch.releaseMs, 1)],
      ['batch acquire: commands sent to node 0 (INFO commandstats)', batchCmds('acquire')],
      ['batch release: commands sent to node 0 (INFO commandstats)', batchCmds('release')],
    ]),
  ];
  // The commands of a sequential cycle by name, most frequent in tickwarden's cycle first.
  const ours = run.results.tickwarden.sequential.commandsByName;
  const names = [...new Set(IMPLS.flatMap((impl) => Object.keys(run.results[impl].sequential.commandsByName)))].sort(
    (a, b) => (ours[b] ?? 0) - (ours[a] ?? 0) || a.localeCompare(b),
  );
  const lines = [
    `### ${run.nodes} nodes (quorum ${Math.floor(run.nodes / 2) + 1})`,
    '',
    `| metric | ${IMPLS.map((impl) => COLUMN[impl]).join(' | ')} |`,
    `|---|${IMPLS.map(() => '---:').join('|')}|`,
    ...rows.map(([name, cell]) => `| ${name} | ${IMPLS.map((impl) => cell(run.results[impl], impl)).join(' | ')} |`),
    '',
    ...ifMeasured('sequential', [
      `Redis commands per sequential cycle by command, ${run.nodes} nodes together (INFO commandstats calls over all rounds / cycles; the script calls themselves and the commands they ran):`,
      '',
      `| command | ${IMPLS.map((impl) => COLUMN[impl]).join(' | ')} |`,
      `|---|${IMPLS.map(() => '---:').join('|')}|`,
      ...names.map(
        (name) =>
          `| ${name.toUpperCase()} | ${IMPLS.map((impl) => fmt(run.results[impl].sequential.commandsByName[name] ?? 0, 2)).join(' | ')} |`,
      ),
      `| total | ${IMPLS.map((impl) => fmt(run.results[impl].sequential.commandsPerCycle, 2)).join(' | ')} |`,
      '',
    ]),
    `Targets (tickwarden, ${run.nodes} nodes; rates compared by their medians):`,
    '',
    ...run.targets.map((t) =>
      t.target === undefined
        ? `- INFO: ${t.name}: ${t.value}`
        : `- ${t.met ? 'MET' : 'MISSED'}: ${t.name}: ${t.value} (target ${t.target})`,
    ),
    '',
  ];
  return lines.join('\n');
}

/** Of `impls`, the one whose `value` is highest. */
function best<T extends ImplName>(
  r: Record<ImplName, ImplResult>,
  impls: readonly T[],
  value: (x: ImplResult) => number,
) {
  return impls.reduce((a, b) => (value(r[b]) > value(r[a]) ? b : a));
}

function targets(r: Record<ImplName, ImplResult>): Target[] {
  const ours = r.tickwarden;
  const ratio = (a: number, b: number): string => `${fmt(a / b, 2)}x (${fmt(a)} / ${fmt(b)} cycles/s)`;
  const seq = (x: ImplResult): number => x.sequential.cyclesPerSec.median;
  const conc = (x: ImplResult): number => x.concurrent.cyclesPerSec.median;
  const seqFloor = best(r, FLOORS, seq);
  const concFloor = best(r, FLOORS, conc);
  const list: Target[] = [
    ...ifMeasured<Target>('sequential', [
      {
        name: 'sequential cycles/s vs node-redlock (plain clients)',
        value: ratio(seq(ours), seq(r['node-redlock'])),
        target: `>= ${fmt(TARGET.seqVsPeer, 2)}x`,
        met: seq(ours) >= TARGET.seqVsPeer * seq(r['node-redlock']),
      },
      {
        name: `sequential cycles/s vs the best floor, ${COLUMN[seqFloor]}`,
        value: ratio(seq(ours), seq(r[seqFloor])),
        target: `>= ${fmt(TARGET.seqVsFloor, 2)}x`,
        met: seq(ours) >= TARGET.seqVsFloor * seq(r[seqFloor]),
      },
    ]),
    ...ifMeasured<Target>('concurrent', [
      {
        name: `${CONC_LOOPS}-concurrent cycles/s vs node-redlock (plain clients)`,
        value: ratio(conc(ours), conc(r['node-redlock'])),
        target: `>= ${fmt(TARGET.concVsPeer, 2)}x`,
        met: conc(ours) >= TARGET.concVsPeer * conc(r['node-redlock']),
      },
      {
        name: `${CONC_LOOPS}-concurrent cycles/s vs node-redlock (auto-pipelined clients)`,
        value: ratio(conc(ours), conc(r['node-redlock-pipelined'])),
      },
      {
        name: `${CONC_LOOPS}-concurrent cycles/s vs the best floor, ${COLUMN[concFloor]}`,
        value: ratio(conc(ours), conc(r[concFloor])),
      },
    ]),
  ];
  for (const [i, row] of MEASURED.has('contention') ? CONTENTION_ROWS.entries() : []) {
    const c = ours.contention[i] as Contention;
    const rate = (impl: RetryingName): number => r[impl].contention[i]?.acquisitionsPerSec.median ?? Number.NaN;
    const peer = best(r, NODE_REDLOCKS, (x) => x.contention[i]?.acquisitionsPerSec.median ?? Number.NaN);
    const label = `contention (${rowName(row)})`;
    list.push(
      {
        name: `${label} acquisitions/s vs the better node-redlock, ${COLUMN[peer]}`,
        value: `${fmt(rate('tickwarden'), 1)} vs ${fmt(rate(peer), 1)}`,
        target: ">= node-redlock's",
        met: rate('tickwarden') >= rate(peer),
      },
      {
        name: `${label} Jain fairness, lowest round`,
        value: fmt(c.jain.min, 3),
        target: `>= ${TARGET.jain}`,
        met: c.jain.min >= TARGET.jain,
      },
      {
        name: `${label} fewest acquisitions of a contender in a round`,
        value: fmt(Math.min(...c.minPerContender)),
        target: '> 0 (none starved)',
        met: Math.min(...c.minPerContender) > 0,
      },
      { name: `${label} exhausted retries`, value: fmt(c.exhausted), target: '0', met: c.exhausted === 0 },
      {
        name: `${label} longest gap between holders, longest round`,
        value: `${fmt(c.maxGapMs.max, 1)} ms (that round's contenders' process: ${fmt(longestRound(c).gcInMaxGapMs, 1)} ms of it in garbage collection, ${fmt(longestRound(c).noCpuInMaxGapMs, 1)} ms due to run with no CPU)`,
        target: `<= ${TARGET.maxGapMs} ms`,
        met: c.maxGapMs.max <= TARGET.maxGapMs,
      },
      { name: `${label} mutual-exclusion violations`, value: fmt(c.violations), target: '0', met: c.violations === 0 },
    );
  }
  // The library splits a batch into calls of at most maxBatchSize resources, sent at once.
  const calls = Math.ceil(BATCH_SIZE / DEFAULT_SETTINGS.maxBatchSize);
  const perNode = (counts: readonly CommandCounts[]): string => counts.map(scriptCalls).join(',');
  const expected = (counts: readonly CommandCounts[]): boolean => counts.every((d) => scriptCalls(d) === calls);
  if (!MEASURED.has('batch')) return list;
  list.push({
    name: 'batch: script calls per node (acquireBatch / releaseBatch, every node, each round)',
    value: ours.batch.rounds.map((b) => `${perNode(b.acquireCommands)} / ${perNode(b.releaseCommands)}`).join('; '),
    target: `${calls} / ${calls} (${fmt(BATCH_SIZE)} resources, maxBatchSize ${DEFAULT_SETTINGS.maxBatchSize})`,
    met: ours.batch.rounds.every(
      (b) => expected(b.acquireCommands) && expected(b.releaseCommands) && b.acquired === BATCH_SIZE,
    ),
  });
  return list;
}

// ---------------------------------------------------------------- main

const log = (message: string): void => {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
};

/** Round `round`'s order of `items`: each starts a round, none always runs first or last. */
const rotate = <T>(items: readonly T[], round: number): T[] =>
  items.map((_, i) => items[(i + round) % items.length] as T);

/** One record per implementation, filled by `make`. */
const perImpl = <T, K extends ImplName = ImplName>(impls: readonly K[], make: (impl: K) => T): Record<K, T> =>
  Object.fromEntries(impls.map((impl) => [impl, make(impl)])) as Record<K, T>;

async function contentionPhase(
  nodes: RedisNodes,
  count: number,
  tag: (impl: ImplName) => string,
): Promise<Record<RetryingName, Contention[]>> {
  const urls = nodes.urls.slice(0, count);
  const workers = {} as Record<RetryingName, ImplProcess>;
  try {
    for (const impl of RETRYING) {
      log(`${count} nodes: contention: ${CONT_CONTENDERS} instances of ${impl} in one process, warming up`);
      workers[impl] = await ImplProcess.start(impl, urls, CONT_CONTENDERS);
      await workers[impl].request({ op: 'warm-up', key: `${tag(impl)}:warm`, cycles: 0, ttlMs: TTL_MS });
      await contentionRound(workers[impl], `${tag(impl)}:contended:warm`, CONTENTION_ROWS[1], CONT_WARMUP_MS);
    }
    const rounds = perImpl(RETRYING, () => CONTENTION_ROWS.map((): ContentionRound[] => []));
    for (const [i, row] of CONTENTION_ROWS.entries()) {
      for (let round = 0; round < ROUNDS; round++) {
        for (const impl of rotate(RETRYING, round)) {
          // A key per round: a lock left behind (TTL up to 10 s) must not block the next round.
          const c = await measuredContentionRound(
            workers[impl],
            `${tag(impl)}:contended:${i}:${round}`,
            row,
            nodes,
            count,
          );
          rounds[impl][i]?.push(c);
          log(
            `${count} nodes: contention ${rowName(row)}, round ${round + 1}/${ROUNDS}, ${impl}: ${fmt(c.acquisitionsPerSec, 1)} acquisitions/s, Jain ${fmt(c.jain, 3)}, longest gap ${fmt(c.maxGapMs, 1)} ms, ${c.exhausted} exhausted, ${c.violations} violations, drained in ${fmt(c.drainMs)} ms`,
          );
        }
      }
    }
    return perImpl(RETRYING, (impl) =>
      CONTENTION_ROWS.map((row, i) => summarizeContention(row, rounds[impl][i] ?? [])),
    );
  } finally {
    await Promise.all(Object.values(workers).map((worker) => worker.close()));
  }
}

async function runFor(nodes: RedisNodes, count: number, runId: string): Promise<RunResult> {
  const urls = nodes.urls.slice(0, count);
  const tag = (impl: ImplName) => `bench:${runId}:${count}:${impl}`;
  log(`${count} nodes: connecting and warming up (${SEQ_WARMUP} cycles each)`);
  const workers = {} as Record<ImplName, ImplProcess>;
  let results: Record<ImplName, ImplResult>;
  // The sequential, concurrent and batch measurements share one process (and instance) per implementation.
  const shared = MEASURED.has('sequential') || MEASURED.has('concurrent') || MEASURED.has('batch');
  try {
    for (const impl of shared ? IMPLS : []) {
      workers[impl] = await ImplProcess.start(impl, urls, 1);
      await workers[impl].request({ op: 'warm-up', key: `${tag(impl)}:seq`, cycles: SEQ_WARMUP, ttlMs: TTL_MS });
    }
    const seq = perImpl(IMPLS, () => new SequentialSamples());
    const conc = perImpl(IMPLS, () => new ConcurrentSamples());
    const batches = perImpl(IMPLS, (): BatchRound[] => []);
    for (let round = 0; round < (MEASURED.has('sequential') ? ROUNDS : 0); round++) {
      log(`${count} nodes: sequential, round ${round + 1}/${ROUNDS}`);
      for (const impl of rotate(IMPLS, round))
        await sequentialRound(workers[impl], impl, `${tag(impl)}:seq`, nodes, count, seq[impl]);
    }
    if (MEASURED.has('concurrent')) {
      log(`${count} nodes: ${CONC_LOOPS} concurrent loops, warming up (${CONC_WARMUP_MS} ms each)`);
      for (const impl of IMPLS) await concurrentLoops(workers[impl], `${tag(impl)}:conc:warm`, CONC_WARMUP_MS);
    }
    for (let round = 0; round < (MEASURED.has('concurrent') ? ROUNDS : 0); round++) {
      log(`${count} nodes: ${CONC_LOOPS} concurrent loops, round ${round + 1}/${ROUNDS}`);
      for (const impl of rotate(IMPLS, round))
        await concurrentRound(workers[impl], `${tag(impl)}:conc`, nodes, count, conc[impl]);
    }
    for (let round = 0; round < (MEASURED.has('batch') ? ROUNDS : 0); round++) {
      log(`${count} nodes: batch of ${BATCH_SIZE}, round ${round + 1}/${ROUNDS}`);
      for (const impl of rotate(IMPLS, round))
        batches[impl].push(await batchRound(workers[impl], nodes, count, `${tag(impl)}:batch:${round}`));
    }
    results = perImpl(IMPLS, (impl) => ({
      sequential: summarizeSequential(seq[impl]),
      concurrent: summarizeConcurrent(conc[impl]),
      contention: [],
      batch: summarizeBatch(batches[impl]),
    }));
  } finally {
    await Promise.all(Object.values(workers).map((worker) => worker.close()));
  }
  if (MEASURED.has('contention')) {
    const contention = await contentionPhase(nodes, count, tag);
    for (const impl of RETRYING) results[impl].contention = contention[impl];
  }
  return { nodes: count, results, targets: targets(results) };
}

/** A git command's trimmed output at the repo root, or `unknown`. */
function git(...args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: new URL('../../../', import.meta.url), encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const started = new Date();
  const runId = randomBytes(4).toString('hex');
  log(`starting ${Math.max(...NODE_COUNTS)} redis-server nodes (aof off)`);
  const nodes = await startRedisNodes({ count: Math.max(...NODE_COUNTS), aof: false });
  closers.add(() => nodes.close());
  const server = await nodes.node(0).info('server');
  const env = {
    date: started.toISOString(),
    nproc: os.availableParallelism(),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    node: process.version,
    redisServer: server['redis_version'] ?? 'unknown',
    nodeRedlock: '5.0.0-beta.2',
    command: `${MEASURED.size < MEASUREMENTS.length ? `BENCH_ROWS=${[...MEASURED].join(',')} ` : ''}npm run bench:redlock`,
    commit: git('rev-parse', '--short', 'HEAD'),
    /** Uncommitted changes under libs/redlock/src when the run started (the library measured may differ from the commit). */
    srcChanges: git('status', '--porcelain', '--', 'libs/redlock/src')
      .split('\n')
      .filter((line) => line !== ''),
    loadAverageAtStart: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
  const runs: RunResult[] = [];
  for (const count of NODE_COUNTS) runs.push(await runFor(nodes, count, runId));
  const seconds = (Date.now() - started.getTime()) / 1000;
  const loadAverageAtEnd = os.loadavg().map((x) => Math.round(x * 100) / 100);

  // `git` trims its output, so the first porcelain line may have lost its leading space: take the path after the status field.
  const changed = env.srcChanges.map((line) => line.replace(/^\s*\S+\s+/, ''));
  const header = [
    `Redlock benchmark, ${env.date}: ${env.nproc} CPUs (${env.cpu}), Node ${env.node}, redis-server ${env.redisServer} (local processes, AOF off), total ${fmt(seconds, 0)} s.`,
    `Library at commit ${env.commit}${changed.length > 0 ? ` with uncommitted changes in ${changed.join(', ')}` : ''}; load average (1/5/15 min) ${env.loadAverageAtStart.join(' / ')} at start, ${loadAverageAtEnd.join(' / ')} at end.`,
    ...(MEASURED.size < MEASUREMENTS.length
      ? [
          `Measured only: ${[...MEASURED].join(', ')} (\`${env.command}\`); the other rows and their targets are left out.`,
        ]
      : []),
    `Every figure comes from ${ROUNDS} rounds with the implementations interleaved in a rotating order; rates are median [min-max] over the rounds, latencies and per-cycle costs are over all rounds together. Before the first round each implementation runs unmeasured: ${SEQ_WARMUP.toLocaleString('en-US')} sequential cycles, then ${CONC_WARMUP_MS} ms of the concurrent loops.`,
    'tickwarden builds its clients from the URLs (LOCK_CLIENT_OPTIONS: no auto-pipelining; it merges calls made together into one script call per node itself). node-redlock 5.0.0-beta.2 runs on default ioredis clients as its README shows, and on auto-pipelined ones (LOCK_CLIENT_OPTIONS + enableAutoPipelining).',
    'The floor is SET NX PX on every node, then compare-and-delete (EVALSHA) on every node, each step decided at a quorum, no retries: on plain clients (LOCK_CLIENT_OPTIONS), the fastest for one caller at a time, and on auto-pipelined clients, the fastest for many; each target compares with the faster of the two in its workload.',
    `Retry settings are the defaults: ${RETRY.retryCount} retries, ${RETRY.retryDelayMs} ms + [0, ${RETRY.retryJitterMs}) ms (node-redlock: ${RETRY.retryDelayMs} ms ± ${RETRY.retryJitterMs} ms).`,
    `Each implementation runs in a Node process of its own (its contenders too: one process per implementation), driven by the benchmark's; CPU figures of "the implementation's process" are that process's.`,
    `Contention: ${CONT_CONTENDERS} contenders, each its own instance and clients, loop acquire → hold → release on one key (a new key each round) for ${CONT_MS / 1000} s per round, after an unmeasured ${CONT_WARMUP_MS} ms burst; hold 0 ms yields one event-loop turn before the release. The gap runs from a release (or the start) to the next acquire.`,
    '',
  ].join('\n');
  const markdown = `${header}\n${runs.map(table).join('\n')}`;
  const outDir = new URL('../../../bench-results/', import.meta.url);
  await mkdir(outDir, { recursive: true });
  const settings = {
    ROUNDS,
    SEQ_WARMUP,
    SEQ_CYCLES,
    CONC_LOOPS,
    CONC_MS,
    CONC_WARMUP_MS,
    CONT_CONTENDERS,
    CONT_MS,
    CONT_WARMUP_MS,
    CONTENTION_ROWS,
    BATCH_SIZE,
    TTL_MS,
    RETRY,
    TARGET,
  };
  await writeFile(
    new URL('redlock.json', outDir),
    `${JSON.stringify({ env: { ...env, loadAverageAtEnd }, durationSeconds: seconds, settings, runs }, null, 2)}\n`,
  );
  await writeFile(new URL('redlock.md', outDir), markdown);
  process.stdout.write(`${markdown}\n`);
  log(`wrote bench-results/redlock.json and bench-results/redlock.md`);
}

async function cleanUp(): Promise<void> {
  await closeAllProcesses();
  const pending = [...closers].reverse();
  closers.clear();
  for (const close of pending) await close().catch(noop);
}

process.once('SIGINT', () => {
  void cleanUp().finally(() => process.exit(130));
});

try {
  await main();
} catch (error) {
  process.exitCode = 1;
  console.error(error);
} finally {
  await cleanUp();
}
