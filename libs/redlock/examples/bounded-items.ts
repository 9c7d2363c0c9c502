// The README's example: an endpoint that may create at most 3 items. Read-check-write
// is a race when 5 requests arrive together; the lease makes it one-at-a-time.
import http from 'node:http';
import type { Redis } from 'ioredis';
import type { Redlock } from '../src/index.ts'; // '@tickwarden/redlock' outside this project

export const MAX_ITEMS = 3;

/** POST /items creates an item unless MAX_ITEMS exist (201, or 409 when full). */
export function itemsServer(db: Redis, redlock?: Redlock): http.Server {
  const createItem = async (): Promise<boolean> => {
    const count = await db.llen('items');
    if (count >= MAX_ITEMS) return false;
    await new Promise((resolve) => setTimeout(resolve, 20)); // validation, pricing, ... anything slow
    await db.rpush('items', `item-${count + 1}`);
    return true;
  };
  return http.createServer((request, response) => {
    const guarded = redlock
      ? redlock.using('items', 5000, async (signal) => {
          const created = await createItem();
          signal.throwIfAborted(); // the lease was lost: the write above may race; report failure
          return created;
        })
      : createItem();
    guarded.then(
      (created) => response.writeHead(created ? 201 : 409).end(),
      () => response.writeHead(503).end(),
    );
    void request;
  });
}
