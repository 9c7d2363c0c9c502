import { RUN_OUTCOMES, type RunOutcome } from '@tickwarden/contracts';
import type { Redlock } from '@tickwarden/redlock';
import { ProcessMetrics } from '@tickwarden/runtime';
import { Counter, Gauge, Histogram } from 'prom-client';

/** Outcomes of attempts whose handler ran: the ones `tickwarden_schedule_run_duration_seconds` observes. */
const HANDLER_RAN: ReadonlySet<RunOutcome> = new Set([
  'succeeded',
  'failed',
  'aborted-lease-lost',
  'aborted-timeout',
  'aborted-shutdown',
]);

/** The team of a schedule id: the part before its `/`. */
const teamOf = (scheduleId: string): string => scheduleId.split('/', 1)[0] ?? '';

/** The worker's Prometheus metrics, on their own registry. */
export class WorkerMetrics extends ProcessMetrics {
  readonly runs = new Counter({
    name: 'tickwarden_worker_runs_total',
    help: 'Job attempts by outcome',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly runDuration = new Histogram({
    name: 'tickwarden_worker_run_duration_seconds',
    help: 'Duration of job attempts that ran a handler, from the job start to its end, by outcome',
    labelNames: ['outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: [this.registry],
  });
  readonly takingJobs = new Gauge({
    name: 'tickwarden_worker_taking_jobs',
    help: '1 while the worker takes jobs; 0 while it does not (a lock quorum unreachable from it, stopping, not started)',
    registers: [this.registry],
  });
  readonly activeRuns = new Gauge({
    name: 'tickwarden_worker_active_runs',
    help: 'Job attempts running now (lease held)',
    registers: [this.registry],
  });
  readonly leaseExtension = new Histogram({
    name: 'tickwarden_worker_lease_extension_seconds',
    help: 'Latency of successful lease extensions by the watchdog',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5],
    registers: [this.registry],
  });
  readonly leaseExtensionFailures = new Counter({
    name: 'tickwarden_worker_lease_extension_failures_total',
    help: 'Lease extensions that failed',
    registers: [this.registry],
  });
  readonly abortValidityLeft = new Histogram({
    name: 'tickwarden_worker_lease_abort_validity_left_seconds',
    help: 'Lease validity left when the watchdog aborted a run (must stay above 0)',
    buckets: [0, 0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 5, 10],
    registers: [this.registry],
  });
  readonly commandGuardExits = new Counter({
    name: 'tickwarden_worker_command_guard_exits_total',
    help: 'Unexpected exits of the command guard process (each one is replaced)',
    registers: [this.registry],
  });
  readonly commandGuardKills = new Counter({
    name: 'tickwarden_worker_command_guard_kills_total',
    help: 'Command process groups the guard SIGKILLed because their lease deadline passed without an extension (the worker was paused or stuck)',
    registers: [this.registry],
  });

  readonly runSlots = new Gauge({
    name: 'tickwarden_worker_run_slots',
    help: 'Job attempts this worker runs at once at most: TICKWARDEN_WORKER_CONCURRENCY per queue it consumes (saturation: tickwarden_worker_active_runs over this)',
    registers: [this.registry],
  });
  /**
   * Per schedule (labels `team`, `schedule`; one series set per schedule this worker ran, created
   * by its first attempt, dropped when a config without the schedule is applied).
   */
  readonly scheduleRuns = new Counter({
    name: 'tickwarden_schedule_runs_total',
    help: 'Job attempts per schedule by outcome, on this worker (sum over workers)',
    labelNames: ['team', 'schedule', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly scheduleRunDuration = new Histogram({
    name: 'tickwarden_schedule_run_duration_seconds',
    help: 'Duration of the attempts of the schedule whose handler ran (succeeded, failed, aborted-*), from the attempt start to its end',
    labelNames: ['team', 'schedule'] as const,
    buckets: [0.1, 1, 10, 60, 600, 3600],
    registers: [this.registry],
  });
  readonly scheduleLastSuccess = new Gauge({
    name: 'tickwarden_schedule_last_success_timestamp_seconds',
    help: "When an attempt of the schedule last succeeded on this worker (its end, unix seconds); max over workers is the cluster's last success",
    labelNames: ['team', 'schedule'] as const,
    registers: [this.registry],
  });
  /** Per schedule id: the outcomes its `tickwarden_schedule_runs_total` has (to drop them). */
  readonly #scheduleOutcomes = new Map<string, Set<RunOutcome>>();

  constructor() {
    super();
    for (const outcome of RUN_OUTCOMES) this.runs.inc({ outcome }, 0);
  }

  /** An attempt's end: the totals, and with `scheduleId` (the job's `schedule`) the schedule's own series; `nowMs` is its end. */
  recordRun(outcome: RunOutcome, durationMs: number | undefined, scheduleId?: string, nowMs = Date.now()): void {
    this.runs.inc({ outcome });
    if (durationMs !== undefined) this.runDuration.observe({ outcome }, durationMs / 1000);
    if (scheduleId === undefined) return;
    const labels = { team: teamOf(scheduleId), schedule: scheduleId };
    let outcomes = this.#scheduleOutcomes.get(scheduleId);
    if (!outcomes) this.#scheduleOutcomes.set(scheduleId, (outcomes = new Set()));
    outcomes.add(outcome);
    this.scheduleRuns.inc({ ...labels, outcome });
    if (durationMs !== undefined && HANDLER_RAN.has(outcome))
      this.scheduleRunDuration.observe(labels, durationMs / 1000);
    if (outcome === 'succeeded') this.scheduleLastSuccess.set(labels, nowMs / 1000);
  }

  /** The schedules of a config just applied (a reload): the series of any other schedule are dropped. */
  retainSchedules(scheduleIds: Iterable<string>): void {
    const configured = new Set(scheduleIds);
    for (const [scheduleId, outcomes] of this.#scheduleOutcomes) {
      if (configured.has(scheduleId)) continue;
      const labels = { team: teamOf(scheduleId), schedule: scheduleId };
      for (const outcome of outcomes) this.scheduleRuns.remove({ ...labels, outcome });
      this.scheduleRunDuration.remove(labels);
      this.scheduleLastSuccess.remove(labels);
      this.#scheduleOutcomes.delete(scheduleId);
    }
  }

  /** Feeds the lease library's hooks into the metrics. */
  observe(redlock: Redlock): void {
    redlock.on('extended', ({ elapsedMs }) => this.leaseExtension.observe(elapsedMs / 1000));
    redlock.on('extensionFailed', () => this.leaseExtensionFailures.inc());
    redlock.on('aborted', ({ validityLeftMs }) => this.abortValidityLeft.observe(validityLeftMs / 1000));
    this.observeLockNodes(redlock);
  }
}
