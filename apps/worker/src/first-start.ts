import { tickClaim, tickFence, type TickJobData } from '@tickwarden/contracts';
import {
  AcquireAbortedError,
  LockTakenError,
  QuorumUnavailableError,
  type AcquireOptions,
  type Lease,
  type Redlock,
} from '@tickwarden/redlock';

/** A first start retries a lock quorum that does not answer for this long, then the job is deferred, ms. */
export const QUORUM_WAIT_MS = 1000;
/** Pause between start tries: this plus up to this again (jitter), ms. */
export const START_RETRY_MS = 100;
/**
 * A `skip` run due while the tick before it is claimed and not started waits this long past its
 * due time at most, ms: that tick's job, due first, normally starts within milliseconds; one that
 * cannot (its job unreachable during a fault) is passed, and ends `superseded` when it comes.
 */
export const BEHIND_WAIT_MS = 2000;
/**
 * How long a start retries while its refusal is only for now (see heldByRun: not due yet by the
 * lock nodes' clocks, behind the tick before, a lease lingering on a few nodes), ms; then the job
 * is deferred (no attempt used) and tried again.
 */
export const NOT_YET_WINDOW_MS = BEHIND_WAIT_MS + 1000;
/** Pause between tries of a start refused only for now, ms. */
const NOT_YET_RETRY_MS = 50;

/** The longest per-node timeout of a start's lease calls, ms (`/readyz` probes the lock nodes with it). */
export const MAX_LEASE_NODE_TIMEOUT_MS = 1000;

/** Per-node timeout of the lease calls of a start: a tenth of the TTL, within [100, MAX_LEASE_NODE_TIMEOUT_MS] ms. */
export function leaseNodeTimeoutMs(ttlMs: number): number {
  return Math.min(MAX_LEASE_NODE_TIMEOUT_MS, Math.max(100, Math.round(ttlMs / 10)));
}

/** Resolves after `ms`, or at once when `signal` aborts (it never rejects). */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** The start id of a job's first start: the publication it carries (see TickJobData's `lease`). */
export function firstStartId(data: Pick<TickJobData, 'lease'>): string {
  return String(data.lease.fence);
}

/** The schedule's ticks around a job's tick (`ticksAround`); none for a manual trigger, its own tick. */
export type TicksAround = { previous: number | undefined; next: number | undefined };

/**
 * The fencing tokens a run of the job may take, never from a clock: from its tick's time in
 * microseconds (`tickFence`), above any token a node holds (a later attempt's is above its first
 * one's), and below the next tick's where a schedule's runs share one lease, so that once a later
 * tick's run was granted an earlier tick's no longer is (`superseded`). A manual trigger is its
 * own tick (no next); a backfilled tick's run comes after every run so far, whatever its tick
 * (no limit: its first proposal is below the stored token, and the nodes' answer raises it).
 */
export function runFences(
  data: Pick<TickJobData, 'tickMs' | 'overlap' | 'backfill'>,
  ticks: TicksAround,
): NonNullable<AcquireOptions['fence']> {
  const below = data.overlap !== 'allow' && !data.backfill && ticks.next !== undefined ? ticks.next : undefined;
  return { from: tickFence(data.tickMs), below: below === undefined ? undefined : tickFence(below) };
}

/**
 * Where a first start puts its run among its schedule's runs (the lock nodes decide, by their
 * clocks and fences): its tokens from `runFences`; not before its due time; `cancel-previous`
 * revokes the run it finds; `skip` waits, up to BEHIND_WAIT_MS past its due time, while the tick
 * before it is claimed and not started (the older tick runs first) - unless that tick is past its
 * start deadline. A backfilled tick's run is due now, and waits for no tick.
 */
export function startOrder(
  data: Pick<TickJobData, 'tickMs' | 'dueMs' | 'overlap' | 'startDeadlineMs' | 'backfill'>,
  ticks: TicksAround,
  nowMs: number,
): Pick<AcquireOptions, 'fence' | 'after' | 'notBeforeMs' | 'revoke'> {
  const fence = runFences(data, ticks);
  if (data.backfill) return { fence };
  const { previous } = ticks;
  const waitsFor =
    data.overlap === 'skip' &&
    previous !== undefined &&
    (data.startDeadlineMs === null || previous + data.startDeadlineMs > nowMs)
      ? previous
      : undefined;
  return {
    fence,
    notBeforeMs: data.dueMs,
    revoke: data.overlap === 'cancel-previous',
    after:
      waitsFor === undefined
        ? undefined
        : { claim: tickClaim(waitsFor), untilMs: data.dueMs + BEHIND_WAIT_MS, fence: tickFence(waitsFor) },
  };
}

/**
 * Whether a refused start found a run holding the lease: taken on more nodes than a quorum can
 * spare. Anything less is only for now: the nodes' clocks say the run is not due yet (`early`), it
 * waits behind the tick before (`behind`), or a lease lingers on a few nodes (a release that has
 * not reached them yet).
 */
export function heldByRun(error: LockTakenError, lockNodes: Pick<Redlock, 'nodes' | 'quorum'>): boolean {
  return error.takenOn.length > lockNodes.nodes.length - lockNodes.quorum;
}

export interface FirstStartOptions {
  /** The claim the job was published under (`jobClaim`): its start is recorded there. */
  claim: string;
  /** Where the run goes among its schedule's (see startOrder). */
  order: Pick<AcquireOptions, 'fence' | 'after' | 'notBeforeMs' | 'revoke'>;
  /** Aborts waiting between tries (the worker stops): the start ends with AcquireAbortedError. */
  signal: AbortSignal;
  /** Told of each try that found no quorum, at once (with the per-node timeout it used): a worker cut from the lock nodes learns it on the first try. */
  onQuorumUnavailable?: (error: QuorumUnavailableError, nodeTimeoutMs: number) => void;
  /**
   * How long to keep trying while another value holds the lease, ms (default 0: LockTakenError at
   * once). A backfilled tick's job waits: a frequent schedule's lease is free only for moments
   * between its runs.
   */
  waitForLockMs?: number;
}

/**
 * A tick's first start: the claim's value takes the schedule's lease and starts the claim, named
 * by the publication the job carries, in one call (the start every run makes: the worker's
 * JobRunner, and the scheduler benchmark's consumer). A second job of the tick (published again
 * after the queue Redis lost its data) can start only if no job of it started before
 * (ClaimStartedError otherwise, final). No lease is held while the job waits, so the lease it
 * finds is a run's: LockTakenError (final; a `skip` tick overlapped), or FencePassedError when a
 * later tick's run started first. Tries again (100-200 ms apart) while no quorum answers, for
 * QUORUM_WAIT_MS, and (50 ms apart) while the nodes answer `early` or `behind`, for
 * NOT_YET_WINDOW_MS; then the last error is thrown and the job is deferred.
 */
export async function firstStart(
  redlock: Pick<Redlock, 'acquire' | 'nodes' | 'quorum'>,
  data: Pick<TickJobData, 'lease'>,
  options: FirstStartOptions,
): Promise<Lease> {
  const { resource, value, ttlMs } = data.lease;
  const started = performance.now();
  const nodeTimeoutMs = leaseNodeTimeoutMs(ttlMs);
  const { signal } = options;
  const retryCount = Math.ceil((options.waitForLockMs ?? 0) / (1.5 * START_RETRY_MS));
  for (;;) {
    if (signal.aborted) throw new AcquireAbortedError(resource, signal.reason);
    let waitMs: number;
    try {
      return await redlock.acquire(resource, ttlMs, {
        ...options.order,
        value,
        claim: options.claim,
        start: firstStartId(data),
        retryCount,
        retryDelayMs: START_RETRY_MS,
        retryJitterMs: START_RETRY_MS,
        nodeTimeoutMs,
        signal,
      });
    } catch (error) {
      const elapsed = performance.now() - started;
      if (error instanceof LockTakenError && !heldByRun(error, redlock)) {
        if (elapsed + NOT_YET_RETRY_MS >= NOT_YET_WINDOW_MS) throw error;
        waitMs = NOT_YET_RETRY_MS;
      } else if (error instanceof QuorumUnavailableError) {
        options.onQuorumUnavailable?.(error, nodeTimeoutMs);
        waitMs = START_RETRY_MS + Math.random() * START_RETRY_MS;
        if (elapsed + waitMs >= QUORUM_WAIT_MS) throw error;
      } else throw error;
    }
    await pause(waitMs, signal);
  }
}
