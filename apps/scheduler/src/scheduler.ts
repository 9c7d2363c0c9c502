import { DEFAULT_CONTEST_LEAD_MS } from '@tickwarden/config';
import { systemClock, type Clock } from '@tickwarden/redlock';
import { serverRunId, yieldToLoop } from '@tickwarden/runtime';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { BullJobQueue } from './bull-job-queue.ts';
import type { ClaimGrants, JobQueue, LockQuorum, OpenTick, ProgressMarks, ReplicaStore, Run, Tick } from './ports.ts';
import { Contenders } from './contenders.ts';
import { ContestQueue } from './contest-queue.ts';
import { RedisReplicaStore } from './replica-store.ts';
import type { Schedule } from './schedule.ts';
import { contestLoss, TickContest } from './tick-contest.ts';
import { TickLoop, type Wake } from './tick-loop.ts';
import { TickMarks, type MarkGap } from './tick-marks.ts';
import { newPublication, TickPublisher } from './tick-publisher.ts';
import { TickRecorder, type ObservationListener, type OutcomeListener } from './tick-recorder.ts';
import { TickResolver } from './tick-resolver.ts';
import { LATE_TICK_WINDOW_MS, RECOVERY_DELAY_MS, tickWindow } from './tick-window.ts';

/** Missed ticks of one schedule counted (metric) after a gap with no replica; a longer gap is logged as at least this many. */
const MAX_COUNTED_GAP_TICKS = 10_000;
/** How many of a gap's last ticks are checked for another replica's outcome (see Scheduler.#gapTicks). */
const GAP_TAIL_TICKS = 100;
/** Schedules whose due ticks a starting replica looks up per turn of the event loop (cron arithmetic for each: see #findAtStart). */
const FOUND_SLICE = 256;
/** Gaps checked against the history per call. */
const GAP_SLICE = 256;

/** A schedule's ticks in a gap (see Scheduler.#gapTicks). */
interface GapTicks {
  schedule: Schedule;
  counted: number[];
  truncated: boolean;
  checked: number[];
}

/** Ticks whose opening failed are opened again this often while it fails, ms. */
const REOPEN_RETRY_MS = 1000;
/** At most this many ticks are kept for opening again, in each list (about 100 bytes each): a long queue-Redis outage under many schedules drops the oldest, loudly. */
const MAX_UNOPENED = 200_000;
/** Ticks in flight whose start deadline passed are dropped at most this often, ms. */
const PRUNE_INTERVAL_MS = 1000;
/** Contests run in batches of at most this many ticks of one due second, this many batches of a second at a time (ContestQueue). */
const CONTEST_BATCH = 1_000;
const CONTESTS_IN_FLIGHT = 4;

/** A tick taken up, until its start deadline: `untilMs` (the opened tick itself: one object per tick in flight). */
interface InFlightTick extends OpenTick {
  untilMs: number;
}

export interface SchedulerOptions {
  replicaId: string;
  /** The lock nodes (a Redlock). */
  redlock: ClaimGrants & LockQuorum & ProgressMarks;
  /** The queue Redis (BullMQ, and the state the replicas share). */
  queueConnection: Redis;
  logger: Logger;
  /** Monotonic and wall time, timers (default the process clock); tests skew and step it. */
  clock?: Clock;
  /** Longest single timer wait, ms (default 30 000): waits are recomputed, so a wall-clock jump is noticed within it. */
  maxWaitMs?: number;
  /**
   * How long before its due time a tick is contested and its job enqueued as a BullMQ delayed job,
   * ms (default DEFAULT_CONTEST_LEAD_MS; 0 = when due).
   */
  contestLeadMs?: number;
  /** How long after `start` the replica looks for ticks missed while no replica ran, ms (default the late window plus 5 s: live replicas' marks are in by then). */
  gapCheckDelayMs?: number;
  /** Told about every outcome this replica decides (metrics, tests), and whether it became the tick's record. */
  onOutcome?: OutcomeListener;
  /** Told about what this replica sees of ticks others decide. */
  onObservation?: ObservationListener;
  /** Told when the queue Redis is found to have lost its data (metrics). */
  onQueueReset?: () => void;
  /** Told the number of replicas sharing the contests after each heartbeat (metrics; 0: no view). */
  onContenders?: (contenders: number) => void;
  /** Every tick is contested by this replica, not only those it is the preferred contender of (tests of races between contenders). */
  contestAll?: boolean;
  /** Replaces the replica store (tests). */
  store?: ReplicaStore;
  /** Replaces the job queue (tests). */
  queue?: JobQueue;
}

/**
 * One scheduler replica: the tick loop hands out due ticks; the contest wins their claims (once
 * per tick) against the other replicas; the publisher enqueues the won ticks' jobs; recovery
 * decides every tick left open (a winner that died or stalled, no quorum, a replica that was
 * stalled); the recorder keeps each tick's outcome; the marks find ticks missed while no replica
 * ran. Every tick a replica takes up ends with one recorded outcome.
 */
export class Scheduler {
  readonly #options: SchedulerOptions & { clock: Clock; gapCheckDelayMs: number };
  readonly #store: ReplicaStore;
  readonly #queue: JobQueue;
  readonly #recorder: TickRecorder;
  readonly #publisher: TickPublisher;
  readonly #contests: TickContest;
  readonly #marks: TickMarks;
  readonly #loop: TickLoop;
  readonly #resolver: TickResolver;
  readonly #contenders: Contenders;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #contestQueue = new ContestQueue<Tick>({
    maxBatch: CONTEST_BATCH,
    maxInFlight: CONTESTS_IN_FLIGHT,
    run: (batch) => {
      const contested = this.#contestPreferred(batch);
      this.#track(contested, 'tick contest failed');
      return contested.catch(() => undefined);
    },
  });
  #started = false;
  /** Ticks taken up whose opening failed (the queue Redis down): no replica could recover them, so they are opened again until it works. */
  #unopened: OpenTick[] = [];
  #reopenTimer: unknown;
  /** Ticks taken up whose start deadline has not passed: opened again when the queue Redis may have lost them (see #reopenInFlight). */
  readonly #inFlightTicks: InFlightTick[] = [];
  #prunedAtMs = 0;
  /** The queue Redis's run_id, read at each (re)connection: another one is a restart or a failover. */
  #queueRunId: string | undefined;
  readonly #onQueueReady = (): void => this.#track(this.#checkQueueServer(), "could not read the queue Redis's run_id");

  constructor(options: SchedulerOptions) {
    const contestLeadMs = options.contestLeadMs ?? DEFAULT_CONTEST_LEAD_MS;
    if (!Number.isFinite(contestLeadMs) || contestLeadMs < 0)
      throw new RangeError(`contestLeadMs: expected a number of milliseconds >= 0, got ${contestLeadMs}`);
    const clock = options.clock ?? systemClock;
    this.#options = { ...options, clock, gapCheckDelayMs: options.gapCheckDelayMs ?? LATE_TICK_WINDOW_MS + 5000 };
    const { replicaId, redlock: leases, logger } = options;
    const now = () => Math.floor(clock.wallMicros() / 1000);
    this.#store = options.store ?? new RedisReplicaStore(options.queueConnection);
    this.#queue = options.queue ?? new BullJobQueue(options.queueConnection, clock, replicaId);
    this.#recorder = new TickRecorder({
      replicaId,
      store: this.#store,
      logger,
      now,
      onOutcome: options.onOutcome,
      onObservation: options.onObservation,
    });
    this.#publisher = new TickPublisher({ replicaId, queue: this.#queue, recorder: this.#recorder, now });
    const onQueueReset = (): void => {
      options.onQueueReset?.();
      this.#reopenInFlight();
    };
    this.#contests = new TickContest({ leases, store: this.#store, logger, now, onQueueReset });
    this.#marks = new TickMarks({ store: this.#store, progress: leases, logger });
    this.#loop = new TickLoop({
      clock,
      logger,
      maxWaitMs: options.maxWaitMs ?? 30_000,
      contestLeadMs,
      onWake: (wake) => this.#onWake(wake),
      alarmAtMs: () => this.#marks.gapCheckAtMs,
    });
    this.#contenders = new Contenders({
      replicaId,
      store: this.#store,
      clock,
      logger,
      canContest: () => !this.#contests.cutOff,
      onView: options.onContenders,
    });
    this.#resolver = new TickResolver({
      replicaId,
      store: this.#store,
      queue: this.#queue,
      contest: this.#contests,
      publisher: this.#publisher,
      recorder: this.#recorder,
      recovers: () => !this.#contests.cutOff || !this.#contenders.othersContest(),
      tickOf: (id, tickMs) => this.#loop.tick(id, tickMs),
      clock,
      logger,
      now,
    });
  }

  /** Distinct patterns (cron and time zone) parsed for the current schedules. */
  get parsedPatterns(): number {
    return this.#loop.parsedPatterns;
  }

  /** The next `count` ticks of a schedule configured here, after `afterMs` (its planner, already parsed); empty for another. */
  upcoming(scheduleId: string, afterMs: number, count: number): number[] {
    const planner = this.#loop.planner(scheduleId);
    const ticks: number[] = [];
    for (let tick = planner?.next(afterMs); tick !== undefined && ticks.length < count; tick = planner?.next(tick))
      ticks.push(tick);
    return ticks;
  }

  /**
   * Replaces the schedules: removed ones stop firing, added or changed ones start at their next
   * tick (or catch up). A big config is applied in slices (TickLoop.setSchedules); resolves when
   * all are planned.
   */
  setSchedules(schedules: readonly Schedule[]): Promise<void> {
    return this.#loop.setSchedules(schedules, ({ removed, planned }) => {
      if (removed.length > 0) this.#track(this.#marks.forget(removed), 'could not drop the marks of removed schedules');
      for (const { scheduleId, firstTickMs } of planned) this.#marks.planned(scheduleId, firstTickMs);
    });
  }

  start(): void {
    this.#started = true;
    this.#contenders.start();
    this.#marks.start(this.#loop.nowMs(), this.#options.gapCheckDelayMs);
    this.#loop.start();
    this.#resolver.start();
    this.#options.queueConnection.on('ready', this.#onQueueReady);
    if (this.#options.queueConnection.status === 'ready') this.#onQueueReady();
  }

  /** Stops taking up ticks and waits for contests, enqueues and recoveries in flight; writes the last marks (and the gap check, if it has not run) and records; closes the queues. */
  async stop(): Promise<void> {
    this.#options.queueConnection.off('ready', this.#onQueueReady);
    // Contesting on while the other replicas learn that this one leaves: its ticks pass to them without a gap.
    await this.#contenders.leave();
    this.#loop.stop();
    await this.#resolver.stop();
    // Ticks still waiting in the contest queue are contested too: they were taken up and opened.
    while (this.#inFlight.size > 0 || this.#contestQueue.size > 0)
      if (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
      else await yieldToLoop();
    this.#options.clock.clearTimeout(this.#reopenTimer);
    if (this.#unopened.length > 0) {
      const left = this.#unopened;
      this.#unopened = [];
      await this.#store
        .open(left)
        .catch((error: unknown) =>
          this.#options.logger.error(
            { err: error, unopened: left.length },
            'stopping with ticks taken up that could not be opened: no replica will recover them if their winner failed',
          ),
        );
    }
    // Marks first: a gap check run as the replica stops records outcomes too.
    if (this.#started) {
      await this.#flushMarks(this.#loop.nowMs(), true).catch((error: unknown) =>
        this.#options.logger.warn({ err: error }, 'could not write tick marks'),
      );
      await this.#marks.writeProgress(this.#loop.nowMs(), this.#contests.epoch, true);
    }
    await this.#recorder.flush();
    await this.#queue.close();
  }

  #onWake({ nowMs, due, late, takenUp, throughMs }: Wake): void {
    this.#marks.progressed(throughMs);
    const opened: OpenTick[] = [];
    for (const tick of takenUp) {
      this.#marks.takenUp(tick.schedule.id, tick.tickMs);
      const open = {
        scheduleId: tick.schedule.id,
        tickMs: tick.tickMs,
        jobId: tick.jobId,
        recoverAtMs: Math.max(nowMs + RECOVERY_DELAY_MS, tick.dueMs),
        untilMs: tick.dueMs + tick.startDeadlineMs,
      };
      opened.push(open);
      this.#inFlightTicks.push(open);
    }
    this.#pruneInFlight(nowMs);
    // Open until some replica records the tick's outcome: if every replica deciding it stops, recovery finds it here.
    this.#open(opened);
    this.#contestQueue.add(due);
    if (late.length > 0)
      this.#options.logger.info(
        { late: late.length, firstTick: new Date((late[0] as Tick).tickMs).toISOString() },
        'ticks too late to contest (this replica was stalled): left to recovery',
      );
    this.#track(this.#flushMarks(nowMs), 'could not write tick marks');
    const progress = this.#marks.writeProgress(nowMs, this.#contests.epoch);
    if (progress) this.#track(progress, 'could not write the progress');
  }

  /** Contests the ticks of a batch this replica is the preferred contender of (see Contenders). */
  async #contestPreferred(batch: Tick[]): Promise<void> {
    await this.#contenders.ready;
    const ticks = this.#options.contestAll ? batch : batch.filter((tick) => this.#contenders.prefers(tick));
    if (ticks.length > 0) await this.#contest(ticks);
  }

  async #contest(ticks: Tick[]): Promise<void> {
    const contest = this.#contests;
    try {
      await contest.refreshPaused();
    } catch (error) {
      // No pause read yet (the queue Redis not answering since the start): recovery decides them once it answers.
      for (const tick of ticks) {
        this.#recorder.observe('enqueue-failed', tick, { err: error, jobId: tick.jobId });
        this.#resolver.failed(tick, 'queue-unavailable');
      }
      return;
    }
    const nowMs = this.#loop.nowMs();
    const open = ticks.filter((tick) => {
      if (!contest.isPaused(tick)) return true;
      // Paused ahead of its due time: left open, for recovery to decide at its due time, so that a
      // resume before then runs it.
      if (tick.dueMs <= nowMs) this.#recorder.outcome('skipped-paused', tick);
      return false;
    });
    const won: Run[] = [];
    for (const { tick, result } of await contest.contest(open)) {
      if (result.ok) {
        won.push({ tick, claim: result.claim, publication: newPublication() });
        continue;
      }
      if (contestLoss(result.error) !== 'unavailable') {
        this.#recorder.observe('lost-race', tick);
        continue;
      }
      // Recovery tries again until the start deadline.
      this.#recorder.observe('lock-unavailable', tick, { err: result.error });
      this.#resolver.failed(tick, 'no-lock-quorum');
    }
    const published = await this.#publisher.publish(won, 'enqueued');
    won.forEach((run, i) => published[i] === 'failed' && this.#resolver.failed(run.tick, 'queue-unavailable'));
  }

  /** Writes the marks of the ticks taken up; once the gap check ran, records the ticks missed while no replica ran. */
  async #flushMarks(now: number, final = false): Promise<void> {
    const gaps = await this.#marks.flush(now, final);
    const memo = new Map<string, number[]>();
    // A gap check over thousands of schedules must not hold up their ticks: a slice at a time.
    for (let from = 0; from < gaps.length; from += GAP_SLICE) {
      const slice = gaps.slice(from, from + GAP_SLICE).flatMap((gap) => this.#gapTicks(gap, memo) ?? []);
      // Replicas that started with this one took up ticks of the gap too (their marks come only
      // after their own gap check): those have their outcome, and are not missed.
      const recorded = await this.#store
        .recorded(
          slice.flatMap(({ schedule, checked }) => checked.map((tickMs) => ({ scheduleId: schedule.id, tickMs }))),
        )
        .catch((error: unknown) => {
          // The marks are raised already: the gap is recorded whole rather than lost.
          this.#options.logger.warn({ err: error }, 'could not read the tick history: gaps recorded whole');
          return [];
        });
      let at = 0;
      for (const gap of slice) {
        const taken = new Set(gap.checked.filter(() => recorded[at++]));
        this.#recordGap(gap, taken);
      }
      await yieldToLoop();
    }
  }

  /**
   * A gap's ticks: the first MAX_COUNTED_GAP_TICKS (counted), and its last GAP_TAIL_TICKS, checked
   * against the history: the replicas that took some up started about when this one did, so
   * only the newest ticks of a gap can be theirs.
   */
  #gapTicks({ scheduleId, afterMs, beforeMs }: MarkGap, memo: Map<string, number[]>): GapTicks | undefined {
    const planner = this.#loop.planner(scheduleId);
    if (!planner) return undefined;
    const { schedule } = planner;
    // Schedules of one pattern usually share their gap: list its ticks once (one more than counted, to know whether there are more).
    const key = `${schedule.timezone} ${schedule.cron} ${afterMs} ${beforeMs}`;
    const listed = memo.get(key) ?? planner.ticksBetween(afterMs, beforeMs, MAX_COUNTED_GAP_TICKS + 1);
    memo.set(key, listed);
    if (listed.length === 0) return undefined;
    const truncated = listed.length > MAX_COUNTED_GAP_TICKS;
    if (!truncated) return { schedule, counted: listed, truncated, checked: listed.slice(-GAP_TAIL_TICKS) };
    const checked: number[] = [];
    let tick = planner.previous(beforeMs);
    while (tick !== undefined && checked.length < GAP_TAIL_TICKS) {
      checked.unshift(tick);
      tick = planner.previous(tick);
    }
    return { schedule, counted: listed.slice(0, MAX_COUNTED_GAP_TICKS), truncated, checked };
  }

  /** Records a schedule's ticks in a gap as missed (`no-replica`), those `taken` by another replica aside: one history entry and one log line per schedule, each tick counted. */
  #recordGap({ schedule, counted, truncated, checked }: GapTicks, taken: ReadonlySet<number>): void {
    const ticks = counted.filter((tickMs) => !taken.has(tickMs));
    // The gap's record is keyed by its newest tick no other replica took (a taken one is recorded already).
    const lastMs = (truncated ? checked.filter((tickMs) => !taken.has(tickMs)).at(-1) : undefined) ?? ticks.at(-1);
    if (lastMs === undefined) return;
    const now = this.#loop.nowMs();
    const { retentionMs } = tickWindow(schedule, lastMs, undefined);
    const gap = { firstTickMs: ticks[0] ?? lastMs, count: ticks.length, atLeast: truncated };
    this.#recorder.gap(
      schedule,
      {
        tickMs: lastMs,
        outcome: 'missed',
        reason: 'no-replica',
        lagMs: now - lastMs,
        jobId: undefined,
        replica: this.#options.replicaId,
        gap,
      },
      retentionMs,
      ticks,
      {
        schedule: schedule.id,
        outcome: 'missed',
        reason: 'no-replica',
        missed: ticks.length,
        ...(truncated ? { missedAtLeast: true } : {}),
        firstTick: new Date(gap.firstTickMs).toISOString(),
        lastTick: new Date(lastMs).toISOString(),
      },
    );
  }

  /** Drops the ticks in flight whose start deadline passed (at most every PRUNE_INTERVAL_MS), and the oldest beyond MAX_UNOPENED, loudly. */
  #pruneInFlight(nowMs: number): void {
    if (nowMs - this.#prunedAtMs < PRUNE_INTERVAL_MS && this.#inFlightTicks.length <= MAX_UNOPENED) return;
    this.#prunedAtMs = nowMs;
    // In place: the list holds every tick of the last start deadline, and a copy each interval is garbage to collect.
    const ticks = this.#inFlightTicks;
    let kept = 0;
    for (let i = 0; i < ticks.length; i++)
      if ((ticks[i] as InFlightTick).untilMs >= nowMs) ticks[kept++] = ticks[i] as InFlightTick;
    ticks.length = kept;
    this.#dropOldest(
      this.#inFlightTicks,
      'too many ticks in flight to keep: the oldest would not be recovered if the queue Redis lost its data now',
    );
  }

  /** Drops the oldest entries beyond MAX_UNOPENED, with an error line: bounded memory through a long outage under many schedules. */
  #dropOldest(list: unknown[], message: string): void {
    const excess = list.length - MAX_UNOPENED;
    if (excess > 0) this.#options.logger.error({ dropped: list.splice(0, excess).length }, message);
  }

  /**
   * The queue Redis lost its data, or may have (another server answers): the ticks in flight are
   * opened again and the marks written again. Recovery decides each tick once more: its job found
   * (nothing lost), its claim started on the lock nodes (it ran: never again), or its job gone
   * before any start (published again, once: the claim keeps it to one).
   */
  #reopenInFlight(): void {
    const nowMs = this.#loop.nowMs();
    this.#prunedAtMs = 0;
    this.#pruneInFlight(nowMs);
    this.#marks.restore();
    const ticks = this.#inFlightTicks.map(({ scheduleId, tickMs, jobId, recoverAtMs }) => ({
      scheduleId,
      tickMs,
      jobId,
      recoverAtMs: Math.max(nowMs + RECOVERY_DELAY_MS, recoverAtMs),
    }));
    this.#options.logger.warn({ ticks: ticks.length }, 'ticks in flight opened again: recovery checks each one');
    this.#open(ticks);
  }

  /**
   * At start: the marks as found (see TickMarks.find), and the ticks other replicas took up that
   * are due and within their start deadline, kept in flight here too. Their replicas may all
   * have stopped (a restart of every replica): if the queue Redis then loses their jobs, this
   * replica opens them again, and recovery publishes those that never started. If it lost them
   * before this read, the marks come from the replicas' progress, and the ticks are opened now.
   */
  async #findAtStart(): Promise<void> {
    const found = await this.#marks.find();
    const { lostThroughMs } = found;
    let marks: ReadonlyMap<string, number> = found.marks;
    let done = 0;
    if (lostThroughMs !== undefined) {
      const fromProgress = new Map<string, number>();
      for (const planner of this.#loop.planners()) {
        const tickMs = planner.lastDueBy(lostThroughMs);
        if (tickMs !== undefined) fromProgress.set(planner.schedule.id, tickMs);
        if (++done % FOUND_SLICE === 0) await yieldToLoop();
      }
      marks = this.#marks.recover(fromProgress);
    }
    const nowMs = this.#loop.nowMs();
    for (const [scheduleId, markMs] of marks) {
      const planner = this.#loop.planner(scheduleId);
      for (let tickMs = planner?.previous(Math.min(markMs, nowMs) + 1); tickMs !== undefined;) {
        const tick = this.#loop.tick(scheduleId, tickMs) as Tick;
        const untilMs = tick.dueMs + tick.startDeadlineMs;
        if (untilMs < nowMs) break;
        this.#inFlightTicks.push({ scheduleId, tickMs, jobId: tick.jobId, recoverAtMs: tick.dueMs, untilMs });
        tickMs = planner?.previous(tickMs);
      }
      if (++done % FOUND_SLICE === 0) await yieldToLoop();
    }
    this.#pruneInFlight(nowMs);
    if (lostThroughMs !== undefined) this.#reopenInFlight();
  }

  /** Reads the queue Redis's run_id on each (re)connection; another than before means its data may be older than what this replica wrote. */
  async #checkQueueServer(): Promise<void> {
    const runId = await serverRunId(this.#options.queueConnection);
    const previous = this.#queueRunId;
    this.#queueRunId = runId;
    if (previous === undefined)
      this.#track(
        this.#findAtStart(),
        'could not read the tick marks at start: the gap check relies on the queue Redis keeping them',
      );
    if (previous === undefined || runId === undefined || runId === previous) return;
    this.#options.logger.warn(
      { previousRunId: previous, runId },
      'the queue Redis restarted or another server took its place (its run_id changed): writes may be lost',
    );
    this.#reopenInFlight();
  }

  /** Opens ticks for recovery; those it cannot open are kept and opened again every REOPEN_RETRY_MS (see #unopened). */
  #open(ticks: OpenTick[]): void {
    if (ticks.length === 0) return;
    const opening = this.#store.open(ticks).catch((error: unknown) => {
      this.#keepUnopened(ticks);
      throw error;
    });
    this.#track(opening, 'could not open the ticks taken up: trying again');
  }

  #keepUnopened(ticks: readonly OpenTick[]): void {
    for (const tick of ticks) this.#unopened.push(tick);
    this.#dropOldest(
      this.#unopened,
      'too many ticks left unopened while the queue Redis is down: the oldest are dropped, and no replica will recover them if their winner failed',
    );
    const { clock } = this.#options;
    this.#reopenTimer ??= clock.setTimeout(() => {
      this.#reopenTimer = undefined;
      const retry = this.#unopened;
      this.#unopened = [];
      this.#open(retry);
    }, REOPEN_RETRY_MS);
  }

  #track(work: Promise<void>, failure: string): void {
    const tracked = work.catch((error: unknown) => this.#options.logger.error({ err: error }, failure));
    this.#inFlight.add(tracked);
    void tracked.finally(() => this.#inFlight.delete(tracked));
  }
}
