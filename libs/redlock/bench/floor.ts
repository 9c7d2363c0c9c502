/**
 * What the benchmarks' raw floor is made of (redlock-bench.ts, cost-bench.ts): the issue's
 * compare-and-delete, and the wait for a quorum of parallel node calls; and the fenced floor
 * (cost-bench.ts), the least a grant with a fencing token can do.
 */
import { createHash } from 'node:crypto';

const sha1 = (script: string): string => createHash('sha1').update(script).digest('hex');

/** The floor's release: delete the key only while it holds the caller's value. */
export const FLOOR_RELEASE =
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
export const FLOOR_RELEASE_SHA = sha1(FLOOR_RELEASE);

/**
 * The fenced floor's acquire of one resource (KEYS[1] the key base; ARGV: value, token, ttl, fence
 * retention): the lock set if free, then the token stored if above the stored one, else the lock
 * freed again. Two writes per node, where the floor's SET NX PX is one: a fence outlives the lock
 * it guards, so it is a key of its own. No claims, waiters or options: it cannot be cheaper.
 */
export const FENCED_FLOOR_ACQUIRE = `if redis.call('SET', KEYS[1] .. 'lock', ARGV[1], 'NX', 'PX', ARGV[3], 'GET') then return 0 end
local stored = redis.call('SET', KEYS[1] .. 'fence', ARGV[2], 'PX', ARGV[4], 'GET')
if not stored or #ARGV[2] > #stored or #ARGV[2] == #stored and ARGV[2] > stored then return 1 end
redis.call('SET', KEYS[1] .. 'fence', stored, 'PX', ARGV[4])
redis.call('DEL', KEYS[1] .. 'lock')
return -2`;
export const FENCED_FLOOR_ACQUIRE_SHA = sha1(FENCED_FLOOR_ACQUIRE);

/** The fenced floor's release: the lock deleted while it holds the caller's value and its token is the fence. */
export const FENCED_FLOOR_RELEASE = `local held = redis.call('MGET', KEYS[1] .. 'lock', KEYS[1] .. 'fence')
if held[1] == ARGV[1] and held[2] == ARGV[2] then return redis.call('DEL', KEYS[1] .. 'lock') end
return 0`;
export const FENCED_FLOOR_RELEASE_SHA = sha1(FENCED_FLOOR_RELEASE);

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
