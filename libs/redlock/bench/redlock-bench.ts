/**
 * `npm run bench:redlock`: this library next to node-redlock 5.0.0-beta.2 and a
 * raw SET NX PX / compare-and-delete floor, on the same local Redis nodes, with
 * 5 then 3 nodes. A script, not a test: it measures and reports, it asserts
 * nothing (targets are printed as met / missed). Every measurement runs in
 * `ROUNDS` rounds with the implementations interleaved in a rotating order, and
 * every rate is reported as median [min-max] over the rounds. Results go to
 * `bench-results/redlock.json` and `bench-results/redlock.md` at the repo root.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { Redis, type RedisOptions } from 'ioredis';
import { atQuorum, FLOOR_RELEASE, FLOOR_RELEASE_SHA } from './floor.ts';
import { isNodeRedlockExecutionError, newNodeRedlock } from './node-redlock.ts';
import { DEFAULT_SETTINGS, LOCK_CLIENT_OPTIONS, LockTakenError, Redlock, type Lease } from '../src/index.ts';

const NODE_COUNTS = [5, 3] as const;
const ROUNDS = 3;
/**
 * Unmeasured cycles per implementation before the first sequential round: V8 optimizes a function
 * only once it ran hot for a while, and after 300 cycles this library's first round still ran
 * partly unoptimized (BENCHMARK.md).
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
] as const;
type ContentionRow = (typeof CONTENTION_ROWS)[number];
const BATCH_SIZE = 1_000;
const TTL_MS = 10_000;
/** The library's defaults (node-redlock's are the same numbers; its jitter is ±100 around 200). */
const RETRY = { retryCount: 10, retryDelayMs: 200, retryJitterMs: 100 } as const;
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

const IMPLS = ['tickwarden', 'node-redlock', 'node-redlock-pipelined', 'floor-plain', 'floor-pipelined'] as const;
type ImplName = (typeof IMPLS)[number];
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

/** The library's own client options with auto-pipelining on: the second client of node-redlock and of the floor. */
const PIPELINED_CLIENT_OPTIONS: RedisOptions = { ...LOCK_CLIENT_OPTIONS, enableAutoPipelining: true };

const now = (): number => performance.now();
const noop = (): void => undefined;

// ---------------------------------------------------------------- adapters

/** A held lock, released once. */
interface Held {
  release(): Promise<void>;
}

/** One implementation behind the same two calls. `acquire` throws when it gets no lock. */
interface Adapter {
  acquire(resource: string, ttlMs: number): Promise<Held>;
  /** Whether an acquire error means "retries exhausted because the lock was taken". */
  exhausted(error: unknown): boolean;
  /** Batch of distinct resources: one timed acquire phase, one timed release phase. */
  batch(
    resources: readonly string[],
    ttlMs: number,
  ): Promise<{ acquired: number; acquire: () => Promise<void>; release: () => Promise<void> }>;
  close(): Promise<void>;
}

/** Every client any adapter opened, closed on exit even after an error. */
const closers = new Set<() => Promise<void>>();

async function readyClients(urls: readonly string[], options: RedisOptions): Promise<Redis[]> {
  const clients = urls.map((url) => new Redis(url, { ...options }));
  for (const client of clients) client.on('error', noop);
  closers.add(async () => {
    for (const client of clients) client.disconnect();
  });
  // The lock client options disable the offline queue: wait until every client can send.
  await Promise.all(
    clients.map((client) =>
      client.status === 'ready' ? undefined : new Promise((resolve) => client.once('ready', resolve)),
    ),
  );
  return clients;
}

function tickwarden(urls: readonly string[]): Adapter {
  const redlock = new Redlock(urls);
  const close = (): Promise<void> => redlock.close();
  closers.add(close);
  return {
    async acquire(resource, ttlMs) {
      const lease = await redlock.acquire(resource, ttlMs);
      return {
        release: async () => {
          await redlock.release(lease);
        },
      };
    },
    exhausted: (error) => error instanceof LockTakenError,
    async batch(resources, ttlMs) {
      let leases: Lease[] = [];
      let acquired = 0;
      return {
        get acquired() {
          return acquired;
        },
        acquire: async () => {
          const results = await redlock.acquireBatch(
            resources.map((resource) => ({ resource })),
            ttlMs,
          );
          leases = results.flatMap((r): Lease[] => (r.ok ? [r.lease] : []));
          acquired = leases.length;
        },
        release: async () => {
          await redlock.releaseBatch(leases);
        },
      };
    },
    async close() {
      closers.delete(close);
      await close();
    },
  };
}

async function nodeRedlock(urls: readonly string[], pipelined: boolean): Promise<Adapter> {
  // As node-redlock's README shows: default ioredis clients; or, for comparison, auto-pipelined ones.
  const clients = await readyClients(urls, pipelined ? PIPELINED_CLIENT_OPTIONS : {});
  // node-redlock's defaults, spelled out: 10 retries, 200 ms ± 100 ms.
  const redlock = newNodeRedlock(clients, {
    retryCount: RETRY.retryCount,
    retryDelay: RETRY.retryDelayMs,
    retryJitter: RETRY.retryJitterMs,
  });
  // Every vote against is emitted as 'error': without a listener EventEmitter would throw.
  redlock.on('error', noop);
  const acquire = async (resource: string, ttlMs: number): Promise<Held> => {
    const lock = await redlock.acquire([resource], ttlMs);
    return {
      release: async () => {
        await lock.release();
      },
    };
  };
  return {
    acquire,
    exhausted: isNodeRedlockExecutionError,
    batch: (resources, ttlMs) => concurrentBatch(acquire, resources, ttlMs),
    async close() {
      for (const client of clients) client.disconnect();
    },
  };
}

/**
 * The floor: SET NX PX on every node in parallel, a quorum of OKs wins (no
 * retries); EVALSHA compare-and-delete on every node. Both resolve at a quorum
 * (the rest still runs). On plain clients each call is written at once, which
 * is fastest for a single caller; auto-pipelining defers writes to merge
 * concurrent callers' commands, which is fastest for many.
 */
async function floor(urls: readonly string[], pipelined: boolean): Promise<Adapter> {
  const clients = await readyClients(urls, pipelined ? PIPELINED_CLIENT_OPTIONS : LOCK_CLIENT_OPTIONS);
  await Promise.all(clients.map((client) => client.script('LOAD', FLOOR_RELEASE)));
  const quorum = Math.floor(clients.length / 2) + 1;
  const releaseValue = async (resource: string, value: string): Promise<void> => {
    await atQuorum(
      clients.map((client) => client.evalsha(FLOOR_RELEASE_SHA, 1, resource, value).then(noop, noop)),
      quorum,
    );
  };
  const acquire = (resource: string, ttlMs: number): Promise<Held> =>
    new Promise((resolve, reject) => {
      const value = randomBytes(20).toString('hex');
      let ok = 0;
      let answered = 0;
      let settled = false;
      for (const client of clients) {
        client
          .set(resource, value, 'PX', ttlMs, 'NX')
          .then(
            (reply) => reply === 'OK',
            () => false,
          )
          .then((won) => {
            answered++;
            if (won) ok++;
            if (settled) return;
            if (ok >= quorum) {
              settled = true;
              resolve({ release: () => releaseValue(resource, value) });
            } else if (ok + (clients.length - answered) < quorum) {
              settled = true;
              void releaseValue(resource, value);
              reject(new Error(`floor: no quorum for ${resource}`));
            }
          });
      }
    });
  return {
    acquire,
    exhausted: () => false,
    batch: (resources, ttlMs) => concurrentBatch(acquire, resources, ttlMs),
    async close() {
      for (const client of clients) client.disconnect();
    },
  };
}

/** Batch for the libraries without one: every acquire at once (Promise.all), then every release at once. */
async function concurrentBatch(acquire: Adapter['acquire'], resources: readonly string[], ttlMs: number) {
  let held: Held[] = [];
  return {
    get acquired() {
      return held.length;
    },
    acquire: async () => {
      const results = await Promise.allSettled(resources.map((resource) => acquire(resource, ttlMs)));
      held = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    },
    release: async () => {
      await Promise.all(held.map((h) => h.release()));
    },
  };
}

async function makeAdapter(impl: ImplName, urls: readonly string[]): Promise<Adapter> {
  if (impl === 'tickwarden') return tickwarden(urls);
  if (impl === 'node-redlock') return nodeRedlock(urls, false);
  if (impl === 'node-redlock-pipelined') return nodeRedlock(urls, true);
  return floor(urls, impl === 'floor-pipelined');
}

/** One acquire+release until it works (the first calls of fresh clients may race their connection). */
async function warmUp(adapter: Adapter, key: string): Promise<void> {
  const deadline = now() + 10_000;
  for (;;) {
    try {
      const held = await adapter.acquire(key, TTL_MS);
      await held.release();
      return;
    } catch (error) {
      if (now() > deadline) throw error;
      await sleep(20);
    }
  }
}

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
  adapter: Adapter,
  impl: ImplName,
  key: string,
  nodes: RedisNodes,
  count: number,
  into: SequentialSamples,
): Promise<void> {
  const statsBefore = await commandStats(nodes, count);
  let cycles = 0;
  const start = now();
  for (let i = 0; i < SEQ_CYCLES; i++) {
    const a = now();
    let held: Held;
    try {
      held = await adapter.acquire(key, TTL_MS);
    } catch {
      into.errors++;
      continue;
    }
    const b = now();
    await held.release();
    into.acquireMs.push(b - a);
    into.releaseMs.push(now() - b);
    cycles++;
  }
  into.cyclesPerSec.push(cycles / ((now() - start) / 1000));
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
  /** CPU time of this Node process per cycle (the clients and the library), µs. */
  clientCpuUsPerCycle: number;
  /** CPU time of all the redis-server nodes together per cycle (INFO cpu), µs. */
  redisCpuUsPerCycle: number;
}

/** Seconds of CPU (user + sys) each of the first `count` nodes has used. */
async function redisCpuSeconds(nodes: RedisNodes, count: number): Promise<number> {
  const infos = await Promise.all(Array.from({ length: count }, (_, i) => nodes.node(i).info('cpu')));
  return infos.reduce((sum, info) => sum + Number(info['used_cpu_user'] ?? 0) + Number(info['used_cpu_sys'] ?? 0), 0);
}

/** `CONC_LOOPS` loops, each acquire+release on its own key, for `ms`: the cycles and the errors. */
async function concurrentLoops(
  adapter: Adapter,
  keyBase: string,
  ms: number,
): Promise<{ cycles: number; errors: number }> {
  let cycles = 0;
  let errors = 0;
  const end = now() + ms;
  await Promise.all(
    Array.from({ length: CONC_LOOPS }, async (_, loop) => {
      const key = `${keyBase}:${loop}`;
      while (now() < end) {
        try {
          await (await adapter.acquire(key, TTL_MS)).release();
          cycles++;
        } catch {
          errors++;
        }
      }
    }),
  );
  return { cycles, errors };
}

/** One round of the concurrent loops, for `CONC_MS`. */
async function concurrentRound(
  adapter: Adapter,
  keyBase: string,
  nodes: RedisNodes,
  count: number,
  into: ConcurrentSamples,
): Promise<void> {
  const redisBefore = await redisCpuSeconds(nodes, count);
  const cpuBefore = process.cpuUsage();
  const start = now();
  const { cycles, errors } = await concurrentLoops(adapter, keyBase, CONC_MS);
  into.errors += errors;
  into.cyclesPerSec.push(cycles / ((now() - start) / 1000));
  const cpu = process.cpuUsage(cpuBefore);
  into.clientCpuUs += cpu.user + cpu.system;
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

interface ContentionRound {
  acquisitions: number;
  acquisitionsPerSec: number;
  perContender: number[];
  jain: number;
  maxGapMs: number;
  exhausted: number;
  otherErrors: number;
  violations: number;
  /** How long the contenders took to stop after the round's end (their acquires in flight finish). */
  drainMs: number;
  /** What the round cost, drain included (contentionPhase measures it): this process's CPU and all nodes' (INFO cpu), µs. */
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

/**
 * One round: every contender (its own instance and clients, as separate processes
 * would have) loops acquire → hold → release on `key` with the default retry
 * settings for `ms`. A hold of 0 still yields one event-loop turn before the
 * release, so that another contender's acquire resolving meanwhile shows as a
 * violation of the shared `holder`. The gap runs from a release (or the start)
 * to the next acquire, and at the end from the last release to the end.
 */
async function contentionRound(
  adapters: readonly Adapter[],
  key: string,
  row: ContentionRow,
  ms: number,
): Promise<
  Omit<ContentionRound, 'clientCpuUs' | 'redisCpuUs' | 'scriptCalls' | 'publishes' | 'commands' | 'scriptUs'>
> {
  const perContender = new Array<number>(adapters.length).fill(0);
  let holder: number | undefined;
  let violations = 0;
  let exhausted = 0;
  let otherErrors = 0;
  let maxGapMs = 0;
  const start = now();
  const end = start + ms;
  // Within the round: the last release (or the start) and the last acquire.
  let freeSince = start;
  let lastAcquire = Number.NEGATIVE_INFINITY;
  await Promise.all(
    adapters.map(async (adapter, id) => {
      while (now() < end) {
        let held: Held;
        try {
          held = await adapter.acquire(key, row.ttlMs);
        } catch (error) {
          if (adapter.exhausted(error)) exhausted++;
          else otherErrors++;
          continue;
        }
        const at = now();
        if (holder !== undefined) violations++;
        holder = id;
        if (at <= end) {
          perContender[id] = (perContender[id] ?? 0) + 1;
          maxGapMs = Math.max(maxGapMs, at - freeSince);
          lastAcquire = at;
        }
        await (row.holdMs > 0 ? sleep(row.holdMs) : nextTurn());
        // Cleared before the release is sent: from here another holder is legitimate.
        holder = undefined;
        const releasedAt = now();
        if (releasedAt <= end) freeSince = releasedAt;
        await held.release();
      }
    }),
  );
  const drainMs = now() - end;
  // A lock left free from the last release to the end is a gap too, though no acquire closed it.
  if (freeSince >= lastAcquire) maxGapMs = Math.max(maxGapMs, end - freeSince);
  const acquisitions = perContender.reduce((a, b) => a + b, 0);
  const squares = perContender.reduce((a, b) => a + b * b, 0);
  return {
    acquisitions,
    acquisitionsPerSec: acquisitions / (ms / 1000),
    perContender,
    jain: squares === 0 ? Number.NaN : (acquisitions * acquisitions) / (adapters.length * squares),
    maxGapMs,
    exhausted,
    otherErrors,
    violations,
    drainMs,
  };
}

function summarizeContention(row: ContentionRow, rounds: readonly ContentionRound[]): Contention {
  const total = (f: (r: ContentionRound) => number): number => rounds.reduce((sum, r) => sum + f(r), 0);
  return {
    holdMs: row.holdMs,
    ttlMs: row.ttlMs,
    acquisitionsPerSec: spread(rounds.map((r) => r.acquisitionsPerSec)),
    jain: spread(rounds.map((r) => r.jain)),
    maxGapMs: spread(rounds.map((r) => r.maxGapMs)),
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

/** A contention round with what it cost: CPU (this process and the nodes) and the nodes' commands. */
async function measuredContentionRound(
  adapters: readonly Adapter[],
  key: string,
  row: ContentionRow,
  nodes: RedisNodes,
  count: number,
): Promise<ContentionRound> {
  const [redisBefore, statsBefore] = [await redisCpuSeconds(nodes, count), await commandStats(nodes, count)];
  const cpuBefore = process.cpuUsage();
  const round = await contentionRound(adapters, key, row, CONT_MS);
  const cpu = process.cpuUsage(cpuBefore);
  const statsAfter = await commandStats(nodes, count);
  const counts: CommandCounts = {};
  const usec: CommandCounts = {};
  addCounts(counts, deltas(statsBefore, statsAfter));
  addCounts(usec, deltas(statsBefore, statsAfter, 'usec'));
  return {
    ...round,
    clientCpuUs: cpu.user + cpu.system,
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

async function batchRound(adapter: Adapter, nodes: RedisNodes, count: number, keyBase: string): Promise<BatchRound> {
  const resources = Array.from({ length: BATCH_SIZE }, (_, i) => `${keyBase}:${i}`);
  const run = await adapter.batch(resources, TTL_MS);
  // Stragglers past the quorum are not awaited by the libraries: let them land before each snapshot.
  const settle = () => sleep(100);
  const s0 = await commandStats(nodes, count);
  let t = now();
  await run.acquire();
  const acquireMs = now() - t;
  await settle();
  const s1 = await commandStats(nodes, count);
  t = now();
  await run.release();
  const releaseMs = now() - t;
  await settle();
  const s2 = await commandStats(nodes, count);
  return {
    acquired: run.acquired,
    acquireMs,
    releaseMs,
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
        `${label}: acquires that exhausted retries (all rounds)`,
        cont((c) => fmt(c.exhausted) + (c.otherErrors ? ` (+${c.otherErrors} other errors)` : '')),
      ],
      [`${label}: mutual-exclusion violations (all rounds)`, cont((c) => fmt(c.violations))],
      [
        `${label}: CPU per acquisition, µs: this process (all ${CONT_CONTENDERS} contenders) / all redis-servers`,
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
        `${CONC_LOOPS} concurrent: CPU per cycle, µs: this process / all redis-servers`,
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
        value: `${fmt(c.maxGapMs.max, 1)} ms`,
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
  const adapters = {} as Record<RetryingName, Adapter[]>;
  try {
    for (const impl of RETRYING) {
      log(`${count} nodes: contention: ${CONT_CONTENDERS} instances of ${impl}, warming up`);
      adapters[impl] = await Promise.all(Array.from({ length: CONT_CONTENDERS }, () => makeAdapter(impl, urls)));
      await Promise.all(adapters[impl].map((adapter, i) => warmUp(adapter, `${tag(impl)}:warm:${i}`)));
      await contentionRound(adapters[impl], `${tag(impl)}:contended:warm`, CONTENTION_ROWS[1], CONT_WARMUP_MS);
    }
    const rounds = perImpl(RETRYING, () => CONTENTION_ROWS.map((): ContentionRound[] => []));
    for (const [i, row] of CONTENTION_ROWS.entries()) {
      for (let round = 0; round < ROUNDS; round++) {
        for (const impl of rotate(RETRYING, round)) {
          // A key per round: a lock left behind (TTL up to 10 s) must not block the next round.
          const c = await measuredContentionRound(
            adapters[impl],
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
    await Promise.all(
      Object.values(adapters)
        .flat()
        .map((adapter) => adapter.close()),
    );
  }
}

async function runFor(nodes: RedisNodes, count: number, runId: string): Promise<RunResult> {
  const urls = nodes.urls.slice(0, count);
  const tag = (impl: ImplName) => `bench:${runId}:${count}:${impl}`;
  log(`${count} nodes: connecting and warming up (${SEQ_WARMUP} cycles each)`);
  const adapters = {} as Record<ImplName, Adapter>;
  let results: Record<ImplName, ImplResult>;
  // The sequential, concurrent and batch measurements share one adapter per implementation.
  const shared = MEASURED.has('sequential') || MEASURED.has('concurrent') || MEASURED.has('batch');
  try {
    for (const impl of shared ? IMPLS : []) {
      adapters[impl] = await makeAdapter(impl, urls);
      await warmUp(adapters[impl], `${tag(impl)}:seq`);
      for (let i = 0; i < SEQ_WARMUP; i++) await (await adapters[impl].acquire(`${tag(impl)}:seq`, TTL_MS)).release();
    }
    const seq = perImpl(IMPLS, () => new SequentialSamples());
    const conc = perImpl(IMPLS, () => new ConcurrentSamples());
    const batches = perImpl(IMPLS, (): BatchRound[] => []);
    for (let round = 0; round < (MEASURED.has('sequential') ? ROUNDS : 0); round++) {
      log(`${count} nodes: sequential, round ${round + 1}/${ROUNDS}`);
      for (const impl of rotate(IMPLS, round))
        await sequentialRound(adapters[impl], impl, `${tag(impl)}:seq`, nodes, count, seq[impl]);
    }
    if (MEASURED.has('concurrent')) {
      log(`${count} nodes: ${CONC_LOOPS} concurrent loops, warming up (${CONC_WARMUP_MS} ms each)`);
      for (const impl of IMPLS) await concurrentLoops(adapters[impl], `${tag(impl)}:conc:warm`, CONC_WARMUP_MS);
    }
    for (let round = 0; round < (MEASURED.has('concurrent') ? ROUNDS : 0); round++) {
      log(`${count} nodes: ${CONC_LOOPS} concurrent loops, round ${round + 1}/${ROUNDS}`);
      for (const impl of rotate(IMPLS, round))
        await concurrentRound(adapters[impl], `${tag(impl)}:conc`, nodes, count, conc[impl]);
    }
    for (let round = 0; round < (MEASURED.has('batch') ? ROUNDS : 0); round++) {
      log(`${count} nodes: batch of ${BATCH_SIZE}, round ${round + 1}/${ROUNDS}`);
      for (const impl of rotate(IMPLS, round))
        batches[impl].push(await batchRound(adapters[impl], nodes, count, `${tag(impl)}:batch:${round}`));
    }
    results = perImpl(IMPLS, (impl) => ({
      sequential: summarizeSequential(seq[impl]),
      concurrent: summarizeConcurrent(conc[impl]),
      contention: [],
      batch: summarizeBatch(batches[impl]),
    }));
  } finally {
    await Promise.all(Object.values(adapters).map((adapter) => adapter.close()));
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
