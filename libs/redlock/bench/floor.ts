/**
 * What the benchmarks' raw floor is made of (redlock-bench.ts, cost-bench.ts): the issue's
 * compare-and-delete, and the wait for a quorum of parallel node calls.
 */
import { createHash } from 'node:crypto';

/** The floor's release: delete the key only while it holds the caller's value. */
export const FLOOR_RELEASE =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
export const FLOOR_RELEASE_SHA = createHash('sha1').update(FLOOR_RELEASE).digest('hex');

/** Resolves once `quorum` of `calls` have settled, fulfilled or rejected (the rest still run). */
export function atQuorum(calls: readonly Promise<unknown>[], quorum: number): Promise<void> {
  return new Promise((resolve) => {
    let settled = 0;
    const one = (): void => {
      if (++settled === quorum) resolve();
    };
    for (const call of calls) call.then(one, one);
  });
}
