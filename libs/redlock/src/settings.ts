import { systemClock, systemRandom, type Clock, type RandomSource } from './clock.ts';
import { InvalidSettingsError } from './errors.ts';

/** Settings of one call; each may be overridden per call (acquire, extend, using). */
export interface CallSettings {
  /** How long one node may take to answer one script call, ms. Keep it small next to the TTL. Default 100. */
  nodeTimeoutMs: number;
  /** Extra attempts after a failed acquire (0 = one attempt only). Default 10. */
  retryCount: number;
  /** Wait between acquire attempts, ms. Default 200. */
  retryDelayMs: number;
  /** Random extra wait added to each retry, uniform in [0, retryJitterMs), ms. Default 100. */
  retryJitterMs: number;
  /** Share of the TTL allowed for clock drift between nodes: drift = ttl * driftFactor + 2 ms. Default 0.01. */
  driftFactor: number;
  /**
   * Fairness under contention: a contender that found the lock taken queues on the nodes (its
   * place lasts `retryDelayMs + retryJitterMs + nodeTimeoutMs` past each attempt), a release
   * reserves the lock for the first in the queue, and newcomers queue behind. Default true.
   */
  yieldToWaiters: boolean;
  /**
   * A contender that has to wait subscribes to its resource's release channel (one connection per
   * node per Redlock instance, opened at the first wait) and retries as soon as a release is
   * published for it, at the latest after the retry delay. Default true.
   */
  wakeOnRelease: boolean;
  /** A lease is granted only if its validity (ttl - elapsed - drift) is above this, ms. Default 0. */
  minValidityMs: number;
  /** How long a granted claim id is remembered on the nodes, ms. Default 86 400 000 (24 h). */
  claimRetentionMs: number;
  /**
   * How long a node keeps a resource's highest fencing token after the last grant,
   * extension or revocation on it, ms (at least the lease TTL). Tokens are proposed
   * from the wall clock, so once a fence key expired the next token is still greater
   * unless a client's clock is this far behind the last grant. Bounds lock-node
   * memory when resources are one-off (e.g. one per tick). Default 86 400 000 (24 h).
   */
  fenceRetentionMs: number;
  /** Extensions set the key again on nodes that lost it (restarted empty) while the lease is valid. Default true. */
  reestablish: boolean;
  /**
   * Batch calls send at most this many resources per script call per node; larger batches are
   * split into calls sent at once, which a node runs one after the other, serving other clients
   * in between: no single call holds a node for long (a resource costs a script up to about five
   * Redis commands). Default 200.
   */
  maxBatchSize: number;
  /** Watchdog: extend every `ttl * extendRatio`. Default 1/3. */
  extendRatio: number;
  /** Watchdog: abort the routine this long before the lease's validity ends, ms. Default 200. */
  abortMarginMs: number;
  /** Watchdog: stop extending (and abort) after holding this long, ms; 0 = no cap. Default 0. */
  maxHoldMs: number;
}

/** Settings of a Redlock instance. */
export interface RedlockSettings extends CallSettings {
  /** Nodes that must agree; above half the nodes and at most all of them. Default floor(N/2) + 1. */
  quorum: number | undefined;
  /** Prefix of every key the library writes. Default `tickwarden`. */
  keyPrefix: string;
  /** Monotonic time, wall time for token proposals, and timers. Default the process clock. */
  clock: Clock;
  /** Lease values and jitter. Default `systemRandom`: `crypto.randomFillSync` (pooled) and `Math.random`. */
  random: RandomSource;
}

export const DEFAULT_SETTINGS: Readonly<RedlockSettings> = Object.freeze({
  quorum: undefined,
  keyPrefix: 'tickwarden',
  nodeTimeoutMs: 100,
  retryCount: 10,
  retryDelayMs: 200,
  retryJitterMs: 100,
  driftFactor: 0.01,
  minValidityMs: 0,
  yieldToWaiters: true,
  wakeOnRelease: true,
  claimRetentionMs: 86_400_000,
  fenceRetentionMs: 86_400_000,
  reestablish: true,
  maxBatchSize: 200,
  extendRatio: 1 / 3,
  abortMarginMs: 200,
  maxHoldMs: 0,
  clock: systemClock,
  random: systemRandom,
});

type Check = [keyof RedlockSettings, (value: never) => boolean, string];
const finiteAtLeast = (min: number) => (v: number) => Number.isFinite(v) && v >= min;
const CALL_CHECKS: Check[] = [
  ['nodeTimeoutMs', (v: number) => Number.isFinite(v) && v > 0, 'a finite number of ms above 0'],
  ['retryCount', (v: number) => Number.isInteger(v) && v >= 0, 'an integer >= 0'],
  ['retryDelayMs', finiteAtLeast(0), 'a finite number of ms >= 0'],
  ['retryJitterMs', finiteAtLeast(0), 'a finite number of ms >= 0'],
  ['driftFactor', (v: number) => Number.isFinite(v) && v >= 0 && v < 0.5, 'a number in [0, 0.5)'],
  ['minValidityMs', finiteAtLeast(0), 'a finite number of ms >= 0'],
  ['claimRetentionMs', (v: number) => Number.isInteger(v) && v > 0, 'an integer number of ms above 0'],
  ['fenceRetentionMs', (v: number) => Number.isInteger(v) && v > 0, 'an integer number of ms above 0'],
  ['reestablish', (v: unknown) => typeof v === 'boolean', 'a boolean'],
  ['yieldToWaiters', (v: unknown) => typeof v === 'boolean', 'a boolean'],
  ['wakeOnRelease', (v: unknown) => typeof v === 'boolean', 'a boolean'],
  ['maxBatchSize', (v: number) => Number.isInteger(v) && v >= 1, 'an integer >= 1'],
  ['extendRatio', (v: number) => Number.isFinite(v) && v > 0 && v < 1, 'a number in (0, 1)'],
  ['abortMarginMs', finiteAtLeast(0), 'a finite number of ms >= 0'],
  ['maxHoldMs', finiteAtLeast(0), 'a finite number of ms >= 0 (0 = no cap)'],
];

/** Validates call settings (a full set, after merging overrides); throws naming the first bad one. */
export function validateCallSettings(settings: CallSettings): void {
  for (const [name, ok, expected] of CALL_CHECKS) {
    const value = (settings as unknown as Record<string, unknown>)[name];
    if (!ok(value as never)) throw new InvalidSettingsError(name, `expected ${expected}, got ${String(value)}`);
  }
}

/** Merges `overrides` over the defaults and validates everything, for `nodeCount` nodes. */
export function resolveSettings(
  nodeCount: number,
  overrides: Partial<RedlockSettings> = {},
): Readonly<RedlockSettings> & { quorum: number } {
  const defined = Object.fromEntries(Object.entries(overrides).filter(([, value]) => value !== undefined));
  const settings = { ...DEFAULT_SETTINGS, ...defined } as RedlockSettings;
  if (nodeCount < 1) throw new InvalidSettingsError('nodes', 'at least one node is needed');
  const quorum = settings.quorum ?? Math.floor(nodeCount / 2) + 1;
  if (!Number.isInteger(quorum) || quorum <= nodeCount / 2 || quorum > nodeCount) {
    throw new InvalidSettingsError(
      'quorum',
      `expected an integer above ${nodeCount / 2} and at most ${nodeCount} for ${nodeCount} node(s), got ${String(quorum)}`,
    );
  }
  // '|' separates the parts of a queue member, which hold the inbox channel named after the prefix (keys.ts).
  if (typeof settings.keyPrefix !== 'string' || settings.keyPrefix === '' || /[{}|]/.test(settings.keyPrefix)) {
    throw new InvalidSettingsError('keyPrefix', 'expected a non-empty string without {, } or |');
  }
  validateCallSettings(settings);
  return Object.freeze({ ...settings, quorum });
}

/** Validates a TTL argument. */
export function checkTtl(ttlMs: number): void {
  if (!Number.isInteger(ttlMs) || ttlMs < 1)
    throw new InvalidSettingsError('ttlMs', `expected an integer number of ms >= 1, got ${String(ttlMs)}`);
}

/** Clock-drift allowance of a lease: ttl * driftFactor + 2 ms (the Redlock spec's formula). */
export function driftMs(ttlMs: number, driftFactor: number): number {
  return Math.floor(ttlMs * driftFactor) + 2;
}
