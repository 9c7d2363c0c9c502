/**
 * A tick's outcome for the cluster: recorded once in the schedule's tick history (the first
 * replica to record it wins, except that a run enqueued or recovered replaces a skip or a miss
 * recorded before it), logged once at info (missed: warn) and counted in `tickwarden_ticks_total`.
 * Whether an enqueued tick's run overlaps another is its worker's to decide when it starts (the
 * run's outcome: `skipped-overlap`, `superseded`).
 */
export const TICK_OUTCOMES = ['enqueued', 'recovered', 'skipped-paused', 'missed'] as const;
export type TickOutcome = (typeof TICK_OUTCOMES)[number];

/** Why a tick was missed (the `reason` of a `missed` outcome). */
export const MISS_REASONS = [
  /** No replica ran when the tick was due (found by the start-up gap check). */
  'no-replica',
  /** Every try to claim the tick found no lock quorum, until its start deadline. */
  'no-lock-quorum',
  /** The queue Redis did not answer until its start deadline: its job could not be added, or recovery could not look at it. */
  'queue-unavailable',
  /** Its start deadline passed before any replica could act on it (the replicas were stalled or down). */
  'deadline-passed',
  /** Its schedule left the configuration before it was decided. */
  'schedule-removed',
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
] as const;
export type TickObservation = (typeof TICK_OBSERVATIONS)[number];

/** Outcomes that mean a job holds the tick: they replace any other record of the same tick. */
export function publishes(outcome: TickOutcome): boolean {
  return outcome === 'enqueued' || outcome === 'recovered';
}
