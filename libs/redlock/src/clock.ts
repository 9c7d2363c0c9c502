/**
 * Time as the library sees it. Validity is measured on `now()` (monotonic), never
 * on the wall clock; `wallMicros()` only seeds fencing-token proposals, where a
 * wrong clock costs a round trip but never safety. Tests inject a skewed clock.
 */
export interface Clock {
  /** Monotonic milliseconds (any origin). */
  now(): number;
  /** Wall-clock microseconds since the Unix epoch. */
  wallMicros(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The process clock; timers are unref'd so a pending extension never keeps a process alive. */
export const systemClock: Clock = Object.freeze({
  now: () => performance.now(),
  wallMicros: () => Math.floor((performance.timeOrigin + performance.now()) * 1000),
  setTimeout: (callback: () => void, ms: number) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle: unknown) => clearTimeout(handle as NodeJS.Timeout),
});

/** A source of random bytes (lease values) and of jitter in [0, 1). */
export interface RandomSource {
  bytes(size: number): Buffer;
  fraction(): number;
}
