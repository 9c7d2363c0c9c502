import type { Redlock } from '@tickwarden/redlock';
import { Counter, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * The metrics every Tickwarden process exports, on its own registry: Node's
 * defaults, lock node errors and config reloads. Each app adds its own.
 */
export class ProcessMetrics {
  readonly registry = new Registry();
  readonly lockNodeErrors = new Counter({ name: 'tickwarden_lock_node_errors_total', help: 'Errors and timeouts per lock node', labelNames: ['node', 'operation'] as const, registers: [this.registry] });
  readonly configReloads = new Counter({ name: 'tickwarden_config_reloads_total', help: 'Config reloads by result', labelNames: ['result'] as const, registers: [this.registry] });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** Counts the lease library's per-node errors. */
  observeLockNodes(redlock: Redlock): void {
    redlock.on('nodeError', ({ node, operation }) => this.lockNodeErrors.inc({ node, operation }));
  }
}
