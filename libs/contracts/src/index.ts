export {
  backfillJobId,
  InvalidTickJobError,
  jobClaim,
  LATE_TICK_WINDOW_MS,
  leaseResource,
  manualClaim,
  manualJobId,
  OVERLAPS,
  parseTickJob,
  queueName,
  tickClaim,
  tickFence,
  tickJobId,
  type Overlap,
  type TickJobData,
  type TickLease,
} from './tick-job.ts';
export { NOT_RUN_OUTCOMES, RUN_OUTCOMES, type RunOutcome } from './run-outcome.ts';
