import { createHash } from 'node:crypto';
import { sleep, startRedisNodes, waitUntil } from '@tickwarden/testkit';
import { describe, expect, it } from 'vitest';
import { SocketLockNode, type LuaScript } from '../src/index.ts';
import { inspect, useNodes } from './support.ts';

function script(source: string): LuaScript {
  return { name: 'test', source, sha: createHash('sha1').update(source).digest('hex') };
}

// Writes ARGV[1] to KEYS[1] and answers what a lock script's reply can hold: a code, a pair, a nil.
const WRITE = script("redis.call('SET', KEYS[1], ARGV[1]); return {1, {-2, ARGV[1]}, false}");
const DB = script("return redis.call('GET', KEYS[1])");

/** Time `promise` takes to settle, ms, and how. */
async function timed(promise: Promise<unknown>): Promise<{ ms: number; error: Error | undefined }> {
  const start = performance.now();
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught as Error,
  );
  return { ms: performance.now() - start, error };
}

describe('SocketLockNode', () => {
  const cluster = useNodes(1);

  it('runs a script the node does not have yet (NOSCRIPT: one EVAL), then by its SHA', async () => {
    const node = new SocketLockNode(cluster.nodes.urls[0] ?? '');
    await inspect(cluster.nodes.urls[0] ?? '', (client) => client.call('SCRIPT', 'FLUSH'));
    const key = 'socket-node:a';
    for (let i = 0; i < 3; i++) expect(await node.run(WRITE, [key], [`v${i}`], 2000)).toEqual([1, [-2, `v${i}`], null]);
    const stats = await cluster.nodes.node(0).info('commandstats');
    expect(stats['cmdstat_eval']).toMatch(/^calls=1,/);
    expect(await inspect(cluster.nodes.urls[0] ?? '', (client) => client.get(key))).toBe('v2');
    await node.close();
  });

  it('uses the database the URL names', async () => {
    const node = new SocketLockNode(`${cluster.nodes.urls[0]}/3`);
    await node.run(WRITE, ['socket-node:db'], ['in-3'], 2000);
    expect(await inspect(`${cluster.nodes.urls[0]}/3`, (client) => client.get('socket-node:db'))).toBe('in-3');
    expect(await inspect(cluster.nodes.urls[0] ?? '', (client) => client.get('socket-node:db'))).toBeNull();
    expect(await node.run(DB, ['socket-node:db'], [], 2000)).toBe('in-3');
    await node.close();
  });

  it('fails calls at once while a connected node is down, and reconnects when it is back', async () => {
    const redis = cluster.nodes.node(0);
    const node = new SocketLockNode(redis.url);
    await node.run(WRITE, ['socket-node:b'], ['1'], 2000);
    // A call in flight when the node dies is rejected, not left waiting.
    await redis.pause();
    const inFlight = timed(node.run(WRITE, ['socket-node:b'], ['2'], 2000));
    await redis.kill();
    expect((await inFlight).error?.message).toMatch(/connection lost/);
    const down = await timed(node.run(WRITE, ['socket-node:b'], ['3'], 2000));
    expect(down.error?.message).toMatch(/not connected/);
    expect(down.ms).toBeLessThan(100);
    await redis.restart({ keepData: false });
    // Reconnected within the backoff (at most 200 ms between attempts).
    await waitUntil(
      () =>
        node.run(WRITE, ['socket-node:b'], ['4'], 2000).then(
          () => true,
          () => false,
        ),
      'reconnected',
      { timeoutMs: 5000 },
    );
    expect(await inspect(redis.url, (client) => client.get('socket-node:b'))).toBe('4');
    await node.close();
  });

  it('a node never connected yet: calls wait for its first connection within their budget', async () => {
    const redis = cluster.nodes.node(0);
    await redis.kill();
    const node = new SocketLockNode(redis.url);
    const tooShort = await timed(node.run(WRITE, ['socket-node:c'], ['1'], 150));
    expect(tooShort.error?.message).toMatch(/not connected within 150 ms/);
    expect(tooShort.ms).toBeGreaterThanOrEqual(140);
    const waiting = node.run(WRITE, ['socket-node:c'], ['2'], 10_000);
    await redis.restart({ keepData: false });
    expect(await waiting).toEqual([1, [-2, '2'], null]);
    await node.close();
  });

  it('close fails the calls in flight and later ones, and does not reconnect', async () => {
    const redis = cluster.nodes.node(0);
    const node = new SocketLockNode(redis.url);
    await node.run(WRITE, ['socket-node:d'], ['1'], 2000);
    await redis.pause();
    const inFlight = timed(node.run(WRITE, ['socket-node:d'], ['2'], 2000));
    await node.close();
    await redis.resume();
    expect((await inFlight).error?.message).toMatch(/closed/);
    await expect(node.run(WRITE, ['socket-node:d'], ['3'], 2000)).rejects.toThrow(/closed/);
    const clients = await redis.info('clients');
    expect(clients['connected_clients']).toBe('1'); // the INFO call's own
  });

  it('refuses a URL that is not redis:// or rediss://', () => {
    expect(() => new SocketLockNode('http://127.0.0.1:6379')).toThrow(/redis:\/\/ or rediss:\/\//);
  });
});

/** A subscriber on `node`'s connection settings, collecting what it hears. */
function listen(node: SocketLockNode): { heard: string[]; subscriber: ReturnType<SocketLockNode['openSubscriber']> } {
  const heard: string[] = [];
  const subscriber = node.openSubscriber((channel, message) => heard.push(`${channel}=${message}`));
  return { heard, subscriber };
}

const publish = (url: string, channel: string, message: string): Promise<number> =>
  inspect(url, (client) => client.publish(channel, message));

describe('SocketLockNode subscriber', () => {
  const cluster = useNodes(1);

  it('confirms a subscription, hears its messages, and stops hearing them once unsubscribed', async () => {
    const url = cluster.nodes.urls[0] ?? '';
    const node = new SocketLockNode(url);
    const { heard, subscriber } = listen(node);
    await subscriber.subscribe('sub:a');
    await subscriber.subscribe('sub:b');
    // Confirmed means the node counts the subscriber: a PUBLISH right after reaches it.
    expect(await publish(url, 'sub:a', 'one')).toBe(1);
    expect(await publish(url, 'sub:b', 'v|17')).toBe(1);
    await waitUntil(() => heard.length === 2, 'two messages');
    expect(heard).toEqual(['sub:a=one', 'sub:b=v|17']);
    subscriber.unsubscribe('sub:a');
    await waitUntil(async () => (await publish(url, 'sub:a', 'two')) === 0, 'unsubscribed');
    // Subscribing again to a channel already confirmed resolves at once.
    await subscriber.subscribe('sub:b');
    subscriber.close();
    await node.close();
  });

  it('subscribes every channel again on a new connection after the node restarted', async () => {
    const redis = cluster.nodes.node(0);
    const node = new SocketLockNode(redis.url);
    const { heard, subscriber } = listen(node);
    await subscriber.subscribe('sub:c');
    await redis.restart({ keepData: false });
    // A subscription made while the node is away waits for the next connection.
    const later = subscriber.subscribe('sub:d').then(() => 'confirmed');
    expect(await Promise.race([later, sleep(5000).then(() => 'still waiting after 5 s')])).toBe('confirmed');
    await waitUntil(async () => (await publish(redis.url, 'sub:c', 'back')) === 1, 'resubscribed');
    expect(await publish(redis.url, 'sub:d', 'new')).toBe(1);
    await waitUntil(() => heard.includes('sub:d=new'), 'the new channel heard');
    expect(heard).toContain('sub:c=back');
    subscriber.close();
    await node.close();
  });

  it('close fails the subscriptions still waiting', async () => {
    const redis = cluster.nodes.node(0);
    const node = new SocketLockNode(redis.url);
    await redis.pause();
    const { subscriber } = listen(node);
    const waiting = subscriber.subscribe('sub:e').then(
      () => 'confirmed',
      (error: Error) => error.message,
    );
    subscriber.close();
    await redis.resume();
    expect(await waiting).toBe('closed');
    await node.close();
  });
});

describe('SocketLockNode with a password', () => {
  it('authenticates calls and subscriptions from the URL; a wrong password fails calls, naming no secret', async () => {
    const nodes = await startRedisNodes({ count: 1, password: 'node-secret' });
    try {
      const url = nodes.urls[0] ?? '';
      const node = new SocketLockNode(url);
      expect(await node.run(WRITE, ['socket-node:auth'], ['1'], 2000)).toEqual([1, [-2, '1'], null]);
      const { heard, subscriber } = listen(node);
      await subscriber.subscribe('sub:auth');
      expect(await publish(url, 'sub:auth', 'hello')).toBe(1);
      await waitUntil(() => heard.length === 1, 'the message');
      subscriber.close();
      await node.close();
      const wrong = new SocketLockNode(url.replace('node-secret', 'not-it'));
      const error = (await wrong.run(WRITE, ['socket-node:auth'], ['2'], 500).catch((e: unknown) => e)) as Error;
      expect(error.message).toMatch(/^not connected within 500 ms \((connecting|down): WRONGPASS/);
      expect(error.message).not.toContain('secret');
      expect(error.message).not.toContain('not-it');
      await wrong.close();
    } finally {
      await nodes.close();
    }
  });
});
