import { sleep, startRedisNodes, waitUntil } from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { queueRedisOptions } from '../src/index.ts';

describe('queue Redis connections', () => {
  it('find a queue Redis restarted after 5 s down within a second, where ioredis by default backs off for seconds', async () => {
    const nodes = await startRedisNodes({ count: 1, aof: false });
    const url = nodes.urls[0] ?? '';
    const clients = { ours: new Redis(url, queueRedisOptions(url, undefined)), defaults: new Redis(url) };
    const readyAt = { ours: 0, defaults: 0 };
    for (const [name, client] of Object.entries(clients) as [keyof typeof clients, Redis][]) {
      client.on('error', () => undefined);
      client.on('ready', () => (readyAt[name] = performance.now()));
    }
    try {
      await waitUntil(() => readyAt.ours > 0 && readyAt.defaults > 0, 'both connected');
      await nodes.node(0).kill();
      await sleep(5000);
      await nodes.node(0).restart({ keepData: false });
      const restartedAt = performance.now();
      await waitUntil(() => readyAt.ours > restartedAt && readyAt.defaults > restartedAt, 'both reconnected', {
        timeoutMs: 15_000,
      });
      // At most 500 ms between attempts, plus the connect itself on a loaded machine (the default: 1.3 s at the least).
      expect(readyAt.ours - restartedAt).toBeLessThan(1200);
      // The default's next attempt after 5 s of backing off comes 1.6-5.2 s later: the comparison shows the test can tell.
      expect(readyAt.defaults).toBeGreaterThan(readyAt.ours);
      expect(await clients.ours.ping()).toBe('PONG');
    } finally {
      for (const client of Object.values(clients)) client.disconnect();
      await nodes.close();
    }
  }, 30_000);
});
