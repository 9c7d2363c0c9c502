import type { Redlock } from '@tickwarden/redlock';
import { ProcessMetrics } from '@tickwarden/runtime';
import { Counter, Gauge, Histogram } from 'prom-client';
import {
  MISS_REASONS,
  TICK_OBSERVATIONS,
  TICK_OUTCOMES,
  type MissReason,
  type TickObservation,
  type TickOutcome,
} from './outcomes.ts';
import { SchedulePeriods } from './schedule-period.ts';
import type { OutcomeEvent } from './tick-recorder.ts';

/** What the per-schedule metrics need of a configured schedule. */
export type MeteredSchedule = { id: string; cron: string; timezone: string };

/** What this replica exports of one configured schedule, to drop its series when it leaves the config. */
interface ScheduleSeries {
  team: string;
  schedule: MeteredSchedule;
  /** The `outcome`/`reason` pairs of `tickwarden_schedule_ticks_total` it has. */
  ticks: Map<string, TickLabels>;
  lastTick: { tickMs: number; outcome: TickOutcome } | undefined;
}

/** `tickwarden_schedule_ticks_total`'s labels besides the schedule's: `reason` only on a missed tick. */
type TickLabels = { outcome: TickOutcome; reason?: MissReason | 'other' };
const missReason = (reason: string | undefined): MissReason | 'other' =>
  MISS_REASONS.find((known) => known === reason) ?? 'other';

/** The team of a schedule id: the part before its `/`. */
export const teamOf = (scheduleId: string): string => scheduleId.split('/', 1)[0] ?? '';

/** The scheduler's Prometheus metrics, on their own registry. */
export class SchedulerMetrics extends ProcessMetrics {
  readonly ticks = new Counter({
    name: 'tickwarden_ticks_total',
    help: 'Tick outcomes this replica recorded for the cluster (each tick is counted by one replica: sum over replicas)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly observations = new Counter({
    name: 'tickwarden_tick_observations_total',
    help: 'What this replica saw of ticks it did not decide (lost-race), or failed to publish and left to recovery',
    labelNames: ['observation'] as const,
    registers: [this.registry],
  });
  readonly queueResets = new Counter({
    name: 'tickwarden_queue_redis_resets_total',
    help: 'Times this replica found the queue Redis had lost its data (its epoch changed): pauses written back, history and open ticks gone',
    registers: [this.registry],
  });
  readonly contenders = new Gauge({
    name: 'tickwarden_scheduler_contenders',
    help: 'Replicas this replica shares the tick contests with, itself included (heartbeats in the queue Redis); 0: no view, it contests every tick',
    registers: [this.registry],
  });
  readonly tickLag = new Histogram({
    name: 'tickwarden_tick_enqueue_lag_seconds',
    help: 'From the tick to its job being enqueued or recovered; 0 when enqueued ahead of the tick (contest lead)',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly leaseAcquire = new Histogram({
    name: 'tickwarden_lease_acquire_seconds',
    help: 'Lease acquire latency, all attempts included',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });

  /**
   * Per schedule (labels `team`, `schedule`; one series set per configured schedule, created by
   * its first outcome, dropped when it leaves the config): the outcomes this replica recorded.
   */
  readonly scheduleTicks = new Counter({
    name: 'tickwarden_schedule_ticks_total',
    help: 'Tick outcomes per schedule, each tick counted once for the cluster by the replica whose record it is (sum over replicas); reason: why a missed tick was missed',
    labelNames: ['team', 'schedule', 'outcome', 'reason'] as const,
    registers: [this.registry],
  });
  readonly scheduleLastTick = new Gauge({
    name: 'tickwarden_schedule_last_tick_timestamp_seconds',
    help: "The newest tick of the schedule this replica recorded an outcome for (its time, unix seconds), labelled with that outcome; max over replicas is the cluster's newest",
    labelNames: ['team', 'schedule', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly schedulePeriod = new Gauge({
    name: 'tickwarden_schedule_period_seconds',
    help: 'The longest interval between two consecutive ticks of the schedule over the next 8 days (at least 3 intervals): the period of the no-success alert',
    labelNames: ['team', 'schedule'] as const,
    registers: [this.registry],
    collect: () => this.#collectPeriods(),
  });
  readonly #schedules = new Map<string, ScheduleSeries>();
  readonly #periods: SchedulePeriods;

  constructor(options: { now?: () => number } = {}) {
    super();
    this.#periods = new SchedulePeriods(options.now);
    for (const outcome of TICK_OUTCOMES) this.ticks.inc({ outcome }, 0);
    for (const observation of TICK_OBSERVATIONS) this.observations.inc({ observation }, 0);
  }

  /**
   * The configured schedules (at start and after each reload): the series of a schedule no longer
   * configured are dropped, and outcomes of schedules not configured are counted only in the
   * totals (a tick of a removed schedule is `missed`, reason `schedule-removed`).
   */
  setSchedules(schedules: readonly MeteredSchedule[]): void {
    const configured = new Map(schedules.map((schedule) => [schedule.id, schedule]));
    for (const [id, series] of this.#schedules) if (!configured.has(id)) this.#drop(series);
    for (const schedule of configured.values()) {
      const series = this.#schedules.get(schedule.id);
      if (series) series.schedule = schedule;
      else
        this.#schedules.set(schedule.id, {
          team: teamOf(schedule.id),
          schedule,
          ticks: new Map(),
          lastTick: undefined,
        });
    }
    this.#periods.retainOnly(configured.values());
  }

  /** Resolves once every configured pattern's period is computed (tests). */
  periodsComputed(): Promise<void> {
    return this.#periods.idle();
  }

  /** The scheduler's `onOutcome`: the totals, and the schedule's own series. */
  recordOutcome(
    event: Pick<OutcomeEvent, 'outcome' | 'scheduleId' | 'tickMs' | 'lagMs' | 'reason' | 'recorded'>,
  ): void {
    const { outcome, scheduleId, tickMs, lagMs, reason, recorded } = event;
    this.recordTick(outcome, lagMs, recorded);
    const series = this.#schedules.get(scheduleId);
    if (!recorded || !series) return;
    const labels = { team: series.team, schedule: scheduleId };
    const tick: TickLabels = outcome === 'missed' ? { outcome, reason: missReason(reason) } : { outcome };
    series.ticks.set(`${tick.outcome} ${tick.reason ?? ''}`, tick);
    this.scheduleTicks.inc({ ...labels, ...tick });
    const last = series.lastTick;
    if (last !== undefined && tickMs < last.tickMs) return;
    if (last !== undefined && last.outcome !== outcome)
      this.scheduleLastTick.remove({ ...labels, outcome: last.outcome });
    series.lastTick = { tickMs, outcome };
    this.scheduleLastTick.set({ ...labels, outcome }, tickMs / 1000);
  }

  #drop(series: ScheduleSeries): void {
    const labels = { team: series.team, schedule: series.schedule.id };
    for (const tick of series.ticks.values()) this.scheduleTicks.remove({ ...labels, ...tick });
    if (series.lastTick) this.scheduleLastTick.remove({ ...labels, outcome: series.lastTick.outcome });
    this.#schedules.delete(series.schedule.id);
  }

  #collectPeriods(): void {
    this.schedulePeriod.reset();
    for (const { team, schedule } of this.#schedules.values()) {
      const ms = this.#periods.get(schedule.cron, schedule.timezone);
      if (ms !== undefined) this.schedulePeriod.set({ team, schedule: schedule.id }, ms / 1000);
    }
  }

  /** An outcome this replica decided; counted when it became the tick's record. */
  recordTick(outcome: TickOutcome, lagMs: number, recorded: boolean): void {
    if (!recorded) return;
    this.ticks.inc({ outcome });
    if (outcome === 'enqueued' || outcome === 'recovered') this.tickLag.observe(Math.max(0, lagMs) / 1000);
  }

  observeTick(observation: TickObservation): void {
    this.observations.inc({ observation });
  }

  /** Feeds the lease library's hooks into the metrics. */
  observe(redlock: Redlock): void {
    redlock.on('acquired', ({ elapsedMs }) => this.leaseAcquire.observe(elapsedMs / 1000));
    this.observeLockNodes(redlock);
  }
}
