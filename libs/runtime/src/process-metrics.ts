import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { TickwardenConfig } from '@tickwarden/config';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { yieldToLoop } from './yield-to-loop.ts';

/** What the metrics need of the lease library (a Redlock has it): its per-node errors, and a probe of its nodes. */
export interface ObservedLockNodes {
  on(event: 'nodeError', listener: (error: { node: string; operation: string }) => void): unknown;
  probe(): Promise<{ quorum: boolean; reachable: readonly string[] }>;
}

/**
 * The metrics every Tickwarden process exports, on its own registry: Node's
 * defaults, build info, lock node errors and quorum, the config it runs and
 * its reloads. Each app adds its own.
 */
export class ProcessMetrics {
  readonly registry = new Registry();
  readonly lockNodeErrors = new Counter({
    name: 'tickwarden_lock_node_errors_total',
    help: 'Errors and timeouts per lock node',
    labelNames: ['node', 'operation'] as const,
    registers: [this.registry],
  });
  readonly configReloads = new Counter({
    name: 'tickwarden_config_reloads_total',
    help: 'Config reloads by result',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly configLastReloadSuccessful = new Gauge({
    name: 'tickwarden_config_last_reload_successful',
    help: '1 while the config this process runs is the newest it read (its start, or a reload it applied); 0 from a rejected reload until one is applied: the process keeps its previous config',
    registers: [this.registry],
  });
  readonly configLastReloadSuccess = new Gauge({
    name: 'tickwarden_config_last_reload_success_timestamp_seconds',
    help: 'When this process last applied a config (its start or a reload), unix seconds',
    registers: [this.registry],
  });
  readonly configInfo = new Gauge({
    name: 'tickwarden_config_info',
    help: 'The config this process runs, always 1: hash is a hash of its schedules as validated (configHash), equal on every process that runs the same schedules',
    labelNames: ['hash'] as const,
    registers: [this.registry],
  });
  readonly buildInfo = new Gauge({
    name: 'tickwarden_build_info',
    help: 'Always 1: the version of this process and of its Node.js',
    labelNames: ['version', 'node'] as const,
    registers: [this.registry],
  });
  /** Set once `observeLockNodes` has lock nodes to probe. */
  #redlock: ObservedLockNodes | undefined;
  readonly lockNodesReachable = new Gauge({
    name: 'tickwarden_lock_nodes_reachable',
    help: 'Lock nodes that answered a probe at this scrape (within the node timeout)',
    registers: [],
    collect: () => this.#probeLockNodes(),
  });
  readonly lockQuorumReachable = new Gauge({
    name: 'tickwarden_lock_quorum_reachable',
    help: '1 if a quorum of lock nodes answered a probe at this scrape; 0 if not (the process can take no lease: no tick contested, no run started or kept)',
    registers: [],
    collect: () => this.#probeLockNodes(),
  });
  /** The probe of the scrape in progress: the registry collects both gauges at once, from one probe. */
  #probe: Promise<void> | undefined;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** Labels `tickwarden_build_info` with `version` (the app's package.json version) and the Node.js version. */
  setBuild(version: string): void {
    this.buildInfo.reset();
    this.buildInfo.set({ version, node: process.version }, 1);
  }

  /** The config this process runs now: at its start, and after each reload it applied (call it once the app applied it). */
  async configApplied(config: TickwardenConfig, nowMs = Date.now()): Promise<void> {
    const hash = await configHash(config);
    this.configInfo.reset();
    this.configInfo.set({ hash }, 1);
    this.configLastReloadSuccessful.set(1);
    this.configLastReloadSuccess.set(nowMs / 1000);
  }

  /** A reload's result (the `onReloadResult` of `startLiveConfig`): counted, and a rejected one sets the gauge to 0 until a reload is applied. */
  recordConfigReload(result: 'applied' | 'invalid'): void {
    this.configReloads.inc({ result });
    this.configLastReloadSuccessful.set(result === 'applied' ? 1 : 0);
  }

  readonly clockOffset = new Gauge({
    name: 'tickwarden_clock_offset_seconds',
    help: "How far this host's wall clock is off the lock nodes' time (positive: ahead); the process decides on the lock nodes' time",
    registers: [],
    collect: () => {
      const offsetMs = this.#clock?.offsetMs;
      if (offsetMs !== undefined) this.clockOffset.set(offsetMs / 1000);
    },
  });
  #clock: { readonly offsetMs: number | undefined } | undefined;

  /** Exports the host clock's offset from the lock nodes' time (`tickwarden_clock_offset_seconds`), read at each scrape. */
  observeClock(clock: { readonly offsetMs: number | undefined }): void {
    if (this.#clock === undefined) this.registry.registerMetric(this.clockOffset);
    this.#clock = clock;
  }

  /** Counts the lease library's per-node errors, and probes its nodes at each scrape (`tickwarden_lock_quorum_reachable`). */
  observeLockNodes(redlock: ObservedLockNodes): void {
    redlock.on('nodeError', ({ node, operation }) => this.lockNodeErrors.inc({ node, operation }));
    if (this.#redlock === undefined) {
      this.registry.registerMetric(this.lockNodesReachable);
      this.registry.registerMetric(this.lockQuorumReachable);
    }
    this.#redlock = redlock;
  }

  #probeLockNodes(): Promise<void> {
    const redlock = this.#redlock;
    if (!redlock) return Promise.resolve();
    this.#probe ??= redlock
      .probe()
      .catch(() => ({ quorum: false, reachable: [] as string[] }))
      .then((probe) => {
        this.lockNodesReachable.set(probe.reachable.length);
        this.lockQuorumReachable.set(probe.quorum ? 1 : 0);
      })
      .finally(() => (this.#probe = undefined));
    return this.#probe;
  }
}

/**
 * A short hash of a config's schedules as validated (every default applied; where each is
 * written left out), the same in every process that runs the same schedules whatever the
 * files' paths, comments or formatting: `tickwarden_config_info{hash}`.
 */
export async function configHash(config: Pick<TickwardenConfig, 'schedules'>): Promise<string> {
  // The canonical JSON of the list, hashed a schedule at a time: 100,000 take most of a second.
  const hash = createHash('sha256').update('[');
  for (const [i, { source: _source, ...schedule }] of config.schedules.entries()) {
    hash.update(i === 0 ? canonicalJson(schedule) : `,${canonicalJson(schedule)}`);
    if (i % HASH_SLICE === HASH_SLICE - 1) await yieldToLoop();
  }
  return hash.update(']').digest('hex').slice(0, 16);
}

/** Schedules hashed per slice of configHash. */
const HASH_SLICE = 1_000;

/** JSON with object keys sorted at every depth (undefined members left out, as JSON.stringify does). */
function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  // Built by concatenation: an array of entries, filtered and mapped per object, costs far more at this scale.
  let out = '';
  if (Array.isArray(value)) {
    for (const item of value as unknown[])
      out += `${out === '' ? '' : ','}${item === undefined ? 'null' : canonicalJson(item)}`;
    return `[${out}]`;
  }
  for (const key of Object.keys(value).sort()) {
    const member = (value as Record<string, unknown>)[key];
    if (member !== undefined) out += `${out === '' ? '' : ','}${JSON.stringify(key)}:${canonicalJson(member)}`;
  }
  return `{${out}}`;
}

/** The `version` of a package.json (e.g. `new URL('../package.json', import.meta.url)` from an app's main), or `unknown`. */
export function packageVersion(packageJson: URL): string {
  try {
    const { version } = JSON.parse(readFileSync(packageJson, 'utf8')) as { version?: unknown };
    return typeof version === 'string' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}
