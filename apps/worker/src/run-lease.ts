import type { Lease, Redlock } from '@tickwarden/redlock';
import type { LeaseValidity } from './run-context.ts';

/**
 * The validity of one run's lease, on the lock library's monotonic clock: it
 * starts at the lease's `validUntil` and moves on with each extension that
 * {@link LeaseValidityTracker} routes to it.
 */
export class RunLeaseValidity implements LeaseValidity {
  readonly #now: () => number;
  readonly #listeners = new Set<() => void>();
  #validUntil: number;

  constructor(validUntil: number, now: () => number) {
    this.#validUntil = validUntil;
    this.#now = now;
  }

  msLeft(): number {
    return this.#validUntil - this.#now();
  }

  onExtended(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** An extension succeeded with `validityMs` left when its round ended (the lock library's `extended` event). */
  extended(validityMs: number): void {
    // The event is emitted synchronously right after the round's end, so now + validityMs errs late
    // by the listener delay only (microseconds): LEASE_KILL_MARGIN_MS covers it many times over.
    this.#validUntil = Math.max(this.#validUntil, this.#now() + validityMs);
    for (const listener of this.#listeners) listener();
  }
}

/**
 * Keeps each run's lease validity current: the watchdog hands its routine the
 * initial lease only, and the lock library's `extended` event names just the
 * resource. Leases are exclusive, so in this worker one run at a time holds a
 * resource; a newer run of the resource takes the routing over, and an older
 * one keeps its last validity (another run's extension never extends it).
 */
export class LeaseValidityTracker {
  readonly #runs = new Map<string, RunLeaseValidity>();
  readonly #now: () => number;

  constructor(redlock: Redlock) {
    this.#now = () => redlock.settings.clock.now();
    redlock.on('extended', ({ resource, validityMs }) => this.#runs.get(resource)?.extended(validityMs));
  }

  /** Runs `body` with the validity of `lease`, followed through its extensions until `body` settles. */
  async follow<T>(lease: Lease, body: (validity: RunLeaseValidity) => Promise<T>): Promise<T> {
    const validity = new RunLeaseValidity(lease.validUntil, this.#now);
    this.#runs.set(lease.resource, validity);
    try {
      return await body(validity);
    } finally {
      if (this.#runs.get(lease.resource) === validity) this.#runs.delete(lease.resource);
    }
  }
}
