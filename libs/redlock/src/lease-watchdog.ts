import {
  HoldLimitReachedError,
  InvalidSettingsError,
  LeaseExpiredError,
  LeaseLostError,
  RedlockError,
} from './errors.ts';
import type { Clock } from './clock.ts';
import type { Lease } from './lease.ts';
import { driftMs, type CallSettings } from './settings.ts';

/** What a watchdog needs of its Redlock: its clock, extensions, and where an abort is told. */
export interface WatchedLeases {
  readonly settings: { readonly clock: Clock };
  extend(lease: Lease, ttlMs: number, overrides: Partial<CallSettings>): Promise<Lease>;
  emit(event: 'aborted', detail: { resource: string; reason: RedlockError; validityLeftMs: number }): boolean;
}

/**
 * Keeps a lease alive while a routine runs, and aborts `signal` before the
 * lease can lapse:
 * - at once when a majority reports the value gone or held by another;
 * - when an extension round missed its quorum and another round (one retry
 *   pause plus one node timeout) could not finish before `validUntil - abortMarginMs`;
 * - in any case at `validUntil - abortMarginMs` (a deadline timer, so a stalled
 *   event loop or a hung round cannot carry the routine past its lease);
 * - when the hold reaches `maxHoldMs`.
 * `stop()` clears every timer and waits for an extension in flight, so nothing
 * outlives the routine and no extension lands after the release.
 */
export class LeaseWatchdog {
  readonly #redlock: WatchedLeases;
  readonly #settings: CallSettings;
  readonly #controller = new AbortController();
  readonly #timers = new Set<unknown>();
  #lease: Lease;
  #extendTimer: unknown;
  #deadlineTimer: unknown;
  #inFlight: Promise<void> | undefined;
  #stopped = false;

  constructor(redlock: WatchedLeases, lease: Lease, settings: CallSettings) {
    this.#redlock = redlock;
    this.#lease = lease;
    this.#settings = settings;
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** The latest extended lease (same value and fence, later `validUntil`). */
  get lease(): Lease {
    return this.#lease;
  }

  start(): void {
    const { maxHoldMs, extendRatio, nodeTimeoutMs, abortMarginMs } = this.#settings;
    const { ttlMs } = this.#lease;
    const drift = driftMs(ttlMs, this.#settings.driftFactor);
    // A static check (not on the time left): the first extension round must end before the abort deadline.
    if (ttlMs * extendRatio + nodeTimeoutMs >= ttlMs - drift - abortMarginMs) {
      throw new InvalidSettingsError(
        'abortMarginMs',
        `${abortMarginMs} ms leaves no time to extend a ${ttlMs} ms lease (first extension after ttl * extendRatio + nodeTimeoutMs): use a longer TTL or a smaller margin`,
      );
    }
    this.#scheduleExtension(this.#lease.ttlMs * this.#settings.extendRatio);
    this.#armDeadline();
    if (maxHoldMs > 0)
      this.#timer(() => this.#abort(new HoldLimitReachedError(this.#lease.resource, maxHoldMs)), maxHoldMs);
  }

  /** Stops extending; resolves with the latest lease once no extension is in flight. */
  async stop(): Promise<Lease> {
    this.#stopped = true;
    this.#clearTimers();
    await this.#inFlight;
    return this.#lease;
  }

  #timer(callback: () => void, ms: number): unknown {
    const { clock } = this.#redlock.settings;
    const handle = clock.setTimeout(
      () => {
        this.#timers.delete(handle);
        callback();
      },
      Math.max(0, ms),
    );
    this.#timers.add(handle);
    return handle;
  }

  #cancel(handle: unknown): void {
    if (handle === undefined || !this.#timers.delete(handle)) return;
    this.#redlock.settings.clock.clearTimeout(handle);
  }

  #clearTimers(): void {
    for (const handle of this.#timers) this.#redlock.settings.clock.clearTimeout(handle);
    this.#timers.clear();
  }

  /** Monotonic time by which the routine must have been aborted. */
  #abortAt(): number {
    return this.#lease.validUntil - this.#settings.abortMarginMs;
  }

  #armDeadline(): void {
    this.#cancel(this.#deadlineTimer);
    const { clock } = this.#redlock.settings;
    this.#deadlineTimer = this.#timer(
      () =>
        this.#abort(
          new LeaseLostError(this.#lease.resource, 'no extension reached a quorum before the abort margin', new Map()),
        ),
      this.#abortAt() - clock.now(),
    );
  }

  #scheduleExtension(ms: number): void {
    this.#cancel(this.#extendTimer);
    this.#extendTimer = this.#timer(() => {
      this.#inFlight = this.#extend().finally(() => (this.#inFlight = undefined));
    }, ms);
  }

  async #extend(): Promise<void> {
    const { clock } = this.#redlock.settings;
    const { nodeTimeoutMs } = this.#settings;
    try {
      const lease = await this.#redlock.extend(this.#lease, this.#lease.ttlMs, this.#settings);
      if (this.#stopped || this.signal.aborted) return;
      this.#lease = lease;
      this.#armDeadline();
      this.#scheduleExtension(lease.ttlMs * this.#settings.extendRatio);
    } catch (error) {
      if (this.#stopped || this.signal.aborted) return;
      if (error instanceof LeaseLostError || error instanceof LeaseExpiredError || !(error instanceof RedlockError)) {
        this.#abort(
          error instanceof RedlockError
            ? error
            : new LeaseLostError(this.#lease.resource, 'extension failed', new Map(), { cause: error }),
        );
        return;
      }
      // Quorum missed (errors or timeouts): retry only if a retry can finish inside the validity left.
      if (clock.now() + 2 * nodeTimeoutMs < this.#abortAt()) {
        this.#scheduleExtension(nodeTimeoutMs);
        return;
      }
      this.#abort(
        new LeaseLostError(
          this.#lease.resource,
          'an extension missed its quorum and no retry can finish before the lease lapses',
          error.nodeCauses,
          { cause: error },
        ),
      );
    }
  }

  #abort(reason: RedlockError): void {
    if (this.signal.aborted || this.#stopped) return;
    this.#clearTimers();
    const validityLeftMs = this.#lease.validUntil - this.#redlock.settings.clock.now();
    this.#controller.abort(reason);
    this.#redlock.emit('aborted', { resource: this.#lease.resource, reason, validityLeftMs });
  }
}
