export {
  InvalidTickJobError,
  leaseResource,
  manualClaim,
  manualJobId,
  parseTickJob,
  queueName,
  tickClaim,
  tickJobId,
  type Overlap,
  type TickJobData,
  type TickLease,
} from './tick-job.ts';
