import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { itemsServer, MAX_ITEMS } from '../examples/bounded-items.ts';
import { redlockOn, useNodes } from './support.ts';

describe('the README example: at most 3 items, 5 concurrent requests', () => {
  const app = useNodes(1);
  const locks = useNodes(3);
  let db: Redis;
  beforeAll(() => {
    db = new Redis(app.nodes.urls[0] ?? '');
  });
  afterEach(async () => {
    await db.del('items');
  });
  afterAll(() => db.disconnect());

  async function fiveConcurrentPosts(server: ReturnType<typeof itemsServer>): Promise<number[]> {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      return await Promise.all(
        Array.from({ length: 5 }, () =>
          fetch(`http://127.0.0.1:${port}/items`, { method: 'POST' }).then((r) => r.status),
        ),
      );
    } finally {
      server.close();
    }
  }

  it('without the lock, the check-then-act race creates more than 3 items', async () => {
    const statuses = await fiveConcurrentPosts(itemsServer(db));
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThan(MAX_ITEMS);
    expect(await db.llen('items')).toBeGreaterThan(MAX_ITEMS);
  });

  it('with redlock.using, exactly 3 are created and the other 2 are refused', async () => {
    const redlock = redlockOn(locks.nodes.urls, { retryDelayMs: 10, retryJitterMs: 10 });
    const statuses = await fiveConcurrentPosts(itemsServer(db, redlock));
    expect(statuses.sort()).toEqual([201, 201, 201, 409, 409]);
    expect(await db.llen('items')).toBe(MAX_ITEMS);
  });
});
