/** What happened to one attempt of one tick's job on a worker. One name per outcome, in logs, metrics and the run history alike. */
export const RUN_OUTCOMES = [
  'succeeded',
  'failed',
  'aborted-lease-lost',
  'aborted-timeout',
  'aborted-shutdown',
  'skipped-overlap',
  'skipped-paused',
  'missed-deadline',
  'deferred',
  'superseded',
  'finished-earlier',
  'worker-lost',
  'already-started',
] as const;
export type RunOutcome = (typeof RUN_OUTCOMES)[number];

/**
 * Outcomes that end a job without its handler running, where no other start of the tick ran
 * either (already-started says one did): the tick did not run, and a backfill may run it.
 */
export const NOT_RUN_OUTCOMES: ReadonlySet<RunOutcome> = new Set([
  'skipped-overlap',
  'skipped-paused',
  'missed-deadline',
  'superseded',
]);
