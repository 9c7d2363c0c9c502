// What an operator does to a schedule, from the CLI (`tickwarden pause|resume|trigger|backfill`)
// or from a replica's console: one implementation on connections the caller owns, each action
// kept in the schedule's audit trail.
import { randomBytes } from 'node:crypto';
import { formatDuration, MAX_HISTORY_KEEP } from '@tickwarden/config';
import { backfillJobId, leaseResource, manualClaim, manualJobId, tickClaim } from '@tickwarden/contracts';
import { ClaimStartedError, isStartedClaim, type Claim, type Redlock } from '@tickwarden/redlock';
import { RunHistory } from '@tickwarden/runtime';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { BACKFILL_MAX_LIMIT, historyReachMs, planBackfill, type BackfillTick } from './backfill-plan.ts';
import { BullJobQueue } from './bull-job-queue.ts';
import type { ControlAction, Run } from './ports.ts';
import { RedisReplicaStore } from './replica-store.ts';
import type { Schedule } from './schedule.ts';
import { TickPlanner } from './tick-planner.ts';
import { newPublication, TickPublisher, type Published } from './tick-publisher.ts';
import { TickRecorder } from './tick-recorder.ts';
import { tickWindow, type TickWindow } from './tick-window.ts';

/** The connections and names an action runs with. */
export interface ControlContext {
  /** The queue Redis: pauses, the tick history, the audit trail, the jobs. */
  redis: Redis;
  /** The lock nodes: a trigger's or backfill's claim. */
  redlock: Redlock;
  /** Who publishes the jobs (`enqueuedBy`, the history's `replica`): `cli`, or the replica's id. */
  publisherId: string;
  /** Warnings: a history or audit write that failed after the action was done. */
  logger: Logger;
  /** Wall time, ms. */
  now: () => number;
}

/** What pause and resume need: no lock nodes. */
export type QueueContext = Pick<ControlContext, 'redis' | 'logger' | 'now'>;

/** What an operator said with an action: why, and who. */
export interface Said {
  note: string;
  by: string;
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** Adds an action to the schedule's audit trail; a failure is logged, not thrown (the action is done). */
async function audit(ctx: QueueContext, schedule: Schedule, action: Omit<ControlAction, 'atMs'>): Promise<void> {
  await new RedisReplicaStore(ctx.redis)
    .audit(schedule.id, { ...action, atMs: ctx.now() }, schedule.history)
    .catch((error: unknown) =>
      ctx.logger.warn(
        { schedule: schedule.id, action: action.action, err: error },
        `${action.action} done, but not added to the audit trail: ${messageOf(error)}`,
      ),
    );
}

export async function pauseSchedule(ctx: QueueContext, schedule: Schedule, { note, by }: Said): Promise<void> {
  await new RedisReplicaStore(ctx.redis).pause(schedule.id, { by, atMs: ctx.now(), note });
  await audit(ctx, schedule, { action: 'pause', by, note });
}

/** Resolves false when the schedule was not paused (recorded so in the audit trail). */
export async function resumeSchedule(ctx: QueueContext, schedule: Schedule, { note, by }: Said): Promise<boolean> {
  const paused = await new RedisReplicaStore(ctx.redis).resume(schedule.id);
  await audit(ctx, schedule, { action: 'resume', by, note, detail: paused ? undefined : 'was not paused' });
  return paused;
}

/** Runs the schedule now, through the path every tick takes (a claim, the publisher), under its own claim. */
export async function triggerSchedule(ctx: ControlContext, schedule: Schedule, { note, by }: Said): Promise<string> {
  const now = ctx.now();
  const tick = { schedule, tickMs: now, dueMs: now, jobId: manualJobId(schedule.id, now), ...dueNow(schedule, now) };
  const [claimed] = await ctx.redlock.claimBatch(
    [{ resource: leaseResource(schedule.id, schedule.overlap, now), claim: manualClaim(now) }],
    { claimRetentionMs: tick.retentionMs },
  );
  if (!claimed?.ok) throw claimed?.error ?? new Error('no claim');
  const [outcome] = await publishNow(ctx, [{ tick, claim: claimed.claim, publication: newPublication() }], 'triggered');
  if (outcome !== 'published')
    throw new Error(`could not enqueue the run of ${schedule.id} (${outcome}): see the queue Redis`);
  await audit(ctx, schedule, { action: 'trigger', by, note, detail: `job ${tick.jobId}` });
  return tick.jobId;
}

/** When a run published now is due next, and its window (start deadline, claim retention). */
function dueNow(schedule: Schedule, nowMs: number): TickWindow & { nextDueMs: number | undefined } {
  const planner = new TickPlanner(schedule);
  const next = planner.next(nowMs);
  const nextDueMs = next === undefined ? undefined : planner.dueMs(next);
  return { nextDueMs, ...tickWindow(schedule, nowMs, nextDueMs) };
}

/** Publishes an operator's runs through the replicas' one path (TickPublisher); per run, what became of it. */
async function publishNow(
  ctx: ControlContext,
  runs: readonly Run[],
  as: 'triggered' | 'backfilled',
): Promise<Published[]> {
  const queue = new BullJobQueue(ctx.redis, ctx.redlock.settings.clock, ctx.publisherId);
  const recorder = new TickRecorder({
    replicaId: ctx.publisherId,
    store: new RedisReplicaStore(ctx.redis),
    logger: ctx.logger,
    now: ctx.now,
  });
  try {
    const published = await new TickPublisher({
      replicaId: ctx.publisherId,
      queue,
      recorder,
      now: ctx.now,
    }).publish(runs, as);
    await recorder.flush();
    return published;
  } finally {
    await queue.close();
  }
}

/** A backfill's range (both ends included, wall ms) and bounds. */
export interface BackfillRequest {
  fromMs: number;
  toMs: number;
  /** The most ticks the range may hold: a larger one is refused. */
  max: number;
  /** Only decide and list; fire nothing. */
  dryRun: boolean;
}

/** What a backfill did with a tick: fired (its job published, under `jobId`), skipped, or failed (its job not enqueued). */
export interface BackfilledTick {
  tickMs: number;
  action: BackfillTick['action'] | 'failed';
  why: string;
  jobId?: string;
}

/** Per tick what a backfill did, and the totals. */
export interface BackfillReport {
  ticks: BackfilledTick[];
  fired: number;
  skipped: number;
  failed: number;
}

/** A backfill range that cannot be done as asked (in the future, too long, beyond the kept history): a usage error. */
export class BackfillRangeError extends Error {
  readonly exitCode = 2;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The ticks of the range, oldest first; refuses a range that is backwards, in the future or longer than `max`. */
function ticksOf(schedule: Schedule, { fromMs, toMs, max }: BackfillRequest, nowMs: number): number[] {
  if (fromMs > toMs) throw new BackfillRangeError(`the range starts (${iso(fromMs)}) after it ends (${iso(toMs)})`);
  if (toMs > nowMs)
    throw new BackfillRangeError(`the range ends in the future (${iso(toMs)}): a backfill runs ticks that are past`);
  const ticks = new TickPlanner(schedule).ticksBetween(fromMs - 1, toMs + 1, max + 1);
  if (ticks.length > max)
    throw new BackfillRangeError(
      `${iso(fromMs)} .. ${iso(toMs)} holds more than ${max} ticks of ${schedule.id}: narrow the range, or raise the maximum (--max; at most ${BACKFILL_MAX_LIMIT})`,
    );
  return ticks;
}

/**
 * Starts the tick's claim for a backfill's job, which its first start then continues (the start
 * id is the job's publication): no other job of the tick can start after this, nor can the
 * scheduler grant the claim again. A claim granted but never started (its job was lost before it
 * started) is taken over by its value, as recovery does. A started claim means a job of the tick
 * started: undefined - unless the run history says none of its starts ran (`publishedNotRun`: a
 * run skipped for an overlap, superseded, paused, or past its start deadline), whose start the
 * backfill's replaces.
 */
async function claimForBackfill(
  redlock: Redlock,
  schedule: Schedule,
  tick: BackfillTick,
  retentionMs: number,
): Promise<{ claim: Claim; publication: number } | undefined> {
  const resource = leaseResource(schedule.id, schedule.overlap, tick.tickMs);
  const claim = tickClaim(tick.tickMs);
  const publication = newPublication();
  // Resolves undefined once started, else the value holding the claim.
  const startOrHolder = (value: string, replaces?: string): Promise<string | undefined> =>
    redlock
      .startClaim({ resource, claim, value, start: String(publication), replaces }, { claimRetentionMs: retentionMs })
      .then(
        () => undefined,
        (error: unknown) => {
          if (error instanceof ClaimStartedError) return error.holder;
          throw error;
        },
      );
  const value = randomBytes(20).toString('hex');
  const holder = await startOrHolder(value);
  if (holder === undefined) return { claim: { resource, claim, value }, publication };
  const [owner = holder, started] = holder.split('|');
  if (isStartedClaim(holder) && !tick.publishedNotRun) return undefined;
  return (await startOrHolder(owner, started)) === undefined
    ? { claim: { resource, claim, value: owner }, publication }
    : undefined;
}

/**
 * Runs the ticks of a past range that did not run (planBackfill decides from the tick and run
 * histories), each once: through the tick's claim on the lock nodes, so running a backfill twice,
 * or over ticks that ran, runs nothing twice. Each fired tick's job is due now, has no start
 * deadline and waits while another run holds the schedule's lease (`skip` and `cancel-previous`
 * runs one at a time, not necessarily in tick order). Refuses (BackfillRangeError) a range in the
 * future, of more than `max` ticks, or older than the schedule's kept history, where a tick
 * without a record may have run.
 */
export async function backfillSchedule(
  ctx: ControlContext,
  schedule: Schedule,
  request: BackfillRequest,
  { note, by }: Said,
): Promise<BackfillReport> {
  const now = ctx.now();
  const ticks = ticksOf(schedule, request, now);
  const store = new RedisReplicaStore(ctx.redis);
  const records = await store.history(schedule.id, Number.MAX_SAFE_INTEGER);
  const reachMs = historyReachMs(records, schedule.history, now);
  if (ticks.length > 0 && (ticks[0] as number) < reachMs) {
    const kept = `history: { keep: ${schedule.history.keep}, maxAge: ${formatDuration(schedule.history.maxAgeMs)} }`;
    throw new BackfillRangeError(
      `the tick history of ${schedule.id} reaches back to ${iso(reachMs)} (${kept}): whether earlier ticks ran is not known; backfill from then, or keep more history`,
    );
  }
  const plan = planBackfill(ticks, records, await new RunHistory(ctx.redis).read(schedule.id, MAX_HISTORY_KEEP));
  if (request.dryRun) return report(plan);
  const fired = await fire(ctx, schedule, plan, now);
  const result = report(fired);
  await audit(ctx, schedule, {
    action: 'backfill',
    by,
    note,
    detail: `${iso(request.fromMs)} .. ${iso(request.toMs)}: ${result.fired} fired, ${result.skipped} skipped${result.failed > 0 ? `, ${result.failed} failed` : ''}`,
  });
  return result;
}

function report(ticks: BackfilledTick[]): BackfillReport {
  const count = (action: BackfilledTick['action']) => ticks.filter((tick) => tick.action === action).length;
  return { ticks, fired: count('fire'), skipped: count('skip'), failed: count('failed') };
}

/** Claims each tick the plan fires, then publishes their jobs; a tick whose claim is started is skipped. */
async function fire(
  ctx: ControlContext,
  schedule: Schedule,
  plan: readonly BackfillTick[],
  nowMs: number,
): Promise<BackfilledTick[]> {
  const { nextDueMs, ...window } = dueNow(schedule, nowMs);
  const ticks: BackfilledTick[] = [];
  const runs: Run[] = [];
  for (const tick of plan) {
    const claimed =
      tick.action === 'fire' ? await claimForBackfill(ctx.redlock, schedule, tick, window.retentionMs) : undefined;
    if (tick.action === 'fire' && claimed === undefined)
      ticks.push({
        tickMs: tick.tickMs,
        action: 'skip',
        why: 'a job of it started (its claim on the lock nodes says so)',
      });
    else ticks.push(tick);
    if (claimed === undefined) continue;
    runs.push({
      tick: {
        schedule,
        tickMs: tick.tickMs,
        dueMs: nowMs,
        nextDueMs,
        jobId: backfillJobId(schedule.id, tick.tickMs),
        ...window,
      },
      ...claimed,
      backfill: true,
    });
  }
  const failures = await publish(ctx, runs);
  return ticks.map((tick) => {
    if (tick.action !== 'fire') return tick;
    const failure = failures.get(tick.tickMs);
    // Its claim stays started for a job that is not there: a backfill again finds it so until the claim's retention passes.
    if (failure !== undefined)
      return {
        ...tick,
        action: 'failed',
        why: `${tick.why}; its job not enqueued (${failure}): its claim is held until ${iso(nowMs + window.retentionMs)}`,
      };
    return { ...tick, jobId: backfillJobId(schedule.id, tick.tickMs) };
  });
}

/** Publishes the runs' jobs as `backfilled`; the ticks whose job was not enqueued, with what became of it. */
async function publish(ctx: ControlContext, runs: readonly Run[]): Promise<Map<number, string>> {
  const published = runs.length === 0 ? [] : await publishNow(ctx, runs, 'backfilled');
  const failed = (outcome: Published | undefined) => outcome !== 'published' && outcome !== 'published-by-another';
  return new Map(runs.flatMap((run, i) => (failed(published[i]) ? [[run.tick.tickMs, published[i] ?? 'failed']] : [])));
}
