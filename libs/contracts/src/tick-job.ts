import { z } from 'zod';

/** How a schedule treats a tick whose previous run still holds the schedule's lease. */
export const OVERLAPS = ['skip', 'allow', 'cancel-previous'] as const;
export type Overlap = (typeof OVERLAPS)[number];

/** The BullMQ queue of a schedule's `queue` setting. */
export function queueName(queue: string): string {
  return `tickwarden-${queue}`;
}

/**
 * The lease resource a tick's run holds. `allow` gives every tick its own
 * lease (runs may overlap); otherwise all runs of a schedule share one, so a
 * run in progress blocks the next tick (`skip`) or is revoked by it (`cancel-previous`).
 */
export function leaseResource(scheduleId: string, overlap: Overlap, tickMs: number): string {
  return overlap === 'allow' ? `run:${scheduleId}@${tickMs}` : `run:${scheduleId}`;
}

/**
 * Ticks at most this late when a replica pops them (event-loop stalls, GC pauses, a slow contest)
 * are contested as usual; later ones (the replica was stalled) are left to recovery, which first
 * asks whether the tick was decided meanwhile. A lock node that lost its data must stay down longer
 * than the longest lease TTL plus this (the manifests' delayed restart, the chaos suite's).
 */
export const LATE_TICK_WINDOW_MS = 10_000;

/** The claim id a tick is contested with: granted once, so a tick never fires twice. */
export function tickClaim(tickMs: number): string {
  return `tick:${tickMs}`;
}

/**
 * The first fencing token of a tick's runs (its time in microseconds): a run's tokens lie between
 * its tick's and the next tick's, so they grow with the ticks whatever the clocks say, and a run
 * of an earlier tick cannot start once a later tick's has.
 */
export function tickFence(tickMs: number): number {
  return tickMs * 1000;
}

/** BullMQ job id of a tick, `<team>/<name>@<epoch ms>`: deterministic, no `:` (BullMQ's rule), never all digits. */
export function tickJobId(scheduleId: string, tickMs: number): string {
  return `${scheduleId}@${tickMs}`;
}

/** Claim id of a manual trigger (`tickwarden trigger`): its own namespace, so it never takes a cron tick's claim. */
export function manualClaim(atMs: number): string {
  return `manual:${atMs}`;
}

/** BullMQ job id of a manual trigger, `<team>/<name>@manual-<epoch ms>`. */
export function manualJobId(scheduleId: string, atMs: number): string {
  return `${scheduleId}@manual-${atMs}`;
}

/**
 * BullMQ job id of a backfilled tick (`tickwarden backfill`), `<team>/<name>@<tick ms>-backfill`:
 * its own id, beside the tick's own job and its publish marker, under the tick's claim.
 */
export function backfillJobId(scheduleId: string, tickMs: number): string {
  return `${scheduleId}@${tickMs}-backfill`;
}

/** The claim a job's run was published under: a manual trigger's, or its tick's (see manualJobId). */
export function jobClaim(jobId: string, tickMs: number): string {
  return jobId.includes('@manual-') ? manualClaim(tickMs) : tickClaim(tickMs);
}

const leaseSchema = z.strictObject({
  resource: z.string().min(1),
  value: z.string().regex(/^[0-9a-f]{40}$/),
  fence: z.number().int().positive(),
  ttlMs: z.number().int().positive(),
});

const tickJobSchema = z.strictObject({
  version: z.literal(1),
  schedule: z.string().regex(/^[a-z0-9-]+\/[a-z0-9-]+$/),
  tickMs: z.number().int().nonnegative(),
  /** When the run is due: the tick plus the schedule's deterministic jitter. */
  dueMs: z.number().int().nonnegative(),
  payload: z.unknown(),
  overlap: z.enum(OVERLAPS),
  /**
   * The lease the tick's run takes when it starts: the schedule's resource (`leaseResource`) and
   * lease TTL, and the value of the tick's claim, which a replica won on the lock nodes (no lease
   * is held while the job waits). `fence` names this publication of the tick: the start id its
   * first start records on the claim, so that a second job of the tick (published again after the
   * queue Redis lost the first) cannot start once the first did. The shape is the one jobs had
   * when the replica held the lease until the worker took it over by value, so that workers and
   * replicas of either version run each other's jobs during an upgrade.
   */
  lease: leaseSchema,
  startDeadlineMs: z.number().int().positive().nullable(),
  maxRuntimeMs: z.number().int().positive().nullable(),
  enqueuedBy: z.string().min(1),
  enqueuedAtMs: z.number().int().nonnegative(),
  /**
   * A backfilled tick's job: its lease was never taken for it (only its claim, started for this
   * job), so it waits while another run holds the lease instead of skipping, and a later tick
   * never supersedes it.
   */
  backfill: z.literal(true).optional(),
});

/** The data of the BullMQ job a scheduler enqueues for one tick of one schedule. */
export type TickJobData = z.infer<typeof tickJobSchema>;
export type TickLease = z.infer<typeof leaseSchema>;

/** The job data failed validation; `field` names the first bad field. */
export class InvalidTickJobError extends Error {
  readonly code = 'INVALID_TICK_JOB';
  readonly field: string;
  constructor(field: string, problem: string) {
    super(`invalid tick job data at "${field}": ${problem}`);
    this.name = 'InvalidTickJobError';
    this.field = field;
  }
}

/** Validates job data read from the queue (a worker must not act on a malformed job). */
export function parseTickJob(data: unknown): TickJobData {
  const result = tickJobSchema.safeParse(data);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw new InvalidTickJobError(issue?.path.join('.') || '(root)', issue?.message ?? 'invalid');
}
