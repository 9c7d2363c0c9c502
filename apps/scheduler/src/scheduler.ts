import { leaseResource, tickClaim, tickJobId } from '@tickwarden/contracts';
import { ClaimAlreadyGrantedError, LockTakenError, QuorumUnavailableError, RedlockError, systemClock, type BatchResult, type Clock, type Lease, type Redlock } from '@tickwarden/redlock';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ControlState, type TickRecord } from './control.ts';
import type { Schedule } from './schedule.ts';
import { TickEnqueuer } from './tick-enqueuer.ts';
import { TickHeap, type PendingTick } from './tick-heap.ts';
import { TickMarks, type MarkGap } from './tick-marks.ts';
import { CronCache, TickPlanner } from './tick-planner.ts';

/** What happened to one tick on this replica. One name per outcome, in logs and metrics alike. */
export type TickOutcome =
  | 'enqueued'
  | 'recovered'
  | 'lost-race'
  | 'skipped-overlap'
  | 'skipped-paused'
  | 'missed'
  | 'lock-unavailable'
  | 'enqueue-failed';

/** Ticks at most this late (event-loop stalls, GC pauses, a slow contest) are still contested. Later ones follow `catchUp`. */
export const LATE_TICK_WINDOW_MS = 10_000;

/** Missed ticks of one schedule counted (metric) after a gap with no replica; a longer gap is logged as at least this many. */
const MAX_COUNTED_GAP_TICKS = 10_000;

export interface SchedulerOptions {
  replicaId: string;
  redlock: Redlock;
  /** The queue Redis (BullMQ). */
  queueConnection: Redis;
  logger: Logger;
  /** Monotonic and wall time, timers (default the process clock); tests skew it. */
  clock?: Clock;
  /** Longest single timer wait, ms (default 30 000): waits are recomputed, so a wall-clock jump is noticed within it. */
  maxWaitMs?: number;
  /**
   * How long before its run is due a tick is contested and its job enqueued (a BullMQ delayed job
   * that becomes waiting at the due time), ms (default 9 500; per schedule at most a third of its
   * lease TTL; 0 = contest at the due time). The contest and the enqueue take time (about 0.4 s for
   * 1,000 ticks, 3-6 s for 10,000 on the benchmark machine); done ahead, the job is waiting when
   * its run is due. `skip` and `cancel-previous` ticks whose previous run is due within the lead
   * are contested at the due time instead (the previous run would still hold the lease), and one
   * whose contest ahead finds the lease taken (or no quorum) is contested again at the due time.
   */
  contestLeadMs?: number;
  /**
   * How long after `start` the replica looks for ticks missed while no replica
   * ran, ms (default 15 000: the late window plus 5 s). Live replicas take up
   * a tick up to `LATE_TICK_WINDOW_MS` late; their marks must be in by then,
   * or ticks they take up would count as missed.
   */
  gapCheckDelayMs?: number;
  /** Told about every tick outcome (metrics). */
  onOutcome?: (outcome: TickOutcome, schedule: Schedule, tickMs: number, lagMs: number) => void;
}

/**
 * A replica that lost a tick's claim checks, this long after the tick (at least;
 * half the lease TTL plus a second when that is longer: the winner's own enqueue
 * retries that long), that the winner's job exists; if not (the winner died
 * between claim and enqueue), it enqueues the job itself under a fresh lease.
 * Job ids make the add idempotent.
 */
export const ORPHAN_CHECK_DELAY_MS = 2000;

/** A lost tick whose job must show up. */
interface OrphanCheck {
  schedule: Schedule;
  tick: PendingTick;
  jobId: string;
  checkAtMs: number;
  giveUpAtMs: number;
}

/** A tick for the history `status` shows. */
interface HistoryEntry {
  scheduleId: string;
  tick: TickRecord;
}

/**
 * Default of `SchedulerOptions.contestLeadMs`, ms: longer than contesting and enqueueing 10,000
 * ticks due at one instant took on the benchmark machine (3-6 s), and half a second off whole
 * seconds: most ticks fall on whole seconds (or minutes), so their contests (CPU on every replica,
 * scripts on every lock node, adds on the queue Redis) run between the moments earlier ticks'
 * jobs start. With a whole 5 s, 1,000 per-second ticks started at p50 / p99 about 420 /
 * 700-830 ms after their tick in the benchmark; with 4.5 s, 144 / 476 ms (`BENCHMARK.md`).
 */
export const DEFAULT_CONTEST_LEAD_MS = 9500;

/** Contest settings for ticks: quick retries for split votes among replicas; no waiter marks (all contenders fire once). */
const CONTEST = Object.freeze({ retryCount: 4, retryDelayMs: 15, retryJitterMs: 30, yieldToWaiters: false });

/**
 * Per-node timeout of a tick contest: a tenth of the lease TTL (100 ms to 2 s),
 * plus time for big batches, which a node runs one script after the other.
 * A generous timeout costs little: the contest settles as soon as a quorum
 * answered, so only a hung node is waited for; a too-short one turns a loaded
 * node into a missed tick (`lock-unavailable`) and a retry that loads it more.
 */
export function contestNodeTimeoutMs(leaseTtlMs: number, batchSize: number): number {
  return Math.min(Math.max(leaseTtlMs / 10, 100), 2000) + Math.ceil(batchSize / 20);
}

/**
 * One scheduler replica: evaluates every schedule, and for each due tick
 * contests its lease (claim-once on the tick) with the other replicas; the
 * winner enqueues the tick's job into BullMQ.
 */
export class Scheduler {
  readonly #options: Required<Omit<SchedulerOptions, 'onOutcome'>> & Pick<SchedulerOptions, 'onOutcome'>;
  readonly #planners = new Map<string, TickPlanner>();
  readonly #crons = new CronCache();
  readonly #heap = new TickHeap();
  readonly #enqueuer: TickEnqueuer;
  readonly #control: ControlState;
  readonly #marks: TickMarks;
  /** Between orphan checks of one tick, ms: 1 s plus 0-499 ms fixed per replica (from its id), so recoverers do not retry in lockstep. */
  readonly #orphanRetryMs: number;
  #paused = new Map<string, unknown>();
  readonly #inFlight = new Set<Promise<void>>();
  #orphanChecks: OrphanCheck[] = [];
  #history: HistoryEntry[] = [];
  #timer: unknown;
  #running = false;
  #started = false;
  #lastWake: { wall: number; mono: number } | undefined;

  constructor(options: SchedulerOptions) {
    this.#options = { clock: systemClock, maxWaitMs: 30_000, gapCheckDelayMs: LATE_TICK_WINDOW_MS + 5000, contestLeadMs: DEFAULT_CONTEST_LEAD_MS, ...options };
    const lead = this.#options.contestLeadMs;
    if (!Number.isFinite(lead) || lead < 0) throw new RangeError(`contestLeadMs: expected a number of milliseconds >= 0, got ${lead}`);
    this.#enqueuer = new TickEnqueuer(options.queueConnection, this.#options.clock, options.replicaId);
    this.#orphanRetryMs = 1000 + ([...options.replicaId].reduce((hash, char) => (hash * 31 + char.charCodeAt(0)) >>> 0, 7) % 500);
    this.#control = new ControlState(options.queueConnection);
    this.#marks = new TickMarks(this.#control);
  }

  /** Distinct patterns (cron and time zone) parsed for the current schedules. */
  get parsedPatterns(): number {
    return this.#crons.size;
  }

  #wallNow(): number {
    return Math.floor(this.#options.clock.wallMicros() / 1000);
  }

  /** Replaces the schedules: removed ones stop firing, added or changed ones start at their next tick (or catch up). */
  setSchedules(schedules: readonly Schedule[]): void {
    const now = this.#wallNow();
    const incoming = new Map(schedules.map((schedule) => [schedule.id, schedule]));
    const removed = new Set<string>();
    for (const [id, planner] of this.#planners) {
      const next = incoming.get(id);
      if (!next || JSON.stringify(next) !== JSON.stringify(planner.schedule)) {
        this.#planners.delete(id);
        removed.add(id);
      }
    }
    this.#heap.removeSchedules(removed);
    const gone = [...removed].filter((id) => !incoming.has(id));
    if (gone.length > 0) this.#track(this.#marks.forget(gone), 'could not drop the marks of removed schedules');
    for (const schedule of schedules) {
      if (this.#planners.has(schedule.id)) continue;
      const planner = new TickPlanner(schedule, this.#crons);
      this.#planners.set(schedule.id, planner);
      const first = this.#firstTick(planner, now);
      if (first === undefined) continue;
      this.#heap.push(this.#pending(planner, first, undefined));
      this.#marks.planned(schedule.id, first);
    }
    // Patterns only removed schedules used would stay parsed forever.
    this.#crons.retainOnly(schedules);
    if (this.#running) this.#arm();
  }

  /**
   * The first tick this replica takes up: the latest one inside `catchUp`
   * (a tick missed while no replica ran fires once; claims keep it single),
   * else the first whose run is not yet due.
   */
  #firstTick(planner: TickPlanner, now: number): number | undefined {
    const { catchUpMs } = planner.schedule;
    return (catchUpMs > 0 ? planner.latestWithin(now, catchUpMs) : undefined) ?? planner.firstDue(now);
  }

  /**
   * A tick to contest: `contestLeadMs` ahead of its due time (a third of the lease TTL at most, so
   * the run starts with most of it left), except for a schedule with one lease for all its runs
   * (`skip`, `cancel-previous`) whose previous run is due within the lead, or unknown (the first
   * tick taken up): that run would still hold the lease, so the tick is contested when due.
   */
  #pending(planner: TickPlanner, tickMs: number, previousDueMs: number | undefined): PendingTick {
    const { schedule } = planner;
    const dueMs = planner.dueMs(tickMs);
    const aheadMs = dueMs - Math.min(this.#options.contestLeadMs, schedule.leaseTtlMs / 3);
    const ahead = schedule.overlap === 'allow' || (previousDueMs !== undefined && previousDueMs <= aheadMs);
    return { scheduleId: schedule.id, tickMs, dueMs, contestAtMs: ahead ? aheadMs : dueMs };
  }

  start(): void {
    this.#running = true;
    this.#started = true;
    this.#marks.start(this.#wallNow(), this.#options.gapCheckDelayMs);
    this.#arm();
  }

  /** Stops contesting new ticks and waits for contests and enqueues in flight; writes the last history and marks (and the gap check, if it has not run); closes the queues. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#options.clock.clearTimeout(this.#timer);
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    // Marks first: a gap check run as the replica stops adds to the history.
    if (this.#started) await this.#flushMarks(this.#wallNow(), true).catch((error: unknown) => this.#options.logger.warn({ err: error }, 'could not write tick marks'));
    await this.#writeHistory().catch((error: unknown) => this.#options.logger.warn({ err: error }, 'could not record tick history'));
    await this.#enqueuer.close();
  }

  #arm(): void {
    const { clock, maxWaitMs } = this.#options;
    clock.clearTimeout(this.#timer);
    if (!this.#running) return;
    let next = Math.min(this.#heap.peek()?.contestAtMs ?? Infinity, this.#marks.gapCheckAtMs ?? Infinity);
    // A loop, not Math.min(...checks): spreading more than ~125,000 pending checks overflows the stack.
    for (const check of this.#orphanChecks) next = Math.min(next, check.checkAtMs);
    const wait = Number.isFinite(next) ? Math.min(Math.max(next - this.#wallNow(), 0), maxWaitMs) : maxWaitMs;
    this.#timer = clock.setTimeout(() => this.#wake(), wait);
  }

  #wake(): void {
    const { clock, logger } = this.#options;
    const wall = this.#wallNow();
    const mono = clock.now();
    if (this.#lastWake) {
      const skew = wall - this.#lastWake.wall - (mono - this.#lastWake.mono);
      if (Math.abs(skew) > 1000) logger.warn({ jumpMs: Math.round(skew) }, 'wall clock jumped: ticks are planned on wall time, claims keep each tick single');
    }
    this.#lastWake = { wall, mono };
    const ready: PendingTick[] = [];
    for (let top = this.#heap.peek(); top && top.contestAtMs <= wall; top = this.#heap.peek()) {
      const tick = this.#heap.pop() as PendingTick;
      ready.push(tick);
      // A second contest: the tick was taken up (marked, its successor planned) at the first.
      if (tick.atDue) continue;
      this.#marks.takenUp(tick.scheduleId, tick.tickMs);
      const planner = this.#planners.get(tick.scheduleId);
      const next = planner?.next(tick.tickMs);
      if (planner && next !== undefined) this.#heap.push(this.#pending(planner, next, tick.dueMs));
    }
    if (ready.length > 0) {
      const { kept, late } = this.#splitLateTicks(ready, wall);
      this.#track(this.#contestInDueOrder(kept), 'tick contest failed');
      if (late.length > 0) this.#track(this.#recordLate(late, wall), 'could not record late ticks');
    }
    this.#track(this.#flushMarks(wall), 'could not write tick marks');
    const checks = this.#orphanChecks.filter((check) => check.checkAtMs <= wall);
    if (checks.length > 0) {
      this.#orphanChecks = this.#orphanChecks.filter((check) => check.checkAtMs > wall);
      this.#track(this.#checkOrphans(checks), 'orphan check failed');
    }
    this.#arm();
  }

  /** Writes the marks of the ticks taken up; once the gap check ran, records the ticks missed while no replica ran. */
  async #flushMarks(now: number, final = false): Promise<void> {
    const gaps = await this.#marks.flush(now, final);
    const memo = new Map<string, number[]>();
    for (const [i, gap] of gaps.entries()) {
      this.#recordGap(gap, now, memo);
      // A gap check over thousands of schedules must not hold up their ticks.
      if (i % 256 === 255) await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Records a schedule's ticks in a gap as missed: each in the metrics, all of them in one log line. */
  #recordGap({ scheduleId, afterMs, beforeMs }: MarkGap, now: number, memo: Map<string, number[]>): void {
    const planner = this.#planners.get(scheduleId);
    if (!planner) return;
    const { schedule } = planner;
    // Schedules of one pattern usually share their gap: list its ticks once (one more than counted, to know whether there are more).
    const key = `${schedule.timezone} ${schedule.cron} ${afterMs} ${beforeMs}`;
    const listed = memo.get(key) ?? planner.ticksBetween(afterMs, beforeMs, MAX_COUNTED_GAP_TICKS + 1);
    memo.set(key, listed);
    if (listed.length === 0) return;
    const truncated = listed.length > MAX_COUNTED_GAP_TICKS;
    const ticks = truncated ? listed.slice(0, MAX_COUNTED_GAP_TICKS) : listed;
    for (const tick of ticks) this.#options.onOutcome?.('missed', schedule, tick, now - tick);
    const last = truncated ? planner.previous(beforeMs) : ticks.at(-1);
    const { logger, replicaId } = this.#options;
    const lastMs = last ?? (ticks.at(-1) as number);
    this.#queueHistory({
      scheduleId: schedule.id,
      tick: { tickMs: lastMs, outcome: 'missed', lagMs: now - lastMs, fence: undefined, jobId: undefined, replica: replicaId, gap: { firstTickMs: ticks[0] as number, count: ticks.length, atLeast: truncated } },
    });
    const fields = {
      replica: replicaId,
      schedule: schedule.id,
      outcome: 'missed',
      missed: ticks.length,
      ...(truncated ? { missedAtLeast: true } : {}),
      firstTick: new Date(ticks[0] as number).toISOString(),
      lastTick: last === undefined ? undefined : new Date(last).toISOString(),
    };
    logger.warn(fields, 'ticks missed while no replica ran');
  }

  #track(work: Promise<void>, failure: string): void {
    const tracked = work.catch((error: unknown) => this.#options.logger.error({ err: error }, failure));
    this.#inFlight.add(tracked);
    void tracked.finally(() => this.#inFlight.delete(tracked));
  }

  /** Enqueues, under a fresh lease, the jobs of lost ticks that never showed up (their winner died after the claim). */
  async #checkOrphans(checks: OrphanCheck[]): Promise<void> {
    const { redlock } = this.#options;
    const missing = await this.#enqueuer.missing(checks.map(({ schedule, jobId }) => ({ queue: schedule.queue, jobId })));
    const orphans = checks.filter((_, i) => missing[i]);
    const retry: OrphanCheck[] = [];
    // One batch per lease TTL, like a contest: an orphan wave must not become thousands of single calls.
    for (const [ttlMs, group] of Map.groupBy(orphans, (check) => check.schedule.leaseTtlMs)) {
      const requests = group.map(({ schedule, tick }) => ({ resource: leaseResource(schedule.id, schedule.overlap, tick.tickMs) }));
      const results = await redlock.acquireBatch(requests, ttlMs, { ...CONTEST, nodeTimeoutMs: contestNodeTimeoutMs(ttlMs, requests.length) });
      const won = results.flatMap((result, i) => (result.ok ? [{ ...(group[i] as OrphanCheck), lease: result.lease }] : []));
      const errors = await this.#enqueuer.enqueueMany(won.map(({ schedule, tick, jobId, lease }) => ({ schedule, lease, run: { tickMs: tick.tickMs, dueMs: tick.dueMs, jobId } })));
      // The winner's add may have landed since the check (it was paused in it): adding an existing job id
      // is a no-op, so the stored job says whose run it is. If not ours, our lease must go, or the worker
      // could not take over the stored lease once it expired (it re-acquires only a free resource).
      const added = won.filter((_, i) => !errors[i]);
      const stored = await this.#enqueuer.storedLeaseValues(added.map(({ schedule, jobId }) => ({ queue: schedule.queue, jobId }))).catch(() => undefined);
      await Promise.all(
        added.map(async ({ schedule, tick, jobId, lease }, i) => {
          const ours = stored?.[i] === lease.value;
          // Unreadable: released too - the worker re-acquires a free resource, whoever's job it is.
          if (!ours) await redlock.release(lease);
          if (ours || !stored) this.#record('recovered', schedule, tick.tickMs, this.#wallNow() - tick.tickMs, undefined, { jobId, fence: lease.fence });
          else this.#record('lost-race', schedule, tick.tickMs, this.#wallNow() - tick.tickMs, undefined, { jobId });
        }),
      );
      for (const [i, entry] of won.entries()) if (errors[i]) retry.push({ ...entry, checkAtMs: this.#wallNow() + this.#orphanRetryMs });
      results.forEach((result, i) => {
        if (result.ok) return;
        const check = group[i] as OrphanCheck;
        // The dead winner's lease may still block: try again until it must have expired.
        if (this.#wallNow() < check.giveUpAtMs) retry.push({ ...check, checkAtMs: this.#wallNow() + this.#orphanRetryMs });
        // Still taken after that - on a majority, or on the nodes that answered while others are
        // down (that lease may be valid, as #lostOutcome reads it) - a later run holds the schedule
        // (overlap skip). Otherwise no quorum could be had: missed.
        else this.#record(this.#lostOutcome(result.error) === 'skipped-overlap' ? 'skipped-overlap' : 'missed', check.schedule, check.tick.tickMs, this.#wallNow() - check.tick.tickMs, result.error, { jobId: check.jobId });
      });
    }
    for (const check of retry) this.#orphanChecks.push(check);
    if (this.#running) this.#arm();
  }

  /** Keeps ticks within the late window and, of older ones, at most the latest inside `catchUp` per schedule; the rest are too late to contest. */
  #splitLateTicks(due: PendingTick[], now: number): { kept: PendingTick[]; late: { schedule: Schedule; tick: PendingTick }[] } {
    const kept: PendingTick[] = [];
    const stale = new Map<string, PendingTick[]>();
    for (const tick of due) {
      if (now - tick.dueMs <= LATE_TICK_WINDOW_MS) kept.push(tick);
      else {
        const ticks = stale.get(tick.scheduleId);
        if (ticks) ticks.push(tick);
        else stale.set(tick.scheduleId, [tick]);
      }
    }
    const fresh = new Set(kept.map((tick) => tick.scheduleId));
    const late: { schedule: Schedule; tick: PendingTick }[] = [];
    for (const [scheduleId, ticks] of stale) {
      const schedule = this.#planners.get(scheduleId)?.schedule;
      if (!schedule) continue;
      const hasFresh = fresh.has(scheduleId);
      const latest = ticks.at(-1) as PendingTick;
      const catchUp = !hasFresh && now - latest.tickMs <= schedule.catchUpMs ? latest : undefined;
      if (catchUp) kept.push(catchUp);
      for (const tick of ticks) if (tick !== catchUp) late.push({ schedule, tick });
    }
    return { kept, late };
  }

  /**
   * Records ticks too late to contest (this replica stalled, or every replica was down). A tick
   * whose job is in its queue was enqueued by another replica meanwhile: `lost-race`, not a miss
   * (jobs are kept at least 60 s after they complete, so a stall up to about that long is told
   * apart). The rest are `missed`, also when the queue cannot be asked.
   */
  async #recordLate(late: { schedule: Schedule; tick: PendingTick }[], now: number): Promise<void> {
    const missing = await this.#enqueuer.missing(late.map(({ schedule, tick }) => ({ queue: schedule.queue, jobId: tickJobId(schedule.id, tick.tickMs) }))).catch(() => undefined);
    late.forEach(({ schedule, tick }, i) => this.#record(missing?.[i] === false ? 'lost-race' : 'missed', schedule, tick.tickMs, now - tick.tickMs));
  }

  /**
   * Contests ticks one due second after the other, the soonest first. A wake usually finds the
   * ticks of one due second (one contest, as before); a replica that starts finds its whole
   * contest lead at once (9.5 s of ticks by default), and the ticks due first must not wait for
   * the contest and enqueue of all the later ones.
   */
  async #contestInDueOrder(ticks: PendingTick[]): Promise<void> {
    const bySecond = Map.groupBy(ticks, (tick) => Math.floor(tick.dueMs / 1000));
    for (const second of [...bySecond.keys()].sort((a, b) => a - b)) await this.#contest(bySecond.get(second) ?? []);
  }

  async #contest(due: PendingTick[]): Promise<void> {
    const { redlock, logger } = this.#options;
    // Paused schedules (tickwarden pause) live in the queue Redis; if it does not answer, the last known set holds.
    this.#paused = await this.#control.paused().catch((error: unknown) => {
      logger.warn({ err: error }, 'could not read paused schedules: using the last known set');
      return this.#paused;
    });
    const contested: { tick: PendingTick; schedule: Schedule }[] = [];
    for (const tick of due) {
      const schedule = this.#planners.get(tick.scheduleId)?.schedule;
      if (!schedule) continue;
      if (schedule.paused || this.#paused.has(schedule.id)) this.#record('skipped-paused', schedule, tick.tickMs, this.#wallNow() - tick.tickMs);
      else contested.push({ tick, schedule });
    }
    // One batch call per lock node for all ticks due now (one per distinct lease TTL).
    const byTtl = Map.groupBy(contested, (entry) => entry.schedule.leaseTtlMs);
    await Promise.all(
      [...byTtl].map(async ([ttlMs, entries]) => {
        const requests = entries.map(({ tick, schedule }) => ({ resource: leaseResource(schedule.id, schedule.overlap, tick.tickMs), claim: tickClaim(tick.tickMs) }));
        const results = await redlock.acquireBatch(requests, ttlMs, { ...CONTEST, nodeTimeoutMs: contestNodeTimeoutMs(ttlMs, requests.length) });
        await this.#settleContest(entries, results);
      }),
    );
    if (this.#running) this.#arm();
  }

  /** Enqueues the won ticks of a contest and records (or contests again when due, or recovers later) the others. */
  async #settleContest(entries: { tick: PendingTick; schedule: Schedule }[], results: BatchResult<Lease>[]): Promise<void> {
    const won = results.flatMap((result, i) => (result.ok ? [{ ...(entries[i] as (typeof entries)[number]), lease: result.lease }] : []));
    await Promise.all([
      this.#enqueueWon(won),
      ...results.map((result, i) => {
        const { tick, schedule } = entries[i] as (typeof entries)[number];
        if (result.ok) return undefined;
        const outcome = this.#lostOutcome(result.error);
        // Contested ahead: the previous run may end, or the quorum come back, before this run is due.
        if ((outcome === 'skipped-overlap' || outcome === 'lock-unavailable') && !tick.atDue && tick.contestAtMs < tick.dueMs) {
          this.#heap.push({ ...tick, contestAtMs: tick.dueMs, atDue: true });
          return undefined;
        }
        if (outcome === 'skipped-overlap' && schedule.overlap === 'cancel-previous') return this.#cancelPrevious(schedule, tick);
        this.#record(outcome, schedule, tick.tickMs, this.#wallNow() - tick.tickMs, result.error);
        // A live winner retries its enqueue for half the lease TTL: look only after that, so a slow winner is not doubled.
        if (outcome === 'lost-race') this.#watchForOrphan(schedule, tick, Math.max(ORPHAN_CHECK_DELAY_MS, schedule.leaseTtlMs / 2 + 1000));
        return undefined;
      }),
    ]);
  }

  /**
   * Looks for the tick's job after `delayMs` and recovers it if it is missing, retrying (each
   * replica at its own pace, so recoverers do not split the votes in lockstep) until the late
   * window has passed: a winner lost together with a minority of lock nodes must not cost the tick.
   */
  #watchForOrphan(schedule: Schedule, tick: PendingTick, delayMs: number): void {
    const checkAtMs = this.#wallNow() + delayMs;
    const giveUpAtMs = Math.max(checkAtMs + schedule.leaseTtlMs + 1000, tick.dueMs + LATE_TICK_WINDOW_MS);
    this.#orphanChecks.push({ schedule, tick, jobId: tickJobId(schedule.id, tick.tickMs), checkAtMs, giveUpAtMs });
  }

  /** Enqueues the runs of won ticks in one bulk per queue; a tick that cannot be enqueued is lost, loudly. */
  async #enqueueWon(all: { tick: PendingTick; schedule: Schedule; lease: Lease }[]): Promise<void> {
    // A winner paused past its lease's validity (GC, SIGSTOP) must not enqueue under a lapsed lease:
    // the tick goes the orphan way (another replica may already have recovered it).
    const clock = this.#options.redlock.settings.clock;
    const won = all.filter(({ schedule, tick, lease }) => {
      if (clock.now() < lease.validUntil) return true;
      this.#options.logger.warn({ replica: this.#options.replicaId, schedule: schedule.id, tick: new Date(tick.tickMs).toISOString() }, 'lease lapsed before the enqueue (this replica was paused?): recovering the tick instead');
      this.#watchForOrphan(schedule, tick, 0);
      return false;
    });
    if (won.length === 0) return;
    const runs = won.map(({ tick, schedule, lease }) => ({ schedule, lease, run: { tickMs: tick.tickMs, dueMs: tick.dueMs, jobId: tickJobId(schedule.id, tick.tickMs) } }));
    const errors = await this.#enqueuer.enqueueMany(runs);
    await Promise.all(
      runs.map(async ({ schedule, lease, run }, i) => {
        const error = errors[i];
        if (!error) {
          // Paused during the add (past the validity): another replica may have recovered the tick
          // meanwhile, and adding an existing job id is a no-op. Whose job holds the tick decides.
          if (clock.now() >= lease.validUntil && (await this.#enqueuer.storedLeaseValues([{ queue: schedule.queue, jobId: run.jobId }]))[0] !== lease.value) {
            this.#record('lost-race', schedule, run.tickMs, this.#wallNow() - run.tickMs, undefined, { jobId: run.jobId });
            return;
          }
          this.#record('enqueued', schedule, run.tickMs, this.#wallNow() - run.tickMs, undefined, { jobId: run.jobId, fence: lease.fence });
          return;
        }
        // The claim stays granted (no other replica may fire this tick, but one will recover it if its job never shows up).
        await this.#options.redlock.release(lease);
        this.#record('enqueue-failed', schedule, run.tickMs, this.#wallNow() - run.tickMs, error, { jobId: run.jobId });
      }),
    );
  }

  /**
   * overlap cancel-previous: revoke the running run's lease (its watchdog aborts
   * it at its next extension), win the tick's claim, and enqueue the new run due
   * one lease TTL later - the revoked lease can stay valid that long after its
   * last extension, and two runs never overlap.
   */
  async #cancelPrevious(schedule: Schedule, tick: PendingTick): Promise<void> {
    const { redlock, logger } = this.#options;
    const resource = leaseResource(schedule.id, schedule.overlap, tick.tickMs);
    const claim = tickClaim(tick.tickMs);
    try {
      const nodeTimeoutMs = contestNodeTimeoutMs(schedule.leaseTtlMs, 1);
      await redlock.revoke(resource, { claim, nodeTimeoutMs });
      const lease = await redlock.acquire(resource, schedule.leaseTtlMs, { ...CONTEST, claim, nodeTimeoutMs });
      logger.info({ replica: this.#options.replicaId, schedule: schedule.id, tick: new Date(tick.tickMs).toISOString() }, 'previous run revoked (cancel-previous)');
      const dueMs = Math.max(tick.dueMs, this.#wallNow() + schedule.leaseTtlMs);
      await this.#enqueue(schedule, { ...tick, dueMs }, lease);
    } catch (error) {
      const outcome = error instanceof RedlockError ? this.#lostOutcome(error) : 'lock-unavailable';
      this.#record(outcome, schedule, tick.tickMs, this.#wallNow() - tick.tickMs, error as Error);
    }
  }

  #lostOutcome(error: RedlockError): TickOutcome {
    if (error instanceof ClaimAlreadyGrantedError) return 'lost-race';
    if (!(error instanceof LockTakenError || error instanceof QuorumUnavailableError)) return 'lock-unavailable';
    const causes = [...error.nodeCauses.values()];
    // Claims are checked first on every node, so "taken" without "claimed" is a previous run's lease.
    if (causes.includes('claimed')) return 'lost-race';
    // Nodes answering "taken" hold a previous run's lease. With others unreachable it cannot be
    // confirmed on a majority, but it may be valid: the tick is skipped, as `skip` requires.
    if (causes.includes('taken')) return 'skipped-overlap';
    return 'lock-unavailable';
  }

  async #enqueue(schedule: Schedule, tick: PendingTick, lease: Lease): Promise<void> {
    const jobId = tickJobId(schedule.id, tick.tickMs);
    try {
      await this.#enqueuer.enqueue(schedule, { tickMs: tick.tickMs, dueMs: tick.dueMs, jobId }, lease);
    } catch (error) {
      // The claim stays granted (no other replica may fire this tick), so the tick is lost: say so loudly.
      await this.#options.redlock.release(lease);
      this.#record('enqueue-failed', schedule, tick.tickMs, this.#wallNow() - tick.tickMs, error as Error, { jobId });
      return;
    }
    this.#record('enqueued', schedule, tick.tickMs, this.#wallNow() - tick.tickMs, undefined, { jobId, fence: lease.fence });
  }

  /** Tick history is written once per turn of the event loop, in one pipeline: a boundary of 10,000 ticks is one write, not 10,000. */
  #queueHistory(entry: HistoryEntry): void {
    if (this.#history.length === 0) setImmediate(() => this.#track(this.#writeHistory(), 'could not record tick history'));
    this.#history.push(entry);
  }

  async #writeHistory(): Promise<void> {
    const entries = this.#history;
    this.#history = [];
    await this.#control.record(entries);
  }

  #record(outcome: TickOutcome, schedule: Schedule, tickMs: number, lagMs: number, error?: Error, extra: { jobId?: string; fence?: number } = {}): void {
    const { logger, replicaId, onOutcome } = this.#options;
    onOutcome?.(outcome, schedule, tickMs, lagMs);
    // The history `status` shows: outcomes that only the tick's winner can report, so each tick appears once.
    if (outcome === 'enqueued' || outcome === 'recovered' || outcome === 'enqueue-failed') {
      this.#queueHistory({ scheduleId: schedule.id, tick: { tickMs, outcome, lagMs, fence: extra.fence, jobId: extra.jobId, replica: replicaId } });
    }
    const level = outcome === 'enqueued' || outcome === 'recovered' ? 'info' : outcome === 'missed' || outcome === 'enqueue-failed' || outcome === 'lock-unavailable' ? 'warn' : 'debug';
    // Most ticks of a replica are lost races, logged at debug: no fields are built for a level that is off.
    if (!logger.isLevelEnabled(level)) return;
    const fields = { replica: replicaId, schedule: schedule.id, tick: new Date(tickMs).toISOString(), outcome, lagMs, ...extra };
    logger[level](level === 'warn' ? { ...fields, err: error } : fields, `tick ${outcome}`);
  }
}
