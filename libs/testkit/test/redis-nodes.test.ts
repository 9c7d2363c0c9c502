import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ProcessRedisNode, startRedisNodes, type RedisNodes } from '../src/index.ts';
import { strictClient, outcome } from './clients.ts';
import { alive } from './alive.ts';
import { availableDrivers } from './drivers.ts';

const drivers = await availableDrivers();

describe.each(drivers)('%s driver', (driver) => {
  let nodes: RedisNodes;
  const clients: Redis[] = [];
  const client = async (url: string, timeoutMs?: number): Promise<Redis> => {
    const c = strictClient(url, timeoutMs);
    clients.push(c);
    await c.connect();
    return c;
  };

  beforeAll(async () => {
    nodes = await startRedisNodes({ count: 3, driver });
  });
  afterAll(async () => {
    await nodes.close();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.disconnect();
    for (const node of nodes.nodes) await node.resume();
  });

  it('starts independent nodes on distinct free loopback ports, never 6379', async () => {
    const ports = nodes.nodes.map((node) => node.port);
    expect(new Set(ports).size).toBe(3);
    expect(ports).not.toContain(6379);
    await (await client(nodes.node(0).url)).set('only-on-0', '1');
    expect(await (await client(nodes.node(1).url)).get('only-on-0')).toBeNull();
    for (const node of nodes.nodes) {
      const info = await node.info('server');
      expect(info['tcp_port']).toBe(String(node.port));
      expect(node.host).toBe('127.0.0.1');
    }
  });

  it('a paused node stops answering and answers again after resume', async () => {
    const node = nodes.node(0);
    const c = await client(node.url, 300);
    await node.pause();
    const pending = c.set('written-while-paused', '1');
    expect(await outcome(pending)).toMatch(/timed out|Command timed out/i);
    await expect(node.info(undefined, 200)).rejects.toThrow();
    await node.resume();
    expect(await (await client(node.url)).ping()).toBe('PONG');
  });

  it('a killed node refuses connections; restarted empty it has no keys', async () => {
    const node = nodes.node(1);
    await (await client(node.url)).set('k', 'v');
    await node.kill();
    expect(await outcome(client(node.url))).toMatch(/^error:/);
    await node.restart({ keepData: false });
    const c = await client(node.url);
    expect(await c.dbsize()).toBe(0);
  });

  it('restarted with its data (AOF), a killed node keeps every acknowledged write', async () => {
    const node = nodes.node(2);
    const c = await client(node.url);
    for (let i = 0; i < 100; i++) await c.set(`key-${i}`, String(i));
    await node.kill();
    await node.restart({ keepData: true });
    const after = await client(node.url);
    expect(await after.dbsize()).toBe(100);
    expect(await after.get('key-99')).toBe('99');
  });

  it('latency delays every reply by at least the configured time', async () => {
    const link = await nodes.link('latency');
    const c = await client(link.urls[0] ?? '', 2000);
    await c.ping();
    link.setFault(0, { kind: 'latency', ms: 120 });
    const started = performance.now();
    await c.ping();
    // 120 ms each way: the lower bound is the claim; no upper bound is asserted.
    expect(performance.now() - started).toBeGreaterThanOrEqual(230);
    link.heal();
  });

  it('latency never reorders a stream: commands sent across a heal land and answer in order', async () => {
    const link = await nodes.link('latency-order');
    const c = await client(link.urls[0] ?? '', 2000);
    await c.del('order');
    link.setFault(0, { kind: 'latency', ms: 150 });
    const first = c.append('order', 'a');
    // Let the first command reach the proxy (and wait there) before the fault is gone.
    await new Promise((resolve) => setTimeout(resolve, 30));
    link.heal();
    const second = c.append('order', 'b');
    // Reordered, 'b' would land first and each command would get the other's reply.
    expect(await Promise.all([first, second])).toEqual([1, 2]);
    expect(await c.get('order')).toBe('ab');
  });

  it('blackhole accepts connections but never answers, and delivers once healed', async () => {
    const link = await nodes.link('blackhole');
    const c = await client(link.urls[1] ?? '', 5000);
    link.setFault(1, { kind: 'blackhole' });
    let settled = false;
    const pending = c.set('late', 'arrives').finally(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(settled).toBe(false);
    expect(await (await client(nodes.node(1).url)).get('late')).toBeNull();
    link.heal();
    expect(await pending).toBe('OK');
    expect(await (await client(nodes.node(1).url)).get('late')).toBe('arrives');
  });

  it('reset drops open connections and refuses new ones', async () => {
    const link = await nodes.link('reset');
    const c = await client(link.urls[2] ?? '');
    await c.ping();
    const closed = new Promise((resolve) => c.once('close', resolve));
    link.setFault(2, { kind: 'reset' });
    await closed;
    expect(await outcome(client(link.urls[2] ?? ''))).toMatch(/^error:/);
    link.heal();
    expect(await (await client(link.urls[2] ?? '')).ping()).toBe('PONG');
  });

  it('a partitioned client times out on its cut nodes while another client still reaches them', async () => {
    const cut = await nodes.link('cut');
    const other = await nodes.link('other');
    // A short command timeout only where it must expire; the others must answer, however loaded the machine.
    const cutClients = await Promise.all(cut.urls.map((url, i) => client(url, i < 2 ? 300 : 5000)));
    const otherClients = await Promise.all(other.urls.map((url) => client(url, 5000)));
    cut.partition([0, nodes.node(1).id]);
    const results = await Promise.all(cutClients.map((c) => outcome(c.ping())));
    expect(results[0]).toMatch(/timed out/i);
    expect(results[1]).toMatch(/timed out/i);
    expect(results[2]).toBe('PONG');
    expect(await Promise.all(otherClients.map((c) => c.ping()))).toEqual(['PONG', 'PONG', 'PONG']);
    cut.heal();
  });
});

describe('cleanup', () => {
  it('close() stops every redis-server the kit started', async () => {
    const nodes = await startRedisNodes({ count: 2, driver: 'process' });
    const pids = nodes.nodes.map((node) => (node as ProcessRedisNode).pid);
    expect(pids.every((pid) => typeof pid === 'number' && alive(pid))).toBe(true);
    await nodes.close();
    expect(pids.filter((pid) => alive(pid ?? 0))).toEqual([]);
  });
});
