import type { Lease, Redlock } from '@tickwarden/redlock';
import { RunLeaseValidity } from './run-lease-validity.ts';

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
