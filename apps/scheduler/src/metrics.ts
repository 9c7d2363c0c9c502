import type { Redlock } from '@tickwarden/redlock';
import { ProcessMetrics, yieldToLoop } from '@tickwarden/runtime';
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

/**
 * What this replica exports of one configured schedule. Kept small: a replica holds one per
 * schedule (100,000s), so the counts sit in one flat array made at the first outcome, and the
 * newest tick in two fields.
 */
interface ScheduleSeries {
  schedule: MeteredSchedule;
  /** `tickwarden_schedule_ticks_total`: pairs of a shared label set (TICK_LABELS) and its count. */
  ticks: (TickLabels | number)[] | undefined;
  /** The newest tick recorded, and its outcome (undefined before the first). */
  lastTickMs: number;
  lastOutcome: TickOutcome | undefined;
}

/** The per-schedule families, written by the replica itself (see SchedulerMetrics.exposition). */
const SCHEDULE_FAMILIES = {
  ticks: {
    name: 'tickwarden_schedule_ticks_total',
    type: 'counter',
    help: 'Tick outcomes per schedule, each tick counted once for the cluster by the replica whose record it is (sum over replicas); reason: why a missed tick was missed',
  },
  lastTick: {
    name: 'tickwarden_schedule_last_tick_timestamp_seconds',
    type: 'gauge',
    help: "The newest tick of the schedule this replica recorded an outcome for (its time, unix seconds), labelled with that outcome; max over replicas is the cluster's newest",
  },
  period: {
    name: 'tickwarden_schedule_period_seconds',
    type: 'gauge',
    help: 'The longest interval between two consecutive ticks of the schedule over the next 8 days (at least 3 intervals): the period of the no-success alert',
  },
} as const;

/** Schedules written per slice of a scrape: the event loop runs ticks in between. */
const SERIES_PER_SLICE = 2_000;

/** A label value in the text format: most need no escape, and a scrape writes 100,000s of them. */
const labelValue = (value: string): string =>
  /[\\"\n]/.test(value) ? value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n') : value;

/**
 * `tickwarden_schedule_ticks_total`'s labels besides the schedule's (`reason` only on a missed
 * tick), with their text: one shared object per pair, made once (TICK_LABELS).
 */
interface TickLabels {
  outcome: TickOutcome;
  reason: MissReason | 'other' | undefined;
  text: string;
}
const tickLabels = (outcome: TickOutcome, reason?: MissReason | 'other'): TickLabels => ({
  outcome,
  reason,
  text: reason === undefined ? `outcome="${outcome}"` : `outcome="${outcome}",reason="${reason}"`,
});
/** Every label set a schedule's count can have: by outcome, and a missed tick's by reason. */
const TICK_LABELS = {
  byOutcome: new Map(TICK_OUTCOMES.map((outcome) => [outcome, tickLabels(outcome)])),
  missed: new Map([...MISS_REASONS, 'other' as const].map((reason) => [reason, tickLabels('missed', reason)])),
};
const labelsOf = (outcome: TickOutcome, reason: string | undefined): TickLabels =>
  (outcome === 'missed'
    ? TICK_LABELS.missed.get(MISS_REASONS.find((known) => known === reason) ?? 'other')
    : TICK_LABELS.byOutcome.get(outcome)) as TickLabels;

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
   * What /metrics serves: the registry's metrics, then the per-schedule families (labels `team`,
   * `schedule`; a schedule's series appear with its first outcome and go when it leaves the
   * config). Those are kept as plain counts and written by the replica in slices: prom-client's
   * labelled metrics cost every outcome a label lookup and build a scrape in one synchronous
   * piece, both of which grow with the schedules (bench/schedule-metrics-cost.ts measures it).
   */
  readonly exposition = {
    contentType: this.registry.contentType,
    metrics: async (): Promise<string> => (await this.exposition.chunks()).join(''),
    /** The same text in pieces, which the HTTP server writes one at a time (at 100,000 schedules it is tens of MB). */
    chunks: async (): Promise<string[]> => [await this.registry.metrics(), ...(await this.#scheduleText())],
  };
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
  async setSchedules(schedules: readonly MeteredSchedule[]): Promise<void> {
    const configured = new Set<string>();
    for (const [i, schedule] of schedules.entries()) {
      configured.add(schedule.id);
      const series = this.#schedules.get(schedule.id);
      if (series) series.schedule = schedule;
      else this.#schedules.set(schedule.id, { schedule, ticks: undefined, lastTickMs: 0, lastOutcome: undefined });
      if (i % SERIES_PER_SLICE === SERIES_PER_SLICE - 1) await yieldToLoop();
    }
    let looked = 0;
    for (const id of this.#schedules.keys()) {
      if (!configured.has(id)) this.#schedules.delete(id);
      if (++looked % SERIES_PER_SLICE === 0) await yieldToLoop();
    }
    await this.#periods.retainOnly(schedules);
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
    const labels = labelsOf(outcome, reason);
    const ticks = (series.ticks ??= []);
    const at = ticks.indexOf(labels);
    if (at >= 0) (ticks[at + 1] as number)++;
    else ticks.push(labels, 1);
    if (series.lastOutcome === undefined || tickMs >= series.lastTickMs) {
      series.lastTickMs = tickMs;
      series.lastOutcome = outcome;
    }
  }

  /** The per-schedule families in the text format, a slice of schedules at a time (one string per slice). */
  async #scheduleText(): Promise<string[]> {
    // Joined slice by slice, and never as a whole: one join of 300,000 lines would itself hold the event loop.
    const slices: string[] = [];
    const family = async (
      { name, type, help }: (typeof SCHEDULE_FAMILIES)[keyof typeof SCHEDULE_FAMILIES],
      write: (series: ScheduleSeries, labels: string, lines: string[]) => void,
    ): Promise<void> => {
      let lines = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
      let written = 0;
      for (const series of this.#schedules.values()) {
        const { id } = series.schedule;
        write(series, `team="${labelValue(teamOf(id))}",schedule="${labelValue(id)}"`, lines);
        if (++written % SERIES_PER_SLICE !== 0) continue;
        slices.push(`${lines.join('\n')}\n`);
        lines = [];
        await yieldToLoop();
      }
      if (lines.length > 0) slices.push(`${lines.join('\n')}\n`);
    };
    const { ticks, lastTick, period } = SCHEDULE_FAMILIES;
    await family(ticks, (series, labels, lines) => {
      const counts = series.ticks ?? [];
      for (let i = 0; i < counts.length; i += 2)
        lines.push(`${ticks.name}{${labels},${(counts[i] as TickLabels).text}} ${counts[i + 1] as number}`);
    });
    await family(lastTick, (series, labels, lines) => {
      const { lastOutcome, lastTickMs } = series;
      if (lastOutcome) lines.push(`${lastTick.name}{${labels},outcome="${lastOutcome}"} ${lastTickMs / 1000}`);
    });
    await family(period, (series, labels, lines) => {
      const ms = this.#periods.get(series.schedule.cron, series.schedule.timezone);
      if (ms !== undefined) lines.push(`${period.name}{${labels}} ${ms / 1000}`);
    });
    return slices;
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
