import type { TickJobData } from '@tickwarden/contracts';
import { AcquireAbortedError, QuorumUnavailableError, type Lease, type Redlock } from '@tickwarden/redlock';

/** A first start retries its takeover for the scheduler lease's remaining validity, but at least this long (and at most the TTL), ms. */
export const MIN_TAKEOVER_WINDOW_MS = 1000;
/** Pause between takeover tries: this plus up to this again (jitter), ms. */
export const TAKEOVER_RETRY_MS = 100;

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

/** The start id of a job's first start: the fence it was published with (see takeOverLease). */
export function firstStartId(data: Pick<TickJobData, 'lease'>): string {
  return String(data.lease.fence);
}

export interface TakeOverOptions {
  /** The claim the job was published under (`jobClaim`): its start is recorded there. */
  claim: string;
  /** Wall clock, ms: the scheduler lease's remaining validity is estimated from the job's enqueue time. */
  now: () => number;
  /** Aborts waiting between tries (the worker stops): the takeover ends with AcquireAbortedError. */
  signal: AbortSignal;
  /** True when the worker stopped taking jobs: tries then end once MIN_TAKEOVER_WINDOW_MS has passed (a healthy worker takes the job sooner). */
  stopRetrying?: () => boolean;
  /** Told of each try that found no quorum, at once (with the per-node timeout it used): a worker cut from the lock nodes learns it on the first try, not after the window. */
  onQuorumUnavailable?: (error: QuorumUnavailableError, nodeTimeoutMs: number) => void;
  /**
   * How long to keep trying while another value holds the lease, ms (default 0: LockTakenError at
   * once). A backfilled tick's job waits: no lease was taken for it, and a frequent schedule's
   * lease is free only for moments between its contests and runs.
   */
  waitForLockMs?: number;
}

/**
 * A tick's first start takes the scheduler's lease over by its value: the start every run
 * makes (the worker's JobRunner, and the scheduler benchmark's consumer). The same call starts
 * the tick's claim, named by the fence the job was published with (the acquire's `start`, which
 * each node applies before taking the lock): a tick published again after the queue Redis lost
 * its data (same lease value, a new fence) can start only if no job of it started before
 * (ClaimStartedError otherwise, final; the lease of the start that came first untouched). Tries again
 * (100-200 ms apart) while no quorum answers, for about the lease's remaining validity (at least
 * 1 s, at most the TTL); a worker that found itself cut from the quorum stops after 1 s, so the
 * job goes back to a healthy worker. Another value holding the lease (LockTakenError) is final. A
 * lease that lapsed meanwhile is simply acquired, free as it is.
 */
export async function takeOverLease(
  redlock: Pick<Redlock, 'acquire'>,
  data: Pick<TickJobData, 'lease' | 'enqueuedAtMs'>,
  options: TakeOverOptions,
): Promise<Lease> {
  const { resource, value, ttlMs } = data.lease;
  const windowMs = Math.min(ttlMs, Math.max(MIN_TAKEOVER_WINDOW_MS, data.enqueuedAtMs + ttlMs - options.now()));
  const started = performance.now();
  const until = started + windowMs;
  const nodeTimeoutMs = leaseNodeTimeoutMs(ttlMs);
  const { signal } = options;
  for (;;) {
    if (signal.aborted) throw new AcquireAbortedError(resource, signal.reason);
    let failure: QuorumUnavailableError;
    try {
      const retryCount = Math.ceil((options.waitForLockMs ?? 0) / (1.5 * TAKEOVER_RETRY_MS));
      return await redlock.acquire(resource, ttlMs, {
        value,
        claim: options.claim,
        start: firstStartId(data),
        retryCount,
        retryDelayMs: TAKEOVER_RETRY_MS,
        retryJitterMs: TAKEOVER_RETRY_MS,
        nodeTimeoutMs,
        signal,
      });
    } catch (error) {
      if (!(error instanceof QuorumUnavailableError)) throw error;
      failure = error;
      options.onQuorumUnavailable?.(error, nodeTimeoutMs);
    }
    const waitMs = TAKEOVER_RETRY_MS + Math.random() * TAKEOVER_RETRY_MS;
    const now = performance.now();
    if (now + waitMs >= until || (now >= started + MIN_TAKEOVER_WINDOW_MS && options.stopRetrying?.() === true))
      throw failure;
    await pause(waitMs, signal);
  }
}
