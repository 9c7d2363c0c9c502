export {
  InvalidTickJobError,
  leaseResource,
  manualClaim,
  manualJobId,
  parseTickJob,
  queueName,
  tickClaim,
  jobClaim,
  tickJobId,
  type Overlap,
  type TickJobData,
  type TickLease,
} from './tick-job.ts';
