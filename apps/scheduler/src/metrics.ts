import type { Redlock } from '@tickwarden/redlock';
import { ProcessMetrics } from '@tickwarden/runtime';
import { Counter, Histogram } from 'prom-client';
import { TICK_OBSERVATIONS, TICK_OUTCOMES, type TickObservation, type TickOutcome } from './outcomes.ts';

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

  constructor() {
    super();
    for (const outcome of TICK_OUTCOMES) this.ticks.inc({ outcome }, 0);
    for (const observation of TICK_OBSERVATIONS) this.observations.inc({ observation }, 0);
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
