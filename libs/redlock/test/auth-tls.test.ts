import { startRedisNodes, type RedisNodes } from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IoredisLockNode, QuorumUnavailableError, Redlock } from '../src/index.ts';

describe('secured lock nodes', () => {
  let nodes: RedisNodes;
  beforeAll(async () => {
    // Three nodes with an ACL user `tickwarden` (and the default user's password), over TLS too.
    nodes = await startRedisNodes({
      count: 3,
      password: 'default-secret',
      tls: true,
      extraArgs: ['--user', 'tickwarden', 'on', '>lock-secret', '~tickwarden:*', '+@all'],
    });
  });
  afterAll(() => nodes.close());

  it('authenticates with an ACL user from the URL, and fails as QuorumUnavailable without it', async () => {
    const urls = nodes.nodes.map((node) => `redis://tickwarden:lock-secret@127.0.0.1:${node.port}`);
    const redlock = new Redlock(urls);
    await redlock.release(await redlock.acquire('acl', 1000));
    await redlock.close();
    const anonymous = new Redlock(
      nodes.nodes.map((node) => `redis://127.0.0.1:${node.port}`),
      { retryCount: 0 },
    );
    const error = await anonymous.acquire('acl', 1000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QuorumUnavailableError);
    // No secret reaches an error message.
    expect(String((error as Error).message)).not.toContain('secret');
    await anonymous.close();
  });

  it('works over TLS (rediss://) with the nodes CA', async () => {
    const lockNodes = nodes.nodes.map((node) => {
      const tls = node.tls;
      if (!tls) throw new Error('expected TLS');
      return IoredisLockNode.fromUrl(tls.url, { tls: { ca: tls.ca } });
    });
    const redlock = new Redlock(lockNodes);
    // Connected first (TLS handshakes on a loaded machine): a node the grant missed would fail the release there.
    await redlock.probe({ nodeTimeoutMs: 5000 });
    const lease = await redlock.acquire('tls', 1000);
    const released = await redlock.release(lease);
    expect(released.released.length).toBeGreaterThanOrEqual(2);
    expect(released.failed.size).toBe(0);
    await redlock.close();
  });
});
