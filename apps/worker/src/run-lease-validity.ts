import type { LeaseValidity } from './handlers/types.ts';

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
