/**
 * The implementations the Redlock benchmark compares, behind one interface, and the loops that
 * drive them. Each runs in a process of its own (impl-worker.ts), as it would in a service: code,
 * JIT state and heap shared with another implementation would skew its figures.
 */
import { randomBytes } from 'node:crypto';
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import {
  atQuorum,
  FENCED_FLOOR_ACQUIRE,
  FENCED_FLOOR_ACQUIRE_SHA,
  FENCED_FLOOR_RELEASE,
  FENCED_FLOOR_RELEASE_SHA,
  FLOOR_RELEASE,
  FLOOR_RELEASE_SHA,
} from './floor.ts';
import { isNodeRedlockExecutionError, newNodeRedlock } from './node-redlock.ts';
import { DEFAULT_SETTINGS, LOCK_CLIENT_OPTIONS, LockTakenError, Redlock, type Lease } from '../src/index.ts';

export const IMPLS = [
  'tickwarden',
  'node-redlock',
  'node-redlock-pipelined',
  'floor-plain',
  'floor-pipelined',
] as const;
export type ImplName = (typeof IMPLS)[number];
/** A worker runs these too: the fenced floor, which only cost-bench.ts measures (floor.ts). */
export type WorkerImpl = ImplName | 'floor-fenced';
export const isWorkerImpl = (name: string): name is WorkerImpl =>
  name === 'floor-fenced' || (IMPLS as readonly string[]).includes(name);

/** The library's defaults (node-redlock's are the same numbers; its jitter is ±100 around 200). */
export const RETRY = { retryCount: 10, retryDelayMs: 200, retryJitterMs: 100 } as const;

/** The library's own client options with auto-pipelining on: the second client of node-redlock and of the floor. */
const PIPELINED_CLIENT_OPTIONS: RedisOptions = { ...LOCK_CLIENT_OPTIONS, enableAutoPipelining: true };

const now = (): number => performance.now();
const noop = (): void => undefined;

/** A held lock, released once. */
export interface Held {
  release(): Promise<void>;
}

/** One implementation behind the same two calls. `acquire` throws when it gets no lock. */
export interface Adapter {
  acquire(resource: string, ttlMs: number): Promise<Held>;
  /** Whether an acquire error means "retries exhausted because the lock was taken". */
  exhausted(error: unknown): boolean;
  /** Batch of distinct resources: one timed acquire phase, one timed release phase. */
  batch(
    resources: readonly string[],
    ttlMs: number,
  ): Promise<{ acquired: number; acquire: () => Promise<void>; release: () => Promise<void> }>;
}

/** Every client and instance any adapter opened: closeAll closes them, when the process ends. */
const closers = new Set<() => Promise<void>>();

/** Closes every client any adapter of this process opened. */
export async function closeAll(): Promise<void> {
  const pending = [...closers].reverse();
  closers.clear();
  for (const close of pending) await close().catch(noop);
}

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
  closers.add(() => redlock.close());
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
  };
}

/**
 * The floor: SET NX PX on every node in parallel, a quorum of OKs wins (no
 * retries); EVALSHA compare-and-delete on every node. Both resolve at a quorum
 * (the rest still runs). On plain clients each call is written at once, which
 * is fastest for a single caller; auto-pipelining defers writes to merge
 * concurrent callers' commands, which is fastest for many. `fenced`: the fenced
 * floor's scripts instead (floor.ts), with a token above the last one this
 * process proposed, on plain clients.
 */
async function floor(urls: readonly string[], pipelined: boolean, fenced = false): Promise<Adapter> {
  const clients = await readyClients(urls, pipelined ? PIPELINED_CLIENT_OPTIONS : LOCK_CLIENT_OPTIONS);
  const scripts = fenced ? [FENCED_FLOOR_ACQUIRE, FENCED_FLOOR_RELEASE] : [FLOOR_RELEASE];
  await Promise.all(clients.flatMap((client) => scripts.map((script) => client.script('LOAD', script))));
  const quorum = Math.floor(clients.length / 2) + 1;
  let lastToken = Date.now() * 1000;
  /** One node's grant: whether it set the lock (and, fenced, stored the token). */
  const grant = (client: Redis, resource: string, value: string, token: number, ttlMs: number): Promise<boolean> =>
    fenced
      ? client
          .evalsha(FENCED_FLOOR_ACQUIRE_SHA, 1, resource, value, token, ttlMs, DEFAULT_SETTINGS.fenceRetentionMs)
          .then((code) => code === 1)
      : client.set(resource, value, 'PX', ttlMs, 'NX').then((reply) => reply === 'OK');
  const releaseValue = async (resource: string, value: string, token: number): Promise<void> => {
    await atQuorum(
      clients.map((client) =>
        (fenced
          ? client.evalsha(FENCED_FLOOR_RELEASE_SHA, 1, resource, value, token)
          : client.evalsha(FLOOR_RELEASE_SHA, 1, resource, value)
        ).then(noop, noop),
      ),
      quorum,
    );
  };
  const acquire = (resource: string, ttlMs: number): Promise<Held> =>
    new Promise((resolve, reject) => {
      const value = randomBytes(20).toString('hex');
      const token = ++lastToken;
      let ok = 0;
      let answered = 0;
      let settled = false;
      for (const client of clients) {
        grant(client, resource, value, token, ttlMs)
          .catch(() => false)
          .then((won) => {
            answered++;
            if (won) ok++;
            if (settled) return;
            if (ok >= quorum) {
              settled = true;
              resolve({ release: () => releaseValue(resource, value, token) });
            } else if (ok + (clients.length - answered) < quorum) {
              settled = true;
              void releaseValue(resource, value, token);
              reject(new Error(`floor: no quorum for ${resource}`));
            }
          });
      }
    });
  return {
    acquire,
    exhausted: () => false,
    batch: (resources, ttlMs) => concurrentBatch(acquire, resources, ttlMs),
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

export async function makeAdapter(impl: WorkerImpl, urls: readonly string[]): Promise<Adapter> {
  if (impl === 'tickwarden') return tickwarden(urls);
  if (impl === 'node-redlock') return nodeRedlock(urls, false);
  if (impl === 'node-redlock-pipelined') return nodeRedlock(urls, true);
  return floor(urls, impl === 'floor-pipelined', impl === 'floor-fenced');
}

/** One acquire+release until it works (the first calls of fresh clients may race their connection). */
export async function warmUp(adapter: Adapter, key: string, ttlMs: number): Promise<void> {
  const deadline = now() + 10_000;
  for (;;) {
    try {
      const held = await adapter.acquire(key, ttlMs);
      await held.release();
      return;
    } catch (error) {
      if (now() > deadline) throw error;
      await sleep(20);
    }
  }
}

/** `cycles` sequential acquire+release cycles on one key, each step timed. */
export async function sequentialCycles(adapter: Adapter, key: string, cycles: number, ttlMs: number) {
  const acquireMs: number[] = [];
  const releaseMs: number[] = [];
  let errors = 0;
  const start = now();
  for (let i = 0; i < cycles; i++) {
    const a = now();
    let held: Held;
    try {
      held = await adapter.acquire(key, ttlMs);
    } catch {
      errors++;
      continue;
    }
    const b = now();
    await held.release();
    acquireMs.push(b - a);
    releaseMs.push(now() - b);
  }
  return { acquireMs, releaseMs, errors, seconds: (now() - start) / 1000 };
}

/** `loops` loops, each acquire+release on its own key, for `ms`: the cycles and the errors. */
export async function concurrentLoops(
  adapter: Adapter,
  keyBase: string,
  ms: number,
  loops: number,
  ttlMs: number,
): Promise<{ cycles: number; errors: number }> {
  let cycles = 0;
  let errors = 0;
  const end = now() + ms;
  await Promise.all(
    Array.from({ length: loops }, async (_, loop) => {
      const key = `${keyBase}:${loop}`;
      while (now() < end) {
        try {
          await (await adapter.acquire(key, ttlMs)).release();
          cycles++;
        } catch {
          errors++;
        }
      }
    }),
  );
  return { cycles, errors };
}

/**
 * While it runs, the periods in which this process was due to run but did not: a timer due every
 * millisecond came `ms` later than due, beyond the CPU time the process spent meanwhile (its own
 * work, garbage collection included, delays a timer too). On a host that gives the process no CPU
 * (other processes on its cores, or a hypervisor that pauses the virtual CPU), no implementation
 * can hand a lock on meanwhile: the report shows it beside the longest gap between holders.
 */
function noCpu(): { periods: { from: number; to: number; ms: number }[]; stop: () => void } {
  const periods: { from: number; to: number; ms: number }[] = [];
  const cpuMs = (): number => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  let at = now();
  let cpu = cpuMs();
  const timer = setInterval(() => {
    const wall = now();
    const used = cpuMs();
    const ms = wall - at - 1 - (used - cpu);
    if (ms > 1) periods.push({ from: at, to: wall, ms });
    at = wall;
    cpu = used;
  }, 1);
  return { periods, stop: () => clearInterval(timer) };
}

/** A contention row: how long a holder holds, and the lease TTL. */
export interface ContentionRow {
  holdMs: number;
  ttlMs: number;
}

/** What one contention round saw (contentionRound). */
export interface ContentionOutcome {
  acquisitions: number;
  acquisitionsPerSec: number;
  perContender: number[];
  jain: number;
  maxGapMs: number;
  /** The longest garbage-collection pause of the contenders' process in the round, ms. */
  maxGcPauseMs: number;
  /** How much of the round's longest gap this process spent in garbage-collection pauses, ms. */
  gcInMaxGapMs: number;
  /** How much of the round's longest gap this process was due to run but did not (see `noCpu`), ms. */
  noCpuInMaxGapMs: number;
  exhausted: number;
  otherErrors: number;
  violations: number;
  /** How long the contenders took to stop after the round's end (their acquires in flight finish). */
  drainMs: number;
}

/**
 * One round: every contender (its own instance and clients, as separate processes
 * would have) loops acquire → hold → release on `key` with the default retry
 * settings for `ms`. A hold of 0 still yields one event-loop turn before the
 * release, so that another contender's acquire resolving meanwhile shows as a
 * violation of the shared `holder`. The gap runs from a release (or the start)
 * to the next acquire, and at the end from the last release to the end.
 */
export async function contentionRound(
  adapters: readonly Adapter[],
  key: string,
  row: ContentionRow,
  ms: number,
): Promise<ContentionOutcome> {
  const perContender = new Array<number>(adapters.length).fill(0);
  let holder: number | undefined;
  let violations = 0;
  let exhausted = 0;
  let otherErrors = 0;
  let maxGapMs = 0;
  let maxGap = { from: 0, to: 0 };
  // A pause stops every contender of this process at once: the gaps it makes are the process's, not the lock's.
  const pauses: PerformanceEntry[] = [];
  const gc = new PerformanceObserver((list) => pauses.push(...list.getEntries()));
  gc.observe({ entryTypes: ['gc'] });
  const stalls = noCpu();
  const gap = (from: number, to: number): void => {
    if (to - from <= maxGapMs) return;
    maxGapMs = to - from;
    maxGap = { from, to };
  };
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
          gap(freeSince, at);
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
  if (freeSince >= lastAcquire) gap(freeSince, end);
  // Entries reach the observer a turn after their pause.
  await nextTurn();
  pauses.push(...gc.takeRecords());
  gc.disconnect();
  stalls.stop();
  const inRound = pauses.filter((pause) => pause.startTime < end && pause.startTime + pause.duration > start);
  const inGap = (from: number, to: number): number =>
    Math.max(0, Math.min(to, maxGap.to) - Math.max(from, maxGap.from));
  const overlap = (pause: PerformanceEntry): number => inGap(pause.startTime, pause.startTime + pause.duration);
  const acquisitions = perContender.reduce((a, b) => a + b, 0);
  const squares = perContender.reduce((a, b) => a + b * b, 0);
  return {
    acquisitions,
    acquisitionsPerSec: acquisitions / (ms / 1000),
    perContender,
    jain: squares === 0 ? Number.NaN : (acquisitions * acquisitions) / (adapters.length * squares),
    maxGapMs,
    maxGcPauseMs: Math.max(0, ...inRound.map((pause) => pause.duration)),
    gcInMaxGapMs: inRound.reduce((sum, pause) => sum + overlap(pause), 0),
    noCpuInMaxGapMs: stalls.periods.reduce((sum, { from, to, ms }) => sum + Math.min(ms, inGap(from, to)), 0),
    exhausted,
    otherErrors,
    violations,
    drainMs,
  };
}
