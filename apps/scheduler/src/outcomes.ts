/**
 * A tick's outcome for the cluster: recorded once in the schedule's tick history (the first
 * replica to record it wins, except that a run enqueued or recovered replaces a skip or a miss
 * recorded before it), logged once at info (missed: warn) and counted in `tickwarden_ticks_total`.
 */
export const TICK_OUTCOMES = ['enqueued', 'recovered', 'skipped-paused', 'skipped-overlap', 'missed'] as const;
export type TickOutcome = (typeof TICK_OUTCOMES)[number];

/** Why a tick was missed (the `reason` of a `missed` outcome). */
export const MISS_REASONS = [
  /** No replica ran when the tick was due (found by the start-up gap check). */
  'no-replica',
  /** Every try to take the tick's lease found no lock quorum, until its start deadline. */
  'no-lock-quorum',
  /** The queue Redis did not answer until its start deadline: its job could not be added, or recovery could not look at it. */
  'queue-unavailable',
  /** Its start deadline passed before any replica could act on it (the replicas were stalled or down). */
  'deadline-passed',
  /** Its schedule left the configuration before it was decided. */
  'schedule-removed',
  /** `cancel-previous`: every try to revoke the run before it came before its due time by the lock nodes' clocks (the trying replica's clock runs ahead). */
  'clock-ahead',
] as const;
export type MissReason = (typeof MISS_REASONS)[number];

/**
 * What one replica saw of a tick without deciding it (another replica did, or will): debug logs
 * (warn for the failures), and `tickwarden_tick_observations_total`. Such a tick stays open
 * until a replica records its outcome.
 */
export const TICK_OBSERVATIONS = [
  /** Another replica won the tick's claim. */
  'lost-race',
  /** The contest found no lock quorum: recovery retries until the start deadline. */
  'lock-unavailable',
  /** The job could not be added: recovery retries until the start deadline. */
  'enqueue-failed',
  /** The lease lapsed before the job could be added (this replica was paused): recovery takes over. */
  'lease-lapsed',
  /** `cancel-previous`: the lock nodes' clocks say the tick is not due yet, so it may not revoke the run before it: this replica's clock runs ahead. Recovery tries again. */
  'clock-ahead',
] as const;
export type TickObservation = (typeof TICK_OBSERVATIONS)[number];

/** Outcomes that mean a job holds the tick: they replace any other record of the same tick. */
export function publishes(outcome: TickOutcome): boolean {
  return outcome === 'enqueued' || outcome === 'recovered';
}
