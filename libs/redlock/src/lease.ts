import type { NodeCause, RedlockError } from './errors.ts';

/** A granted lease on one resource. Immutable: extending returns a new Lease. */
export interface Lease {
  readonly resource: string;
  /** 20 random bytes from `crypto`, hex: the value the nodes hold for this lease. */
  readonly value: string;
  /**
   * Fencing token: strictly greater than the token of every earlier grant on
   * this resource (see the README for the conditions). Unchanged by extensions.
   */
  readonly fence: number;
  readonly ttlMs: number;
  /** Monotonic time (`clock.now()`) at which the lease's validity ends. */
  readonly validUntil: number;
  /** The claim id the acquire carried, if any. */
  readonly claim: string | undefined;
  /**
   * A `revoke` grant that took the lock from another holder: the longest that holder's lock still
   * had on a node that granted this lease, ms from the grant. The revoked holder may act until
   * then (its watchdog stops it before its own lease lapses); absent when nothing was revoked.
   */
  readonly revokedMs?: number;
}

/** One resource to acquire in a batch. */
export interface AcquireRequest {
  resource: string;
  /** Claim id (for the scheduler: one per tick): fails with ClaimAlreadyGrantedError once granted on a majority. */
  claim?: string | undefined;
  /** Take over a lease by its value (the nodes still holding it count) instead of a fresh random one. */
  value?: string | undefined;
  /**
   * Start the claim's work by this start id in the same call (with `claim` and `value`): each node
   * first moves the claim to this start as `Redlock.startClaim` does, then takes the lock
   * over; a claim another start or value holds fails with ClaimStartedError, the lock untouched.
   */
  start?: string | undefined;
  /**
   * Propose fencing tokens from `from` (an integer) instead of the clock: a node whose fence is at
   * or above the proposal makes the acquire propose above that, never reaching `below`; a node
   * whose fence did answers `passed`, and on too many nodes the acquire fails with
   * FencePassedError. For the scheduler, a tick's slot of tokens: runs' fences follow their ticks,
   * and once a later tick's run was granted, an earlier tick's cannot be.
   */
  fence?: { from: number; below?: number | undefined } | undefined;
  /**
   * Wait for an earlier claim of the resource (for the scheduler, the tick before): a node refuses
   * (`behind`, nothing changed) while that claim is granted there but not started (a start leaves
   * its claim started only where its lease was granted), and its clock reads before `untilMs` (ms
   * since the epoch). `fence`, the first token of the earlier claim's runs: a node whose stored
   * fence is at or above it granted a run from that claim's slot or a later one, so it waits no
   * more and reads no claim (the common case: the tick before ran).
   */
  after?: { claim: string; untilMs: number; fence?: number | undefined } | undefined;
}

/** Result per resource of a batch call. */
export type BatchResult<T> =
  { resource: string; ok: true; lease: T } | { resource: string; ok: false; error: RedlockError };

/** What release needs of a lease: its resource and value, and its fence when the release is to be fence-checked. */
export type ReleaseTarget = Pick<Lease, 'resource' | 'value'> & Partial<Pick<Lease, 'fence'>>;

/**
 * Per-node outcome of a release, as known when it was decided (it never throws):
 * every node is in exactly one of the three lists.
 */
export interface ReleaseResult {
  resource: string;
  /** Node ids where the key held the lease's value and is deleted. */
  released: string[];
  /** Node ids, and why they did not release: `not-held`, or the error. */
  failed: Map<string, NodeCause>;
  /**
   * Node ids that had not answered when the release was decided (a quorum had
   * released, or no longer could). Their release still runs: it deletes the key
   * when it lands there (the TTL does otherwise), and an error it meets is
   * emitted as a `nodeError` event.
   */
  unconfirmed: string[];
}
