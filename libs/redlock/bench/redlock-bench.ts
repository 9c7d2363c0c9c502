/**
 * `npm run bench:redlock`: this library next to node-redlock 5.0.0-beta.2 and a
 * raw SET NX PX / compare-and-delete floor, on the same local Redis nodes, with
 * 5 then 3 nodes. A script, not a test: it measures and reports, it asserts
 * nothing (targets are printed as met / missed). Results go to
 * `bench-results/redlock.json` and `bench-results/redlock.md` at the repo root.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { Redis, type RedisOptions } from 'ioredis';
import { atQuorum, FLOOR_RELEASE, FLOOR_RELEASE_SHA } from './floor.ts';
import { isNodeRedlockExecutionError, newNodeRedlock } from './node-redlock.ts';
import { LOCK_CLIENT_OPTIONS, LockTakenError, Redlock, type Lease } from '../src/index.ts';

const NODE_COUNTS = [5, 3] as const;
const SEQ_WARMUP = 300;
/** Sequential cycles and concurrent time are split in rounds, the variants interleaved in a rotating order. */
const ROUNDS = 3;
const SEQ_CYCLES = 3_000;
const CONC_LOOPS = 50;
const CONC_MS = 3_000;
const CONT_CONTENDERS = 20;
const CONT_MS = 5_000;
const CONT_HOLD_MS = 2;
const CONT_TTL_MS = 1_000;
const BATCH_SIZE = 1_000;
const TTL_MS = 10_000;
/** The library's defaults (node-redlock's are the same numbers; its jitter is ±100 around 200). */
const RETRY = { retryCount: 10, retryDelayMs: 200, retryJitterMs: 100 } as const;
const MAX_GAP_TARGET_MS = RETRY.retryDelayMs + RETRY.retryJitterMs;

const IMPLS = ['tickwarden', 'node-redlock', 'node-redlock-pipelined', 'floor'] as const;
type ImplName = (typeof IMPLS)[number];
const COLUMN: Record<ImplName, string> = {
  tickwarden: 'tickwarden',
  'node-redlock': 'node-redlock 5.0.0-beta.2 (plain ioredis clients, as its README)',
  'node-redlock-pipelined': 'node-redlock 5.0.0-beta.2 (auto-pipelined clients)',
  floor: 'floor',
};

/** The issue's floor and node-redlock's second column run on auto-pipelined clients (otherwise the library's own client options). */
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
  // As node-redlock's README shows: default ioredis clients; or, for comparison, ours (auto-pipelining).
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
 * (the rest still runs).
 */
async function floor(urls: readonly string[]): Promise<Adapter> {
  const clients = await readyClients(urls, PIPELINED_CLIENT_OPTIONS);
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
  return floor(urls);
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

// ---------------------------------------------------------------- measurements

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))] as number;
}

/** One variant's accumulated samples over the interleaved rounds. */
class SequentialSamples {
  acquireMs: number[] = [];
  releaseMs: number[] = [];
  seconds = 0;
  errors = 0;
  /** Server time of the commands the client sent (INFO commandstats usec), all nodes. */
  serverUs = 0;
}

interface Sequential {
  cycles: number;
  rounds: number;
  seconds: number;
  cyclesPerSec: number;
  acquireP50Ms: number;
  acquireP99Ms: number;
  releaseP50Ms: number;
  releaseP99Ms: number;
  errors: number;
  /** Per cycle, the server time of the commands the client sent (scripts; the floor's SET too), summed over the nodes. */
  serverUsPerCycle: number;
}

/** One round of `cycles` sequential acquire+release cycles on one key. */
async function sequentialRound(
  adapter: Adapter,
  impl: ImplName,
  key: string,
  cycles: number,
  nodes: RedisNodes,
  count: number,
  into: SequentialSamples,
): Promise<void> {
  const statsBefore = await commandStats(nodes, count);
  const start = now();
  for (let i = 0; i < cycles; i++) {
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
  }
  into.seconds += (now() - start) / 1000;
  const usec = deltas(statsBefore, await commandStats(nodes, count), 'usec');
  into.serverUs += usec.reduce((sum, d) => sum + clientCalls(d, impl, 'acquire'), 0);
}

function summarizeSequential(samples: SequentialSamples): Sequential {
  const acquireMs = samples.acquireMs.toSorted((x, y) => x - y);
  const releaseMs = samples.releaseMs.toSorted((x, y) => x - y);
  return {
    cycles: acquireMs.length,
    rounds: ROUNDS,
    seconds: samples.seconds,
    cyclesPerSec: acquireMs.length / samples.seconds,
    acquireP50Ms: percentile(acquireMs, 0.5),
    acquireP99Ms: percentile(acquireMs, 0.99),
    releaseP50Ms: percentile(releaseMs, 0.5),
    releaseP99Ms: percentile(releaseMs, 0.99),
    errors: samples.errors,
    serverUsPerCycle: samples.serverUs / acquireMs.length,
  };
}

interface Concurrent {
  loops: number;
  rounds: number;
  seconds: number;
  cycles: number;
  cyclesPerSec: number;
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

/** One round: `CONC_LOOPS` loops, each acquire+release on its own key, for `ms`; the total is added to `into`. */
async function concurrentRound(
  adapter: Adapter,
  keyBase: string,
  ms: number,
  nodes: RedisNodes,
  count: number,
  into: Concurrent,
): Promise<void> {
  const redisBefore = await redisCpuSeconds(nodes, count);
  const cpuBefore = process.cpuUsage();
  let cycles = 0;
  const start = now();
  const end = start + ms;
  await Promise.all(
    Array.from({ length: CONC_LOOPS }, async (_, loop) => {
      const key = `${keyBase}:${loop}`;
      while (now() < end) {
        try {
          await (await adapter.acquire(key, TTL_MS)).release();
          cycles++;
        } catch {
          into.errors++;
        }
      }
    }),
  );
  const seconds = (now() - start) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const redisUs = ((await redisCpuSeconds(nodes, count)) - redisBefore) * 1e6;
  // Running means, weighted by cycles.
  const total = into.cycles + cycles;
  into.clientCpuUsPerCycle = (into.clientCpuUsPerCycle * into.cycles + cpu.user + cpu.system) / total;
  into.redisCpuUsPerCycle = (into.redisCpuUsPerCycle * into.cycles + redisUs) / total;
  into.cycles = total;
  into.seconds += seconds;
  into.cyclesPerSec = into.cycles / into.seconds;
}

interface Contention {
  contenders: number;
  seconds: number;
  acquisitions: number;
  acquisitionsPerSec: number;
  perContender: number[];
  jain: number;
  maxGapMs: number;
  exhausted: number;
  otherErrors: number;
  violations: number;
  drainMs: number;
}

/**
 * 20 contenders, each with its own instance and clients (as separate processes
 * would be), looping acquire → hold 2 ms → release on one key with default
 * retry settings. A shared `holder` checks mutual exclusion; the gap is the
 * time from a release (or the start) to the next acquire.
 */
async function contention(impl: ImplName, urls: readonly string[], key: string): Promise<Contention> {
  const adapters = await Promise.all(Array.from({ length: CONT_CONTENDERS }, () => makeAdapter(impl, urls)));
  try {
    await Promise.all(adapters.map((adapter, i) => warmUp(adapter, `${key}:warm:${i}`)));
    const perContender = new Array<number>(CONT_CONTENDERS).fill(0);
    let holder: number | undefined;
    let violations = 0;
    let exhausted = 0;
    let otherErrors = 0;
    let maxGapMs = 0;
    const start = now();
    const end = start + CONT_MS;
    let freeSince = start;
    await Promise.all(
      adapters.map(async (adapter, id) => {
        while (now() < end) {
          let held: Held;
          try {
            held = await adapter.acquire(key, CONT_TTL_MS);
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
            await sleep(CONT_HOLD_MS);
          }
          // Cleared before the release is sent: from here another holder is legitimate.
          holder = undefined;
          freeSince = now();
          await held.release();
        }
      }),
    );
    const drainMs = now() - end;
    const acquisitions = perContender.reduce((a, b) => a + b, 0);
    const squares = perContender.reduce((a, b) => a + b * b, 0);
    return {
      contenders: CONT_CONTENDERS,
      seconds: CONT_MS / 1000,
      acquisitions,
      acquisitionsPerSec: acquisitions / (CONT_MS / 1000),
      perContender,
      jain: squares === 0 ? Number.NaN : (acquisitions * acquisitions) / (CONT_CONTENDERS * squares),
      maxGapMs,
      exhausted,
      otherErrors,
      violations,
      drainMs,
    };
  } finally {
    await Promise.all(adapters.map((adapter) => adapter.close()));
  }
}

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

const scriptCalls = (d: CommandCounts): number => (d['evalsha'] ?? 0) + (d['eval'] ?? 0);
/** Commands the client sent in a batch phase (not the ones scripts ran): scripts, and the floor's SETs. */
const clientCalls = (d: CommandCounts, impl: ImplName, phase: 'acquire' | 'release'): number =>
  scriptCalls(d) + (impl === 'floor' && phase === 'acquire' ? (d['set'] ?? 0) : 0);

interface Batch {
  resources: number;
  acquired: number;
  acquireMs: number;
  releaseMs: number;
  /** Per node, the commands each phase ran (INFO commandstats deltas). */
  acquireCommands: CommandCounts[];
  releaseCommands: CommandCounts[];
}

async function batch(adapter: Adapter, nodes: RedisNodes, count: number, keyBase: string): Promise<Batch> {
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
    resources: BATCH_SIZE,
    acquired: run.acquired,
    acquireMs,
    releaseMs,
    acquireCommands: deltas(s0, s1),
    releaseCommands: deltas(s1, s2),
  };
}

// ---------------------------------------------------------------- report

interface ImplResult {
  sequential: Sequential;
  concurrent: Concurrent;
  contention: Contention | null;
  batch: Batch;
}

interface Target {
  name: string;
  value: string;
  target: string;
  met: boolean;
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

function table(run: RunResult): string {
  const r = run.results;
  type Row = [string, (x: ImplResult, impl: ImplName) => string];
  const cont = (f: (c: Contention) => string) => (x: ImplResult) =>
    x.contention ? f(x.contention) : 'n/a (no retries)';
  const batchCmds = (phase: 'acquire' | 'release') => (x: ImplResult, impl: ImplName) => {
    const d = x.batch[phase === 'acquire' ? 'acquireCommands' : 'releaseCommands'][0] ?? {};
    const name = impl === 'floor' && phase === 'acquire' ? 'SET' : 'EVALSHA/EVAL';
    return `${fmt(clientCalls(d, impl, phase))} ${name}`;
  };
  const rows: Row[] = [
    [`sequential acquire+release (${fmt(SEQ_CYCLES)} cycles), cycles/s`, (x) => fmt(x.sequential.cyclesPerSec)],
    [
      'sequential acquire p50 / p99, ms',
      (x) => `${fmt(x.sequential.acquireP50Ms, 3)} / ${fmt(x.sequential.acquireP99Ms, 3)}`,
    ],
    [
      'sequential release p50 / p99, ms',
      (x) => `${fmt(x.sequential.releaseP50Ms, 3)} / ${fmt(x.sequential.releaseP99Ms, 3)}`,
    ],
    [
      'sequential: server time per cycle, µs (the commands the client sent, all nodes summed; INFO commandstats usec)',
      (x) => fmt(x.sequential.serverUsPerCycle, 1),
    ],
    [`${CONC_LOOPS} concurrent loops (own keys, ${CONC_MS / 1000} s), cycles/s`, (x) => fmt(x.concurrent.cyclesPerSec)],
    [
      `${CONC_LOOPS} concurrent: CPU per cycle, µs: this process / all redis-servers`,
      (x) => `${fmt(x.concurrent.clientCpuUsPerCycle, 1)} / ${fmt(x.concurrent.redisCpuUsPerCycle, 1)}`,
    ],
    [
      `contention: ${CONT_CONTENDERS} on one key (${CONT_MS / 1000} s, hold ${CONT_HOLD_MS} ms), acquisitions/s`,
      cont((c) => fmt(c.acquisitionsPerSec, 1)),
    ],
    ['contention: Jain fairness index', cont((c) => fmt(c.jain, 3))],
    [
      'contention: per-contender acquisitions min / max',
      cont((c) => `${Math.min(...c.perContender)} / ${Math.max(...c.perContender)}`),
    ],
    ['contention: longest gap with no holder, ms', cont((c) => fmt(c.maxGapMs, 1))],
    [
      'contention: acquires that exhausted retries',
      cont((c) => fmt(c.exhausted) + (c.otherErrors ? ` (+${c.otherErrors} other errors)` : '')),
    ],
    ['contention: mutual-exclusion violations', cont((c) => fmt(c.violations))],
    [
      `batch of ${fmt(BATCH_SIZE)}: acquire wall time, ms`,
      (x) =>
        `${fmt(x.batch.acquireMs, 1)}` +
        (x.batch.acquired === x.batch.resources ? '' : ` (${x.batch.acquired} acquired)`),
    ],
    [`batch of ${fmt(BATCH_SIZE)}: release wall time, ms`, (x) => fmt(x.batch.releaseMs, 1)],
    ['batch acquire: commands sent to node 0 (INFO commandstats)', batchCmds('acquire')],
    ['batch release: commands sent to node 0 (INFO commandstats)', batchCmds('release')],
  ];
  const lines = [
    `### ${run.nodes} nodes (quorum ${Math.floor(run.nodes / 2) + 1})`,
    '',
    `| metric | ${IMPLS.map((impl) => COLUMN[impl]).join(' | ')} |`,
    `|---|${IMPLS.map(() => '---:').join('|')}|`,
    ...rows.map(([name, cell]) => `| ${name} | ${IMPLS.map((impl) => cell(r[impl], impl)).join(' | ')} |`),
    '',
    `Targets (tickwarden, ${run.nodes} nodes):`,
    '',
    ...run.targets.map((t) =>
      t.target === 'none'
        ? `- INFO: ${t.name}: ${t.value}`
        : `- ${t.met ? 'MET' : 'MISSED'}: ${t.name}: ${t.value} (target ${t.target})`,
    ),
    '',
  ];
  return lines.join('\n');
}

function targets(r: Record<ImplName, ImplResult>): Target[] {
  const ours = r.tickwarden;
  const seqRatio = ours.sequential.cyclesPerSec / r.floor.sequential.cyclesPerSec;
  const concRatio = ours.concurrent.cyclesPerSec / r['node-redlock'].concurrent.cyclesPerSec;
  const concRatioPipelined = ours.concurrent.cyclesPerSec / r['node-redlock-pipelined'].concurrent.cyclesPerSec;
  const c = ours.contention as Contention;
  const acqScripts = ours.batch.acquireCommands.map(scriptCalls);
  const relScripts = ours.batch.releaseCommands.map(scriptCalls);
  return [
    {
      name: 'sequential cycles/s vs floor',
      value: `${fmt(seqRatio, 3)}x floor`,
      target: '>= 0.900x (within 10%)',
      met: seqRatio >= 0.9,
    },
    {
      name: `${CONC_LOOPS}-concurrent cycles/s vs node-redlock (plain clients, as documented)`,
      value: `${fmt(concRatio, 2)}x node-redlock`,
      target: '>= 2.00x',
      met: concRatio >= 2,
    },
    {
      name: `${CONC_LOOPS}-concurrent cycles/s vs node-redlock on auto-pipelined clients (no target; for the record)`,
      value: `${fmt(concRatioPipelined, 2)}x`,
      target: 'none',
      met: true,
    },
    {
      name: 'contention longest gap',
      value: `${fmt(c.maxGapMs, 1)} ms`,
      target: `<= ${MAX_GAP_TARGET_MS} ms`,
      met: c.maxGapMs <= MAX_GAP_TARGET_MS,
    },
    { name: 'contention exhausted retries', value: fmt(c.exhausted), target: '0', met: c.exhausted === 0 },
    { name: 'contention Jain fairness', value: fmt(c.jain, 3), target: '>= 0.9', met: c.jain >= 0.9 },
    { name: 'contention mutual-exclusion violations', value: fmt(c.violations), target: '0', met: c.violations === 0 },
    {
      name: 'batch: script calls per node (acquireBatch / releaseBatch, every node)',
      value: `${acqScripts.join(',')} / ${relScripts.join(',')}`,
      target: '1 / 1',
      met: acqScripts.every((n) => n === 1) && relScripts.every((n) => n === 1) && ours.batch.acquired === BATCH_SIZE,
    },
  ];
}

// ---------------------------------------------------------------- main

const log = (message: string): void => {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
};

const rotate = <T>(items: readonly T[], by: number): T[] => items.map((_, i) => items[(i + by) % items.length] as T);
const emptyConcurrent = (): Concurrent => ({
  loops: CONC_LOOPS,
  rounds: ROUNDS,
  seconds: 0,
  cycles: 0,
  cyclesPerSec: 0,
  errors: 0,
  clientCpuUsPerCycle: 0,
  redisCpuUsPerCycle: 0,
});

async function runFor(nodes: RedisNodes, count: number, runId: string): Promise<RunResult> {
  const urls = nodes.urls.slice(0, count);
  const tag = (impl: ImplName) => `bench:${runId}:${count}:${impl}`;
  log(`${count} nodes: connecting and warming up (${SEQ_WARMUP} cycles each)`);
  const adapters = {} as Record<ImplName, Adapter>;
  try {
    for (const impl of IMPLS) {
      adapters[impl] = await makeAdapter(impl, urls);
      await warmUp(adapters[impl], `${tag(impl)}:seq`);
      for (let i = 0; i < SEQ_WARMUP; i++) await (await adapters[impl].acquire(`${tag(impl)}:seq`, TTL_MS)).release();
    }
    const seq = Object.fromEntries(IMPLS.map((v) => [v, new SequentialSamples()])) as Record<
      ImplName,
      SequentialSamples
    >;
    const conc = Object.fromEntries(IMPLS.map((v) => [v, emptyConcurrent()])) as Record<ImplName, Concurrent>;
    for (let round = 0; round < ROUNDS; round++) {
      log(`${count} nodes: sequential round ${round + 1}/${ROUNDS}`);
      for (const v of rotate(IMPLS, round))
        await sequentialRound(adapters[v], v, `${tag(v)}:seq`, SEQ_CYCLES / ROUNDS, nodes, count, seq[v]);
    }
    for (let round = 0; round < ROUNDS; round++) {
      log(`${count} nodes: ${CONC_LOOPS} concurrent loops, round ${round + 1}/${ROUNDS}`);
      for (const v of rotate(IMPLS, round))
        await concurrentRound(adapters[v], `${tag(v)}:conc`, CONC_MS / ROUNDS, nodes, count, conc[v]);
    }
    const results = {} as Record<ImplName, ImplResult>;
    for (const impl of IMPLS) {
      log(`${count} nodes: batch of ${BATCH_SIZE}, ${impl}`);
      const b = await batch(adapters[impl], nodes, count, `${tag(impl)}:batch`);
      results[impl] = {
        sequential: summarizeSequential(seq[impl]),
        concurrent: conc[impl],
        contention: null,
        batch: b,
      };
    }
    for (const impl of IMPLS) await adapters[impl].close();
    for (const impl of IMPLS) {
      if (impl === 'floor') continue;
      log(`${count} nodes: contention, ${impl}`);
      const c = await contention(impl, urls, `${tag(impl)}:contended`);
      log(
        `  ${fmt(c.acquisitionsPerSec, 1)} acquisitions/s, Jain ${fmt(c.jain, 3)}, longest gap ${fmt(c.maxGapMs, 1)} ms, ${c.exhausted} exhausted, ${c.violations} violations`,
      );
      results[impl].contention = c;
    }
    return { nodes: count, results, targets: targets(results) };
  } finally {
    await Promise.all(Object.values(adapters).map((adapter) => adapter.close()));
  }
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
    command: 'npm run bench:redlock',
    commit: git('rev-parse', '--short', 'HEAD'),
    /** Uncommitted changes under libs/redlock/src when the run started (the library measured may differ from the commit). */
    // `git` trims its output, so the first porcelain line may have lost its leading space: take the path after the status field.
    srcChanges: git('status', '--porcelain', '--', 'libs/redlock/src')
      .split('\n')
      .filter((line) => line !== ''),
    loadAverageAtStart: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
  const runs: RunResult[] = [];
  for (const count of NODE_COUNTS) runs.push(await runFor(nodes, count, runId));
  const seconds = (Date.now() - started.getTime()) / 1000;
  const loadAverageAtEnd = os.loadavg().map((x) => Math.round(x * 100) / 100);

  const header = [
    `Redlock benchmark, ${env.date}: ${env.nproc} CPUs (${env.cpu}), Node ${env.node}, redis-server ${env.redisServer} (local processes, AOF off), total ${fmt(seconds, 0)} s.`,
    `Library at commit ${env.commit}${env.srcChanges.length > 0 ? ` with uncommitted changes in ${env.srcChanges.map((line) => line.replace(/^\s*\S+\s+/, '')).join(', ')}` : ''}; load average (1/5/15 min) ${env.loadAverageAtStart.join(' / ')} at start, ${loadAverageAtEnd.join(' / ')} at end.`,
    'tickwarden builds its clients from the URLs (LOCK_CLIENT_OPTIONS: no auto-pipelining; it merges calls made together into one script call per node itself); node-redlock runs twice: with default ioredis clients as its README shows, and with auto-pipelined clients (LOCK_CLIENT_OPTIONS + enableAutoPipelining); the floor uses the auto-pipelined clients.',
    `Retry settings are the defaults: ${RETRY.retryCount} retries, ${RETRY.retryDelayMs} ms + [0, ${RETRY.retryJitterMs}) ms (node-redlock: ${RETRY.retryDelayMs} ms ± ${RETRY.retryJitterMs} ms).`,
    `Sequential (${fmt(SEQ_CYCLES)} cycles after ${SEQ_WARMUP} warm-up cycles) and ${CONC_LOOPS}-concurrent (${CONC_MS / 1000} s) runs are split in ${ROUNDS} rounds with the implementations interleaved in a rotating order.`,
    `Contention: ${CONT_CONTENDERS} contenders, each its own instance and clients, loop acquire → hold ${CONT_HOLD_MS} ms → release on one key (TTL ${fmt(CONT_TTL_MS)} ms) for ${CONT_MS / 1000} s; the gap runs from a release (or the start) to the next acquire.`,
    '',
  ].join('\n');
  const markdown = `${header}\n${runs.map(table).join('\n')}`;
  const outDir = new URL('../../../bench-results/', import.meta.url);
  await mkdir(outDir, { recursive: true });
  await writeFile(
    new URL('redlock.json', outDir),
    `${JSON.stringify({ env: { ...env, loadAverageAtEnd }, durationSeconds: seconds, settings: { ROUNDS, SEQ_WARMUP, SEQ_CYCLES, CONC_LOOPS, CONC_MS, CONT_CONTENDERS, CONT_MS, CONT_HOLD_MS, CONT_TTL_MS, BATCH_SIZE, TTL_MS, RETRY }, runs }, null, 2)}\n`,
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
