import type { Redlock } from '@tickwarden/redlock';
import { ProcessMetrics } from '@tickwarden/runtime';
import { Counter, Histogram } from 'prom-client';
import type { TickOutcome } from './scheduler.ts';

/** The scheduler's Prometheus metrics, on their own registry. */
export class SchedulerMetrics extends ProcessMetrics {
  readonly ticks = new Counter({ name: 'tickwarden_ticks_total', help: 'Ticks by outcome on this replica', labelNames: ['outcome'] as const, registers: [this.registry] });
  readonly tickLag = new Histogram({
    name: 'tickwarden_tick_enqueue_lag_seconds',
    help: 'From the tick to its job being enqueued (this replica won); 0 when enqueued ahead of the tick (contest lead)',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly leaseAcquire = new Histogram({
    name: 'tickwarden_lease_acquire_seconds',
    help: 'Lease acquire latency, all attempts included',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });

  recordTick(outcome: TickOutcome, lagMs: number): void {
    this.ticks.inc({ outcome });
    if (outcome === 'enqueued') this.tickLag.observe(Math.max(0, lagMs) / 1000);
  }

  /** Feeds the lease library's hooks into the metrics. */
  observe(redlock: Redlock): void {
    redlock.on('acquired', ({ elapsedMs }) => this.leaseAcquire.observe(elapsedMs / 1000));
    this.observeLockNodes(redlock);
  }
}
