/** Stable codes of every failure kind; match on these (or on the class), never on messages. */
export const ErrorCode = Object.freeze({
  lockTaken: 'LOCK_TAKEN',
  quorumUnavailable: 'QUORUM_UNAVAILABLE',
  leaseExpired: 'LEASE_EXPIRED',
  leaseLost: 'LEASE_LOST',
  claimAlreadyGranted: 'CLAIM_ALREADY_GRANTED',
  claimStarted: 'CLAIM_STARTED',
  fencePassed: 'FENCE_PASSED',
  holdLimitReached: 'HOLD_LIMIT_REACHED',
  acquireAborted: 'ACQUIRE_ABORTED',
  invalidSettings: 'INVALID_SETTINGS',
} as const);
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Why one node did not vote for an operation: an error, a timeout, or its answer. */
/** `handed`: the node holds the lock for the caller by a handoff, whose fence did not make a lease on a quorum. */
/** `behind`: an earlier claim the acquire waits for (`after`) is not started there; `passed`: its fence reached the acquire's limit. */
export type NodeCause =
  Error | 'taken' | 'queued' | 'claimed' | 'stale' | 'early' | 'behind' | 'passed' | 'handed' | 'gone' | 'not-held';

/**
 * Whether a value holding a claim (ClaimHolders, ClaimAlreadyGrantedError.holder) marks it
 * started (Redlock.startClaim): start.lua writes `<lease value>|<start id>`, and lease values
 * never hold `|` (acquire refuses such a value), so no acquire can take a started claim over.
 */
export function isStartedClaim(holder: string): boolean {
  return holder.includes('|');
}

/** Base of every error the library throws or aborts with. */
export abstract class RedlockError extends Error {
  abstract readonly code: ErrorCode;
  /** Per node id (`host:port`): why it did not vote as needed. Empty when no node was involved. */
  readonly nodeCauses: ReadonlyMap<string, NodeCause>;

  constructor(message: string, nodeCauses: ReadonlyMap<string, NodeCause> = new Map(), options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.nodeCauses = nodeCauses;
  }
}

function describeCauses(causes: ReadonlyMap<string, NodeCause>): string {
  if (causes.size === 0) return '';
  const parts = [...causes].map(([node, cause]) => `${node}: ${cause instanceof Error ? cause.message : cause}`);
  return ` (${parts.join('; ')})`;
}

/**
 * The values holding a failed acquire's claim on some nodes of its last attempt, with how many
 * nodes each: none on a quorum (that is a ClaimAlreadyGrantedError). Such a split is left by
 * contenders that failed, or died, before they could release what they got; acquiring with one
 * of these values (and the claim) takes its part over, as its owner's own retry would.
 */
export type ClaimHolders = ReadonlyMap<string, number>;

/** Another holder owns the lock on enough nodes that no quorum is possible. */
export class LockTakenError extends RedlockError {
  readonly code = ErrorCode.lockTaken;
  readonly resource: string;
  /** See {@link ClaimHolders}. */
  readonly claimHolders: ClaimHolders;
  constructor(
    resource: string,
    causes: ReadonlyMap<string, NodeCause>,
    attempts: number,
    claimHolders: ClaimHolders = new Map(),
  ) {
    super(
      `lock "${resource}" is taken by another holder after ${attempts} attempt(s)${describeCauses(causes)}`,
      causes,
    );
    this.resource = resource;
    this.claimHolders = claimHolders;
  }
  /** Node ids on which another holder owns the lock (or, `queued`, others were waiting first). */
  get takenOn(): string[] {
    return [...this.nodeCauses].filter(([, cause]) => cause === 'taken' || cause === 'queued').map(([node]) => node);
  }
}

/** Too many nodes errored or timed out for a quorum. */
export class QuorumUnavailableError extends RedlockError {
  readonly code = ErrorCode.quorumUnavailable;
  readonly resource: string;
  /** See {@link ClaimHolders}; empty but for an acquire with a claim. */
  readonly claimHolders: ClaimHolders;
  constructor(
    resource: string,
    operation: string,
    causes: ReadonlyMap<string, NodeCause>,
    needed: number,
    claimHolders: ClaimHolders = new Map(),
  ) {
    super(`${operation} of "${resource}" could not reach a quorum of ${needed}${describeCauses(causes)}`, causes);
    this.resource = resource;
    this.claimHolders = claimHolders;
  }
}

/** The lease's validity ended locally before the operation could be sent. */
export class LeaseExpiredError extends RedlockError {
  readonly code = ErrorCode.leaseExpired;
  constructor(resource: string, operation: string, expiredAgoMs: number) {
    super(`cannot ${operation} "${resource}": the lease expired ${Math.round(expiredAgoMs)} ms ago`);
  }
}

/** A majority reported the lease gone or held by another value, or it could not be extended in time. */
export class LeaseLostError extends RedlockError {
  readonly code = ErrorCode.leaseLost;
  readonly resource: string;
  constructor(resource: string, reason: string, causes: ReadonlyMap<string, NodeCause>, options?: ErrorOptions) {
    super(`lease "${resource}" lost: ${reason}${describeCauses(causes)}`, causes, options);
    this.resource = resource;
  }
}

/** The acquire's claim id was already granted on a majority, even if that lease is gone since. */
export class ClaimAlreadyGrantedError extends RedlockError {
  readonly code = ErrorCode.claimAlreadyGranted;
  readonly resource: string;
  readonly claim: string;
  /**
   * The lease value the claim is granted to: acquiring with this value (and the
   * claim) takes that lease over, as its winner's own acquire would.
   */
  readonly holder: string;
  constructor(resource: string, claim: string, holder: string, causes: ReadonlyMap<string, NodeCause>) {
    super(`claim "${claim}" on "${resource}" was already granted${describeCauses(causes)}`, causes);
    this.resource = resource;
    this.claim = claim;
    this.holder = holder;
  }
}

/**
 * Another start id, or another value, holds the claim on so many nodes that this start cannot
 * reach a quorum (see Redlock.startClaim): the claim's work was started by someone else.
 */
export class ClaimStartedError extends RedlockError {
  readonly code = ErrorCode.claimStarted;
  readonly resource: string;
  readonly claim: string;
  /** The value holding the claim on the most nodes that refused (a started one: see isStartedClaim). */
  readonly holder: string;
  constructor(resource: string, claim: string, holder: string, causes: ReadonlyMap<string, NodeCause>) {
    super(`claim "${claim}" on "${resource}" is started by another start (${holder})${describeCauses(causes)}`, causes);
    this.resource = resource;
    this.claim = claim;
    this.holder = holder;
  }
}

/**
 * The resource's fence reached the acquire's limit (`fence.below`) on so many nodes that no quorum
 * can grant below it: a holder with a later token was granted first (for the scheduler, a later
 * tick's run).
 */
export class FencePassedError extends RedlockError {
  readonly code = ErrorCode.fencePassed;
  readonly resource: string;
  /** The highest fence a node reported. */
  readonly fence: number;
  constructor(resource: string, fence: number, causes: ReadonlyMap<string, NodeCause>) {
    super(`fence of "${resource}" is at ${fence}, past the acquire's limit${describeCauses(causes)}`, causes);
    this.resource = resource;
    this.fence = fence;
  }
}

/** The watchdog stopped extending because the hold reached `maxHoldMs`. */
export class HoldLimitReachedError extends RedlockError {
  readonly code = ErrorCode.holdLimitReached;
  constructor(resource: string, maxHoldMs: number) {
    super(`lease "${resource}" reached its hold limit of ${maxHoldMs} ms`);
  }
}

/** The caller's AbortSignal cancelled an acquire. */
export class AcquireAbortedError extends RedlockError {
  readonly code = ErrorCode.acquireAborted;
  constructor(resource: string, reason: unknown) {
    super(`acquire of "${resource}" was aborted`, new Map(), { cause: reason });
  }
}

/** A setting is out of range; the message names it. */
export class InvalidSettingsError extends RedlockError {
  readonly code = ErrorCode.invalidSettings;
  readonly setting: string;
  constructor(setting: string, problem: string) {
    super(`invalid Redlock setting "${setting}": ${problem}`);
    this.setting = setting;
  }
}

/** One node did not answer within `nodeTimeoutMs` (a per-node cause, not thrown on its own). */
export class NodeTimeoutError extends Error {
  readonly code = 'NODE_TIMEOUT';
  constructor(timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = 'NodeTimeoutError';
  }
}
