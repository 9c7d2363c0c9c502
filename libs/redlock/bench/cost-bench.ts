/**
 * Where a sequential acquire+release cycle spends its time, beside the main benchmark
 * (redlock-bench.ts): a script, not a test, asserting nothing.
 *
 * 1. Server time per call, on one `redis-server` in a hot loop (INFO commandstats after
 *    CONFIG RESETSTAT): this library's acquire and release scripts, node-redlock's, the floor's
 *    native SET NX PX and compare-and-delete, the fenced floor's scripts (floor.ts: the least a
 *    grant with a fencing token can do), and an empty script with the acquire's arguments (what
 *    any EVALSHA costs before its first redis.call).
 * 2. Server time of a full batch (`maxBatchSize` resources in one script call), on one idle
 *    `redis-server`: acquireBatch with a claim per resource (as the scheduler contests ticks)
 *    and releaseBatch, mean and slowest call (SLOWLOG) - what a batch costs a node when the
 *    node has a core to itself.
 * 3. Client CPU per sequential cycle on 5 nodes (process.cpuUsage, user and system), and the
 *    nodes' script time per cycle (commandstats usec of the calls sent, all nodes): this library,
 *    node-redlock on plain ioredis clients (as its README shows), the floor (the main benchmark's
 *    sequential one: plain clients, SET NX PX and compare-and-delete, each resolved at a quorum)
 *    and the fenced floor (the same with floor.ts's fenced scripts), in interleaved rounds on one
 *    key each, each variant in a process of its own (impl-worker.ts, as the main benchmark).
 *    The fenced floor is what any fenced lock must at least do: the issue's floor has no fencing
 *    token, so no fenced lock can be cheaper than this one, while it may beat that one.
 *
 * Run from the repository root: `npm run bench:redlock:costs`. Prints a table and writes
 * bench-results/redlock-costs.json and .md. About a minute.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { Redis, type RedisOptions } from 'ioredis';
import { FENCED_FLOOR_ACQUIRE, FENCED_FLOOR_RELEASE, FLOOR_RELEASE } from './floor.ts';
import { closeAllProcesses, ImplProcess } from './impl-process.ts';
import type { WorkerImpl } from './implementations.ts';
import { newNodeRedlock } from './node-redlock.ts';
import { DEFAULT_SETTINGS, Redlock, scripts, type Lease } from '../src/index.ts';

const SERVER_CALLS = 20_000;
const CLIENT_CYCLES = 3_000;
const ROUNDS = 3;
const TTL_MS = 10_000;

const value = (): string => randomBytes(20).toString('hex');
const base = (resource: string): string => `tickwarden:{${resource}}:`;
const mean = (values: readonly number[]): number => values.reduce((sum, v) => sum + v, 0) / values.length;

async function readyClient(url: string, options: RedisOptions): Promise<Redis> {
  const client = new Redis(url, options);
  client.on('error', () => undefined);
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
  return client;
}

// ---------------------------------------------------------------- 1. server time per call

interface ServerCall {
  name: string;
  /** usec_per_call of the command the client sent (EVALSHA, or SET), one value per round. */
  usPerCall: number[];
}

async function serverTimes(): Promise<ServerCall[]> {
  const nodes = await startRedisNodes({ count: 1, aof: false });
  const client = await readyClient(nodes.urls[0] as string, {});
  try {
    const load = (source: string): Promise<string> => client.script('LOAD', source) as Promise<string>;
    const nodeRedlock = newNodeRedlock([client], {});
    const [acquire, release, empty, nrAcquire, nrRelease, floorRelease, fencedAcquire, fencedRelease] =
      await Promise.all([
        load(scripts.acquire.source),
        load(scripts.release.source),
        load('return 1'),
        load(nodeRedlock.scripts.acquireScript.value),
        load(nodeRedlock.scripts.releaseScript.value),
        load(FLOOR_RELEASE),
        load(FENCED_FLOOR_ACQUIRE),
        load(FENCED_FLOOR_RELEASE),
      ]);
    // Each round starts on an empty node (FLUSHALL), so the same tokens stay above the stored fences.
    const firstToken = Date.now() * 1000;
    const token = (i: number): number => firstToken + i;
    const v = value();
    // The acquire's arguments as the library sends them on a first attempt that may wait (acquire.lua's
    // plain layout: no claim, its inbox named, as wakeOnRelease does by default, and its queue ticket).
    const acquireArgs = (i: number): [number, ...(string | number)[]] => {
      const { fenceRetentionMs, retryDelayMs, retryJitterMs, nodeTimeoutMs } = DEFAULT_SETTINGS;
      return [
        1,
        base(`r${i}`),
        TTL_MS,
        retryDelayMs + retryJitterMs + nodeTimeoutMs,
        Math.max(fenceRetentionMs, TTL_MS),
        'tickwarden:inbox:00000000000000000000',
        v,
        token(i),
        token(i),
      ];
    };
    const calls: [string, 'evalsha' | 'set', (i: number) => Promise<unknown>][] = [
      ["empty script (the acquire's arguments)", 'evalsha', (i) => client.evalsha(empty, ...acquireArgs(i))],
      ['tickwarden acquire', 'evalsha', (i) => client.evalsha(acquire, ...acquireArgs(i))],
      // As release(lease) sends it: a lease's release, fence-checked (release.lua's common case).
      ['tickwarden release', 'evalsha', (i) => client.evalsha(release, 1, base(`r${i}`), '0', v, '', token(i))],
      ['node-redlock acquire', 'evalsha', (i) => client.evalsha(nrAcquire, 1, `nr${i}`, v, TTL_MS)],
      ['node-redlock release', 'evalsha', (i) => client.evalsha(nrRelease, 1, `nr${i}`, v)],
      ['floor SET NX PX', 'set', (i) => client.set(`fl${i}`, v, 'PX', TTL_MS, 'NX')],
      ['floor release', 'evalsha', (i) => client.evalsha(floorRelease, 1, `fl${i}`, v)],
      [
        'fenced floor acquire',
        'evalsha',
        (i) => client.evalsha(fencedAcquire, 1, `ff${i}:`, v, token(i), TTL_MS, DEFAULT_SETTINGS.fenceRetentionMs),
      ],
      ['fenced floor release', 'evalsha', (i) => client.evalsha(fencedRelease, 1, `ff${i}:`, v, token(i))],
    ];
    const results = calls.map(([name]) => ({ name, usPerCall: [] as number[] }));
    for (let round = 0; round < ROUNDS; round++) {
      for (const [c, [, command, call]] of calls.entries()) {
        await client.config('RESETSTAT');
        for (let i = 0; i < SERVER_CALLS; i++) await call(i);
        const stats = await nodes.node(0).info('commandstats');
        const usec = /(?:^|,)usec_per_call=([\d.]+)/.exec(stats[`cmdstat_${command}`] ?? '');
        results[c]?.usPerCall.push(Number(usec?.[1]));
      }
      await client.flushall();
    }
    return results;
  } finally {
    client.disconnect();
    await nodes.close();
  }
}

// ---------------------------------------------------------------- 2. a full batch's server time

const BATCHES = 200;

interface BatchCall {
  name: string;
  /** Mean and slowest server time of one script call, µs, one value per round. */
  meanUs: number[];
  maxUs: number[];
}

async function batchTimes(): Promise<BatchCall[]> {
  const nodes = await startRedisNodes({ count: 1, aof: false });
  const url = nodes.urls[0] as string;
  const redlock = new Redlock([url]);
  const client = await readyClient(url, {});
  const size = DEFAULT_SETTINGS.maxBatchSize;
  const acquires: BatchCall = { name: `acquireBatch, ${size} resources with a claim each`, meanUs: [], maxUs: [] };
  const releases: BatchCall = { name: `releaseBatch, ${size} resources`, meanUs: [], maxUs: [] };
  const measure = async (result: BatchCall, call: (batch: number) => Promise<unknown>): Promise<void> => {
    await client.config('RESETSTAT');
    await client.slowlog('RESET');
    for (let b = 0; b < BATCHES; b++) await call(b);
    const stats = await nodes.node(0).info('commandstats');
    const usec = /(?:^|,)usec_per_call=([\d.]+)/.exec(stats['cmdstat_evalsha'] ?? '');
    const entries = (await client.slowlog('GET', BATCHES + 100)) as [number, number, number, string[]][];
    const scriptUs = entries.filter((e) => String(e[3][0]).toLowerCase().startsWith('eval')).map((e) => e[2]);
    result.meanUs.push(Number(usec?.[1]));
    result.maxUs.push(Math.max(...scriptUs));
  };
  try {
    // Above the commands a script runs (SLOWLOG logs those too, about 1 µs each), below any batch call.
    await client.config('SET', 'slowlog-log-slower-than', '100');
    await client.config('SET', 'slowlog-max-len', String(BATCHES + 100));
    for (let round = 0; round < ROUNDS; round++) {
      const leases: Lease[][] = [];
      await measure(acquires, async (b) => {
        const requests = Array.from({ length: size }, (_, i) => ({
          resource: `b${round}-${b}-${i}`,
          claim: `tick-${b}`,
        }));
        const granted = await redlock.acquireBatch(requests, TTL_MS);
        leases.push(granted.flatMap((r) => (r.ok ? [r.lease] : [])));
      });
      await measure(releases, (b) => redlock.releaseBatch(leases[b] ?? []));
      await client.flushall();
    }
    return [acquires, releases];
  } finally {
    client.disconnect();
    await redlock.close();
    await nodes.close();
  }
}

// ---------------------------------------------------------------- 3. client CPU per cycle

interface ClientCost {
  name: string;
  cyclesPerSec: number[];
  userUsPerCycle: number[];
  systemUsPerCycle: number[];
  /** All nodes together: commandstats usec of the calls the client sent (EVALSHA, SET), per cycle. */
  serverUsPerCycle: number[];
}

/** The usec that INFO commandstats gives the calls a client sends (EVALSHA, EVAL, SET), over all nodes. */
async function sentCallsUsec(nodes: RedisNodes): Promise<number> {
  let usec = 0;
  for (const node of nodes.nodes) {
    const stats = await node.info('commandstats');
    for (const command of ['evalsha', 'eval', 'set'])
      usec += Number(/(?:^|,)usec=(\d+)/.exec(stats[`cmdstat_${command}`] ?? '')?.[1] ?? 0);
  }
  return usec;
}

/** What cost-bench.ts measures, and its label in the table (impl-worker.ts runs each). */
const VARIANTS = [
  ['tickwarden', 'tickwarden'],
  ['node-redlock', 'node-redlock 5.0.0-beta.2 (plain clients)'],
  ['floor-plain', 'floor (plain clients)'],
  ['floor-fenced', 'fenced floor (plain clients)'],
] as const satisfies readonly (readonly [WorkerImpl, string])[];

/** What a worker's `sequential` request answers (implementations.ts sequentialCycles, impl-worker.ts withCpu). */
interface SequentialRound {
  acquireMs: number[];
  seconds: number;
  userUs: number;
  systemUs: number;
}

/**
 * Each variant in a process of its own (impl-worker.ts, the main benchmark's): run in one process,
 * the variants shared V8's compiled code and heap, and each one's figures depended on what ran
 * before it. Each round warms a variant up unmeasured (2,000 cycles: V8 optimizes a function only
 * once it ran hot a while), then measures CLIENT_CYCLES, the nodes' counters read around those.
 */
async function clientCosts(nodes: RedisNodes): Promise<ClientCost[]> {
  const workers: ImplProcess[] = [];
  try {
    for (const [impl] of VARIANTS) workers.push(await ImplProcess.start(impl, nodes.urls, 1));
    const results = VARIANTS.map(([, name]) => ({
      name,
      cyclesPerSec: [] as number[],
      userUsPerCycle: [] as number[],
      systemUsPerCycle: [] as number[],
      serverUsPerCycle: [] as number[],
    }));
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate the order, as the main benchmark does: no variant always runs first.
      for (let k = 0; k < VARIANTS.length; k++) {
        const index = (k + round) % VARIANTS.length;
        const worker = workers[index] as ImplProcess;
        const key = `cost-${index}`;
        await worker.request({ op: 'warm-up', key, cycles: 2_000, ttlMs: TTL_MS });
        const usecBefore = await sentCallsUsec(nodes);
        const measured = await worker.request<SequentialRound>({
          op: 'sequential',
          key,
          cycles: CLIENT_CYCLES,
          ttlMs: TTL_MS,
        });
        // The calls past each quorum still run: let the last ones land in this round's counts.
        await new Promise((resolve) => setTimeout(resolve, 20));
        const result = results[index] as ClientCost;
        const cycles = measured.acquireMs.length;
        result.serverUsPerCycle.push(((await sentCallsUsec(nodes)) - usecBefore) / cycles);
        result.cyclesPerSec.push(cycles / measured.seconds);
        result.userUsPerCycle.push(measured.userUs / cycles);
        result.systemUsPerCycle.push(measured.systemUs / cycles);
      }
    }
    return results;
  } finally {
    await closeAllProcesses();
  }
}

// ---------------------------------------------------------------- run and report

const fmt = (n: number, digits = 1): string =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const rounds = (values: readonly number[], digits = 1): string =>
  `${fmt(mean(values), digits)} (${values.map((v) => fmt(v, digits)).join(' / ')})`;

async function main(): Promise<void> {
  const startedAt = new Date();
  const server = await serverTimes();
  const batches = await batchTimes();
  const nodes = await startRedisNodes({ count: 5, aof: false });
  let client: ClientCost[];
  try {
    client = await clientCosts(nodes);
  } finally {
    await nodes.close();
  }
  const lines = [
    `Redlock cost benchmark, ${startedAt.toISOString()}: Node ${process.version}; means, then each of ${ROUNDS} rounds.`,
    '',
    `Server time per call, one redis-server, ${SERVER_CALLS.toLocaleString('en-US')} calls per round (INFO commandstats usec_per_call of the command sent):`,
    '',
    '| call | µs per call |',
    '|---|---:|',
    ...server.map((s) => `| ${s.name} | ${rounds(s.usPerCall, 2)} |`),
    '',
    `A full batch's script call, one idle redis-server, ${BATCHES} calls per round (usec_per_call; slowest from SLOWLOG):`,
    '',
    '| call | mean µs per call | slowest call, µs |',
    '|---|---:|---:|',
    ...batches.map((b) => `| ${b.name} | ${rounds(b.meanUs, 0)} | ${rounds(b.maxUs, 0)} |`),
    '',
    `A sequential acquire+release cycle, 5 nodes, ${CLIENT_CYCLES.toLocaleString('en-US')} cycles per round: this process's CPU, and the nodes' time for the calls it sent (all nodes, INFO commandstats usec):`,
    '',
    '| implementation | cycles/s | user CPU µs per cycle | system CPU µs per cycle | node time µs per cycle |',
    '|---|---:|---:|---:|---:|',
    ...client.map(
      (c) =>
        `| ${c.name} | ${rounds(c.cyclesPerSec, 0)} | ${rounds(c.userUsPerCycle)} | ${rounds(c.systemUsPerCycle)} | ${rounds(c.serverUsPerCycle)} |`,
    ),
  ];
  const table = lines.join('\n');
  console.log(table);
  await mkdir('bench-results', { recursive: true });
  await writeFile(
    'bench-results/redlock-costs.json',
    JSON.stringify({ startedAt, node: process.version, server, batches, client }, null, 2),
  );
  await writeFile('bench-results/redlock-costs.md', `${table}\n`);
}

await main();
