import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { startRedisNodes } from '../src/index.ts';
import { outcome, strictClient } from './clients.ts';

describe('password and TLS nodes (process driver)', () => {
  it('a password node refuses a client without it and serves one with it', async () => {
    const nodes = await startRedisNodes({ count: 1, driver: 'process', password: 's3cret' });
    try {
      const node = nodes.node(0);
      expect(node.url).toContain(':s3cret@');
      const anonymous = strictClient(node.url.replace(':s3cret@', ''));
      expect(await outcome(anonymous.connect().then(() => anonymous.get('k')))).toMatch(/^error:/);
      anonymous.disconnect();
      const authenticated = strictClient(node.url);
      await authenticated.connect();
      expect(await authenticated.set('k', 'v')).toBe('OK');
      authenticated.disconnect();
      expect((await node.info('server'))['tcp_port']).toBe(String(node.port));
    } finally {
      await nodes.close();
    }
  });

  it('a TLS node serves rediss:// with its CA', async () => {
    const nodes = await startRedisNodes({ count: 1, driver: 'process', tls: true });
    try {
      const tls = nodes.node(0).tls;
      if (!tls) throw new Error('expected TLS details');
      const client = new Redis(tls.url, { tls: { ca: tls.ca }, lazyConnect: true, maxRetriesPerRequest: 0 });
      await client.connect();
      expect(await client.ping()).toBe('PONG');
      client.disconnect();
      await nodes.node(0).restart({ keepData: false });
      const again = new Redis(tls.url, { tls: { ca: tls.ca }, lazyConnect: true, maxRetriesPerRequest: 0 });
      await again.connect();
      expect(await again.ping()).toBe('PONG');
      again.disconnect();
    } finally {
      await nodes.close();
    }
  });
});
