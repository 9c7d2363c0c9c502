import { sleep, startRedisNodes, waitUntil } from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  AcquireAbortedError,
  LockTakenError,
  QuorumUnavailableError,
  Redlock,
  resourceKeys,
  type Lease,
  IoredisLockNode,
  type LockNode,
} from '../src/index.ts';
import { connectedRedlockOn, inspect, onEveryNode, redlockOn, TestClock, useNodes } from './support.ts';

describe.each([1, 3, 5])('acquire and release with %i node(s)', (count) => {
  const cluster = useNodes(count);
  const quorum = Math.floor(count / 2) + 1;

  it('grants a lease with a 20-byte random value, a fence and a validity below the TTL', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const before = redlock.settings.clock.now();
    const lease = await redlock.acquire('basic', 1000);
    const after = redlock.settings.clock.now();
    expect(lease.value).toMatch(/^[0-9a-f]{40}$/);
    expect(Number.isSafeInteger(lease.fence)).toBe(true);
    // Validity runs from the start of the attempt: ttl minus drift (1000 * 0.01 + 2 ms).
    expect(lease.validUntil).toBeGreaterThanOrEqual(before + 1000 - 12);
    expect(lease.validUntil).toBeLessThanOrEqual(after + 1000 - 12);
    const keys = resourceKeys(redlock.settings.keyPrefix, 'basic');
    const holders = await Promise.all(cluster.nodes.urls.map((url) => inspect(url, (c) => c.get(keys.lock))));
    expect(holders.filter((v) => v === lease.value).length).toBeGreaterThanOrEqual(quorum);
    const released = await redlock.release(lease);
    expect(released.released.length).toBeGreaterThanOrEqual(quorum);
    expect(released.released.length + released.unconfirmed.length).toBe(count);
    // Nodes unconfirmed when the release was decided still get it.
    await waitUntil(
      async () =>
        (await Promise.all(cluster.nodes.urls.map((url) => inspect(url, (c) => c.get(keys.lock))))).every(
          (v) => v === null,
        ),
      'the key gone on every node',
    );
  });

  it('a lock held by another value is reported as taken, naming the nodes', async () => {
    const a = redlockOn(cluster.nodes.urls);
    const b = redlockOn(cluster.nodes.urls, { retryCount: 2 });
    const held = await a.acquire('taken', 5000);
    const error = await b.acquire('taken', 1000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockTakenError);
    expect((error as LockTakenError).code).toBe('LOCK_TAKEN');
    expect((error as LockTakenError).takenOn.length).toBeGreaterThan(count - quorum);
    await a.release(held);
    await expect(b.acquire('taken', 1000)).resolves.toMatchObject({ resource: 'taken' });
  });

  it('an acquire that finds its own value on a node counts it (takeover by value)', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const first = await redlock.acquire('takeover', 5000);
    const again = await redlock.acquire('takeover', 5000, { value: first.value });
    expect(again.value).toBe(first.value);
    expect(again.fence).toBeGreaterThan(first.fence);
    const other = await (
      await connectedRedlockOn(cluster.nodes.urls, { retryCount: 0 })
    )
      .acquire('takeover', 1000)
      .catch((e: unknown) => e);
    expect(other, String(other)).toBeInstanceOf(LockTakenError);
    await redlock.release(again);
  });

  it('a resource named with hundreds of characters: each node stores its key as named', async () => {
    const resource = `long-${'r'.repeat(300)}`;
    const redlock = redlockOn(cluster.nodes.urls);
    const { lock } = resourceKeys(redlock.settings.keyPrefix, resource);
    const lease = await redlock.acquire(resource, 5000);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(lock), lease.value);
    expect((await redlock.release(lease)).released.length).toBeGreaterThanOrEqual(quorum);
    await onEveryNode(cluster.nodes.urls, (c) => c.get(lock), null);
  });

  it('a resource named beyond ASCII, and clients with a key prefix: each node stores the keys as named (a call is encoded once for all nodes)', async () => {
    const resource = 'rés-🔒-日本';
    const redlock = redlockOn(cluster.nodes.urls);
    const keys = resourceKeys(redlock.settings.keyPrefix, resource);
    const everyNode = (prefix: string, value: string | null) =>
      onEveryNode(cluster.nodes.urls, (c) => c.get(prefix + keys.lock), value);
    const lease = await redlock.acquire(resource, 5000);
    await everyNode('', lease.value);
    expect((await redlock.release(lease)).released.length).toBeGreaterThanOrEqual(quorum);
    await everyNode('', null);
    // Clients passed in with ioredis' keyPrefix: the prefix is theirs to add, as to any command.
    const clients = cluster.nodes.urls.map((url) => new Redis(url, { keyPrefix: 'app:' }));
    try {
      const prefixed = redlockOn(clients);
      const held = await prefixed.acquire(resource, 5000);
      await everyNode('app:', held.value);
      await everyNode('', null);
      expect((await prefixed.release(held)).released.length).toBeGreaterThanOrEqual(quorum);
      await everyNode('app:', null);
    } finally {
      for (const client of clients) client.disconnect();
    }
  });

  it('release(lease) is fence-checked: a takeover of the same value since keeps the lock; { resource, value } is not', async () => {
    const redlock = redlockOn(cluster.nodes.urls);
    const keys = resourceKeys(redlock.settings.keyPrefix, 'fenced-release');
    const holders = () => Promise.all(cluster.nodes.urls.map((url) => inspect(url, (c) => c.get(keys.lock))));
    const first = await redlock.acquire('fenced-release', 5000);
    const again = await redlock.acquire('fenced-release', 5000, { value: first.value });
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.fence), String(again.fence));
    expect((await redlock.release(first)).released).toEqual([]);
    expect((await holders()).filter((v) => v === first.value).length).toBeGreaterThanOrEqual(quorum);
    const plain = await redlock.release({ resource: again.resource, value: again.value });
    expect(plain.released.length).toBeGreaterThanOrEqual(quorum);
  });

  it('does not grant a lease whose validity would be <= 0 (the clock jumped during the attempt)', async () => {
    const clock = new TestClock();
    const redlock = redlockOn(cluster.nodes.urls, { clock, retryCount: 0 });
    const skewing = redlock.nodes.map((node) => {
      const run = node.run.bind(node);
      node.run = async (...args) => {
        clock.monotonicOffset += 400; // each node "takes" 400 ms of monotonic time
        return run(...args);
      };
      return node;
    });
    expect(skewing.length).toBe(count);
    const error = await redlock.acquire('slow', 300).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnavailableError);
    // The attempt's partial locks were released.
    const keys = resourceKeys(redlock.settings.keyPrefix, 'slow');
    // Released, not expired: the keys' 300 ms TTL has not run out when the wait ends.
    await onEveryNode(cluster.nodes.urls, (c) => c.get(keys.lock), null, 200);
  });

  it('an AbortSignal cancels waiting between attempts', async () => {
    const holder = redlockOn(cluster.nodes.urls);
    const lease = await holder.acquire('abortable', 10_000);
    const waiter = redlockOn(cluster.nodes.urls, { retryCount: 1000, retryDelayMs: 50 });
    const controller = new AbortController();
    const pending = waiter.acquire('abortable', 1000, { signal: controller.signal }).catch((e: unknown) => e);
    setTimeout(() => controller.abort(new Error('shutting down')), 120);
    const started = performance.now();
    const error = await pending;
    expect(error).toBeInstanceOf(AcquireAbortedError);
    expect(performance.now() - started).toBeLessThan(2000);
    await holder.release(lease);
  });
});

describe("a failed attempt's cleanup goes only where the attempt may have set something", () => {
  const cluster = useNodes(3);

  /** Records each script call a node of `redlock` is sent, by script name and node index. */
  function recordCalls(redlock: Redlock): { script: string; node: number }[] {
    const calls: { script: string; node: number }[] = [];
    redlock.nodes.forEach((node, i) => {
      const run = node.run.bind(node);
      node.run = (script, ...rest) => {
        calls.push({ script: script.name, node: i });
        return run(script, ...rest);
      };
    });
    return calls;
  }

  const heldOnEveryNode = (lease: Lease) =>
    onEveryNode(cluster.nodes.urls, (c) => c.get(resourceKeys('tickwarden', lease.resource).lock), lease.value);

  it('releases on the node that granted, never on those that answered taken', async () => {
    const holder = redlockOn(cluster.nodes.urls);
    const lease = await holder.acquire('split', 5000);
    await heldOnEveryNode(lease);
    const keys = resourceKeys(holder.settings.keyPrefix, 'split');
    // Free on node 2 only: the contender gets node 2 and fails on 0 and 1, which both answer before
    // the attempt can be decided (one grant and one node left could still make the quorum of two).
    await inspect(cluster.nodes.urls[2] ?? '', (c) => c.del(keys.lock));
    const contender = redlockOn(cluster.nodes.urls, { retryCount: 0 });
    await contender.probe({ nodeTimeoutMs: 5000 }); // connected: a node timed out on its first connect would be cleaned up
    const calls = recordCalls(contender);
    await expect(contender.acquire('split', 5000)).rejects.toBeInstanceOf(LockTakenError);
    await waitUntil(
      async () => (await inspect(cluster.nodes.urls[2] ?? '', (c) => c.get(keys.lock))) === null,
      'the cleanup on node 2',
    );
    expect(calls.filter((c) => c.script === 'release').map((c) => c.node)).toEqual([2]);
    await holder.release(lease);
  });

  it("sends nothing where no node granted (a waiter's failed attempt), also to the node heard late", async () => {
    const holder = redlockOn(cluster.nodes.urls);
    const lease = await holder.acquire('held', 5000);
    await heldOnEveryNode(lease);
    const contender = redlockOn(cluster.nodes.urls, { retryCount: 0 });
    await contender.probe({ nodeTimeoutMs: 5000 }); // connected: a node timed out on its first connect would be cleaned up
    const calls = recordCalls(contender);
    await expect(contender.acquire('held', 5000)).rejects.toBeInstanceOf(LockTakenError);
    await sleep(50); // the vote of the node the attempt was decided without has come: taken
    expect(calls.filter((c) => c.script === 'release')).toEqual([]);
    await holder.release(lease);
  });

  it('cleans up on a node heard after the attempt was decided when its late vote is a grant', async () => {
    const holder = redlockOn(cluster.nodes.urls);
    const lease = await holder.acquire('late-grant', 5000);
    await heldOnEveryNode(lease);
    const keys = resourceKeys(holder.settings.keyPrefix, 'late-grant');
    await inspect(cluster.nodes.urls[2] ?? '', (c) => c.del(keys.lock));
    const contender = redlockOn(cluster.nodes.urls, { retryCount: 0 });
    // Connected first: a slow first connect would hold node 2's grant back until after the checks.
    await contender.probe({ nodeTimeoutMs: 5000 });
    const calls = recordCalls(contender);
    // Node 2 grants, but its reply comes after nodes 0 and 1 decided the attempt (both taken).
    const slow = contender.nodes[2] as LockNode;
    const run = slow.run.bind(slow);
    slow.run = async (script, ...rest) => {
      const reply = await run(script, ...rest);
      if (script.name === 'acquire') await sleep(100);
      return reply;
    };
    await expect(contender.acquire('late-grant', 5000)).rejects.toBeInstanceOf(LockTakenError);
    expect(calls.filter((c) => c.script === 'release')).toEqual([]);
    // The cleanup is sent once the late grant is heard, and lands (long before the 5 s TTL).
    await waitUntil(() => calls.some((c) => c.script === 'release'), 'the cleanup sent', { timeoutMs: 3000 });
    await waitUntil(
      async () => (await inspect(cluster.nodes.urls[2] ?? '', (c) => c.get(keys.lock))) === null,
      'the cleanup on node 2',
      { timeoutMs: 3000 },
    );
    expect(calls.filter((c) => c.script === 'release').map((c) => c.node)).toEqual([2]);
    await holder.release(lease);
  });
});

describe('an event-loop stall longer than the node timeout (a GC pause)', () => {
  const cluster = useNodes(3);

  it('reads the replies that arrived during the stall before timing nodes out', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 100, retryCount: 0 });
    // The warm-up only connects the clients: on a busy machine that can take longer than the 100 ms under test.
    await redlock.release(await redlock.acquire('stall-warm-up', 5000, { nodeTimeoutMs: 2000 }));
    const acquiring = redlock.acquire('stall', 5000);
    // Queued after the library's send (also at setImmediate): the requests are out, the replies land in the socket buffers.
    await new Promise<void>((resolve) =>
      setImmediate(() => {
        const until = performance.now() + 300;
        while (performance.now() < until);
        resolve();
      }),
    );
    const lease = await acquiring;
    expect(lease.resource).toBe('stall');
    await redlock.release(lease);
  });
});

describe('node failures with 5 nodes', () => {
  const cluster = useNodes(5);

  it('a minority of nodes down: still granted; the majority down: QuorumUnavailableError naming each node', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { retryCount: 1 });
    const nodes = cluster.nodes.nodes;
    await nodes[0]?.kill();
    await nodes[1]?.kill();
    const lease = await redlock.acquire('minority-down', 1000);
    await redlock.release(lease);
    await nodes[2]?.kill();
    const error = await redlock.acquire('majority-down', 1000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnavailableError);
    const causes = (error as QuorumUnavailableError).nodeCauses;
    for (const node of nodes.slice(0, 3)) expect(causes.get(node.id)).toBeInstanceOf(Error);
    for (const node of nodes.slice(0, 3)) await node.restart({ keepData: false });
    await expect(redlock.acquire('majority-back', 1000, { retryCount: 50 })).resolves.toMatchObject({
      resource: 'majority-back',
    });
  });

  it('one node slower than the per-node timeout does not delay a grant', async () => {
    const link = await cluster.nodes.link('slow-one');
    const redlock = redlockOn(link.urls, { nodeTimeoutMs: 100 });
    await redlock.release(await redlock.acquire('warm', 1000));
    link.setFault(0, { kind: 'latency', ms: 500 });
    const started = performance.now();
    const lease = await redlock.acquire('one-slow', 2000);
    // Waiting for node 0's reply (500 ms each way) would take at least 1000 ms.
    expect(performance.now() - started).toBeLessThan(900);
    await redlock.release(lease);
    link.heal();
  });

  it('a node paused longer than the TTL: leases still granted, and released without waiting for it', async () => {
    // A node timeout far beyond the test's own: a release that waited for the paused node would time the test out.
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 60_000 });
    const node = cluster.nodes.node(4);
    await node.pause();
    try {
      // Paused past the TTL before the first grant; the TTL is long enough that a loaded machine
      // cannot let a lease expire between its grant and its release (a release then finds it gone).
      await sleep(1100);
      for (let i = 0; i < 5; i++) {
        const lease = await redlock.acquire('paused-node', 1000);
        const result = await redlock.release(lease);
        expect(result.unconfirmed).toContain(node.id);
        expect(result.released.length).toBeGreaterThanOrEqual(3);
        expect(result.failed.size).toBe(0);
      }
    } finally {
      await node.resume();
    }
  });

  it('probe() tells which nodes answer and whether they make a quorum', async () => {
    // Long enough for the live nodes of a loaded machine; the paused ones never answer.
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 1000 });
    expect((await redlock.probe({ nodeTimeoutMs: 5000 })).reachable).toHaveLength(5); // connected
    expect((await redlock.probe()).quorum).toBe(true);
    const paused = cluster.nodes.nodes.slice(0, 3);
    for (const node of paused) await node.pause();
    try {
      const probe = await redlock.probe();
      expect(probe.quorum).toBe(false);
      expect([...probe.unreachable.keys()].sort()).toEqual(paused.map((n) => n.id).sort());
    } finally {
      for (const node of paused) await node.resume();
    }
  });

  it('probe({ nodeTimeoutMs }) counts a node slower than the setting but inside the override as reachable', async () => {
    const link = await cluster.nodes.link('slow-probe');
    const redlock = redlockOn(link.urls, { nodeTimeoutMs: 100 });
    expect((await redlock.probe({ nodeTimeoutMs: 5000 })).quorum).toBe(true); // connected
    for (const node of [0, 1, 2]) link.setFault(node, { kind: 'latency', ms: 200 });
    try {
      expect((await redlock.probe()).quorum).toBe(false);
      const probe = await redlock.probe({ nodeTimeoutMs: 1000 });
      expect(probe.quorum).toBe(true);
      expect(probe.reachable).toHaveLength(cluster.nodes.nodes.length);
    } finally {
      link.heal();
    }
  });

  it('emits per-node errors as events and prints nothing', async () => {
    const redlock = redlockOn(cluster.nodes.urls, { nodeTimeoutMs: 100 });
    const errors: string[] = [];
    redlock.on('nodeError', ({ node, operation }) => errors.push(`${operation} ${node}`));
    // Connected first: a first connect slower than the node timeout would be a node error too.
    await redlock.probe({ nodeTimeoutMs: 5000 });
    const node = cluster.nodes.node(3);
    await node.pause();
    try {
      // Decided without the paused node (the node timeout is 100 ms, but a quorum answers first).
      const released = await redlock.release(await redlock.acquire('events', 1000));
      expect(released.unconfirmed).toContain(node.id);
      expect(errors).toEqual([]);
      // The calls still in flight fail when the node dies: reported although the calls were decided.
      await node.kill();
      await waitUntil(() => errors.length === 2, 'the calls in flight to fail', { timeoutMs: 5000 });
      expect(errors.sort()).toEqual([`acquire ${node.id}`, `release ${node.id}`]);
      // Down, it is reported by the calls that meet it (a quorum may decide a call before its error arrives).
      await redlock.release(await redlock.acquire('events', 1000));
      await waitUntil(() => errors.length >= 4, 'the calls to the down node to fail', { timeoutMs: 5000 });
      expect(errors.filter((e) => e.endsWith(node.id))).toHaveLength(4);
    } finally {
      await node.restart({ keepData: false });
    }
  });
});

describe('construction', () => {
  it('accepts ioredis clients, leaving them open on close', async () => {
    const nodes = await startRedisNodes({ count: 1 });
    const client = new Redis(nodes.urls[0] ?? '');
    const redlock = new Redlock([client]);
    await redlock.release(await redlock.acquire('client', 1000));
    await redlock.close();
    expect(await client.ping()).toBe('PONG');
    client.disconnect();
    await nodes.close();
  });
});

describe('calls made before the first connection', () => {
  const cluster = useNodes(1);

  it('share one wait for it: 50 concurrent acquires are granted without a listener-leak warning', async () => {
    const client = new Redlock([IoredisLockNode.fromUrl(cluster.nodes.urls[0] ?? '')]);
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on('warning', onWarning);
    try {
      // Each with its own node timeout, so that no two merge into one script call.
      const acquires = Array.from({ length: 50 }, (_, i) =>
        client.acquire(`before-connect-${i}`, 5000, { nodeTimeoutMs: 2000 + i }),
      );
      const leases = await Promise.all(acquires);
      expect(leases).toHaveLength(50);
      await client.releaseBatch(leases);
      // Warnings are emitted on the next tick.
      await sleep(10);
    } finally {
      process.off('warning', onWarning);
      await client.close();
    }
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
