import { randomFillSync } from 'node:crypto';

/**
 * Time as the library sees it. Validity is measured on `now()` (monotonic), never
 * on the wall clock; `wallMicros()` only seeds fencing-token proposals, where a
 * wrong clock costs a round trip but never safety. Tests inject a skewed clock.
 * Apps plan on `wallMicros()` too (the scheduler's ticks): it follows the host
 * clock, steps included.
 */
export interface Clock {
  /** Monotonic milliseconds (any origin). */
  now(): number;
  /** Wall-clock microseconds since the Unix epoch. */
  wallMicros(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * The process clock; timers are unref'd so a pending extension never keeps a process alive.
 * Wall time is `Date.now()` read afresh each call (`performance.timeOrigin` is fixed at process
 * start, so a clock stepped since would never show), with the sub-millisecond part of the
 * monotonic clock as microseconds: proposals one after the other rarely tie.
 */
export const systemClock: Clock = Object.freeze({
  now: () => performance.now(),
  wallMicros: () => Date.now() * 1000 + Math.floor((performance.now() % 1) * 1000),
  setTimeout: (callback: () => void, ms: number) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle: unknown) => clearTimeout(handle as NodeJS.Timeout),
});

/** A source of random bytes (lease values) and of jitter in [0, 1). */
export interface RandomSource {
  bytes(size: number): Buffer;
  fraction(): number;
}

/** Size of one refill of the system random pool, bytes: about 200 lease values per `randomFillSync` call. */
const RANDOM_POOL_BYTES = 4096;
let randomPool = Buffer.alloc(0);
let randomPoolOffset = 0;

/**
 * The process's randomness: bytes from `crypto.randomFillSync`, drawn in 4 KiB
 * refills (one `randomBytes(20)` per acquire cost more than the rest of the
 * client's work for it); each byte is handed out once and a refill fills a new
 * buffer, so a value handed out is never overwritten. Jitter from `Math.random`.
 */
export const systemRandom: RandomSource = Object.freeze({
  bytes: (size: number) => {
    if (size > RANDOM_POOL_BYTES) return randomFillSync(Buffer.allocUnsafe(size));
    if (randomPoolOffset + size > randomPool.length) {
      randomPool = randomFillSync(Buffer.allocUnsafe(RANDOM_POOL_BYTES));
      randomPoolOffset = 0;
    }
    randomPoolOffset += size;
    return randomPool.subarray(randomPoolOffset - size, randomPoolOffset);
  },
  fraction: () => Math.random(),
});
