import { startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, expect } from 'vitest';
import { Redlock, systemClock, type Clock, type NodeInput, type RedlockSettings } from '../src/index.ts';

/** Starts `count` real Redis nodes for the enclosing describe block; stopped after it. */
export function useNodes(count: number): { readonly nodes: RedisNodes } {
  const holder = {} as { nodes: RedisNodes };
  beforeAll(async () => {
    holder.nodes = await startRedisNodes({ count });
  });
  afterAll(async () => {
    await holder.nodes?.close();
  });
  return holder;
}

const opened: Redlock[] = [];

/**
 * A Redlock on `urls`, closed after the file. Fast retries, and a per-node timeout
 * generous enough for a loaded 2-core CI machine, unless a test overrides them.
 */
export function redlockOn(urls: readonly NodeInput[], settings: Partial<RedlockSettings> = {}): Redlock {
  const redlock = new Redlock(urls, { retryDelayMs: 20, retryJitterMs: 20, nodeTimeoutMs: 250, ...settings });
  opened.push(redlock);
  return redlock;
}

/**
 * `redlockOn`, once every node answered a probe: a fresh client's first attempt can meet a node
 * still connecting, which it counts as unreachable (QuorumUnavailableError instead of the
 * LockTakenError a test expects, or a waiter queued later than its turn).
 */
export async function connectedRedlockOn(
  urls: readonly NodeInput[],
  settings: Partial<RedlockSettings> = {},
): Promise<Redlock> {
  const redlock = redlockOn(urls, settings);
  await redlock.probe({ nodeTimeoutMs: 5000 });
  return redlock;
}

afterAll(async () => {
  await Promise.all(opened.splice(0).map((redlock) => redlock.close()));
});

/** A plain client for inspecting a node's keys. */
export async function inspect<T>(url: string, use: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  // A node that is down rejects the connect below; without a listener ioredis also prints the error.
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await use(client);
  } finally {
    client.disconnect();
  }
}

/**
 * Waits until `read` gives `expected` on every node. Calls are decided at a quorum: the other
 * nodes' writes land after the call returns, so a test that reads every node waits for them.
 */
export async function onEveryNode<T>(
  urls: readonly string[],
  read: (client: Redis) => Promise<T>,
  expected: T,
  timeoutMs = 10_000,
): Promise<void> {
  let seen: T[] = [];
  const settled = async () => {
    seen = await Promise.all(urls.map((url) => inspect(url, read)));
    return seen.every((value) => isDeepStrictEqual(value, expected));
  };
  await waitUntil(settled, 'every node', { timeoutMs }).catch(() => expect(seen).toEqual(urls.map(() => expected)));
}

/** A clock whose monotonic and wall readings are shifted by settable offsets, and which counts live timers. */
export class TestClock implements Clock {
  monotonicOffset = 0;
  wallOffsetMicros = 0;
  readonly live = new Set<unknown>();

  now(): number {
    return systemClock.now() + this.monotonicOffset;
  }
  wallMicros(): number {
    return systemClock.wallMicros() + this.wallOffsetMicros;
  }
  setTimeout(callback: () => void, ms: number): unknown {
    const handle = systemClock.setTimeout(() => {
      this.live.delete(handle);
      callback();
    }, ms);
    this.live.add(handle);
    return handle;
  }
  clearTimeout(handle: unknown): void {
    this.live.delete(handle);
    systemClock.clearTimeout(handle);
  }
}

export { sleep } from '@tickwarden/testkit';
