import { sleep } from '@tickwarden/testkit';
import type { AppRole, Cluster } from './cluster.ts';
import type { OutageWindow } from './report.ts';

/** The faults the chaos suite draws from. */
export const FAULT_KINDS = [
  'kill-scheduler',
  'kill-worker',
  'pause-scheduler',
  'pause-worker',
  'skew-scheduler',
  'kill-lock-nodes',
  'pause-lock-nodes',
  'latency',
  'partition-scheduler',
  'partition-worker',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** One fault of the seeded plan: what, when (from the run's start), for how long, and which slot it targets. */
export interface PlannedFault {
  atMs: number;
  kind: FaultKind;
  durationMs: number;
  /** Picks the target among the slots of its kind (process slot or lock nodes), modulo their count. */
  target: number;
  /** Kind-specific draw: lock node count (1-2), latency ms, clock offset ms, or whether a restarted node keeps its data. */
  magnitude: number;
}

export interface PlanOptions {
  seed: number;
  durationMs: number;
  /** The schedules' lease TTL: pauses and partitions are drawn longer than it. */
  leaseTtlMs: number;
  /** Whether `skew-scheduler` may be drawn (needs libfaketime). */
  clockSkew: boolean;
}

/** mulberry32: a small, well-mixed PRNG; the same seed gives the same plan on every machine. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The fault schedule of a run: a fault every 1.5-4.5 s, each drawn from the seed alone. */
export function planFaults(options: PlanOptions): PlannedFault[] {
  const random = seededRandom(options.seed);
  const between = (min: number, max: number): number => Math.round(min + random() * (max - min));
  const kinds = FAULT_KINDS.filter((kind) => options.clockSkew || kind !== 'skew-scheduler');
  const ttl = options.leaseTtlMs;
  const plan: PlannedFault[] = [];
  for (let atMs = between(2000, 4000); atMs < options.durationMs; atMs += between(1500, 4500)) {
    const kind = kinds[Math.floor(random() * kinds.length)] ?? 'latency';
    const target = Math.floor(random() * 1000);
    const longerThanLease = between(ttl + 500, ttl + 2500);
    const durationMs = kind.startsWith('pause') || kind.startsWith('partition') ? longerThanLease : between(1000, 2 * ttl + 2000);
    const magnitude =
      kind === 'latency' ? between(20, 250) : kind === 'skew-scheduler' ? between(-1000, 1000) : kind === 'kill-lock-nodes' || kind === 'pause-lock-nodes' ? between(1, 2) : 0;
    plan.push({ atMs, kind, durationMs: Math.min(durationMs, options.durationMs - atMs + 1000), target, magnitude });
  }
  return plan;
}

/** What happened to one planned fault. */
export interface AppliedFault extends PlannedFault {
  /** The process or lock nodes it hit, or why it was skipped (its target was already faulted). */
  on: string;
  applied: boolean;
  /** Lock nodes only: restarted empty (false) or from their AOF (true). */
  keptData?: boolean;
}

/** Process slots of the cluster the chaos runs: names are stable across restarts. */
export interface ChaosSlots {
  schedulers: readonly string[];
  workers: readonly string[];
}

/**
 * Applies a fault plan to a running cluster and heals every fault after its
 * duration, while tracking when no scheduler replica could decide a tick (no
 * replica alive and running, or none reaching a lock majority): misses inside
 * those windows are allowed by design, all others fail the run.
 */
export class ChaosRunner {
  readonly applied: AppliedFault[] = [];
  readonly #cluster: Cluster;
  readonly #slots: ChaosSlots;
  readonly #busy = new Set<string>();
  readonly #paused = new Set<string>();
  readonly #down = new Set<string>();
  readonly #skew = new Map<string, number>();
  /** Per process slot: lock node indexes it cannot reach. */
  readonly #cut = new Map<string, Set<number>>();
  readonly #nodesDown = new Set<number>();
  readonly #outages: OutageWindow[] = [];
  #openOutage: OutageWindow | undefined;
  readonly #leaseTtlMs: number;
  readonly #log: (line: string) => void;

  constructor(cluster: Cluster, slots: ChaosSlots, leaseTtlMs: number, log: (line: string) => void) {
    this.#cluster = cluster;
    this.#slots = slots;
    this.#leaseTtlMs = leaseTtlMs;
    this.#log = log;
  }

  get outages(): OutageWindow[] {
    return [...this.#outages, ...(this.#openOutage ? [this.#openOutage] : [])];
  }

  /** Runs the plan from `startMs` (wall clock); resolves once every fault is healed. */
  async run(plan: readonly PlannedFault[], startMs: number): Promise<void> {
    const heals: Promise<void>[] = [];
    for (const fault of plan) {
      await sleep(Math.max(0, startMs + fault.atMs - Date.now()));
      heals.push(this.#apply(fault, startMs).catch((error: unknown) => this.#log(`fault ${fault.kind} failed: ${(error as Error).message}`)));
    }
    await Promise.all(heals);
  }

  async #apply(fault: PlannedFault, startMs: number): Promise<void> {
    const record: AppliedFault = { ...fault, on: '', applied: false };
    this.applied.push(record);
    const stamp = `+${((Date.now() - startMs) / 1000).toFixed(1)}s`;
    const heal = await this.#inject(fault, record);
    this.#log(`${stamp} ${fault.kind} ${record.on}${record.applied ? ` for ${(fault.durationMs / 1000).toFixed(1)}s` : ''}${fault.magnitude && record.applied ? ` (${fault.magnitude})` : ''}`);
    if (!heal) return;
    await sleep(fault.durationMs);
    await heal();
  }

  /** Injects the fault; returns how to heal it, or undefined when its target was busy. */
  async #inject(fault: PlannedFault, record: AppliedFault): Promise<(() => Promise<void>) | undefined> {
    if (fault.kind === 'kill-lock-nodes' || fault.kind === 'pause-lock-nodes') return this.#lockNodeFault(fault, record);
    const role: AppRole = fault.kind.endsWith('worker') ? 'worker' : 'scheduler';
    const slots = role === 'worker' ? this.#slots.workers : this.#slots.schedulers;
    const slot = slots[fault.target % slots.length] ?? '';
    record.on = slot;
    if (this.#busy.has(slot)) {
      record.on = `${slot} (skipped: already faulted)`;
      return undefined;
    }
    this.#busy.add(slot);
    record.applied = true;
    const release = (): void => {
      this.#busy.delete(slot);
      this.#update();
    };
    const app = this.#cluster.app(slot);
    switch (fault.kind) {
      case 'kill-scheduler':
      case 'kill-worker':
        this.#down.add(slot);
        this.#update();
        await this.#cluster.stopApp(slot, 'SIGKILL');
        return async () => {
          await this.#cluster.startApp(role, slot, { clockOffsetMs: this.#skew.get(slot) ?? 0 });
          this.#down.delete(slot);
          release();
        };
      case 'pause-scheduler':
      case 'pause-worker':
        this.#paused.add(slot);
        this.#update();
        app.process.signal('SIGSTOP');
        return async () => {
          app.process.signal('SIGCONT');
          this.#paused.delete(slot);
          release();
        };
      case 'skew-scheduler':
        // A graceful restart with the wall clock shifted: the replica keeps the skew until its next restart.
        this.#down.add(slot);
        this.#update();
        await this.#cluster.stopApp(slot, 'SIGTERM');
        this.#skew.set(slot, fault.magnitude);
        await this.#cluster.startApp(role, slot, { clockOffsetMs: fault.magnitude });
        this.#down.delete(slot);
        return async () => release();
      case 'latency':
        for (let node = 0; node < this.#cluster.locks.nodes.length; node++) app.link.setFault(node, { kind: 'latency', ms: fault.magnitude });
        return async () => {
          app.link.heal();
          release();
        };
      case 'partition-scheduler':
      case 'partition-worker': {
        // Cut from a majority of the lock nodes, while still reaching the queue Redis.
        const count = this.#cluster.locks.nodes.length;
        const cut = new Set(Array.from({ length: Math.floor(count / 2) + 1 }, (_, i) => (fault.target + i) % count));
        record.on = `${slot} from nodes ${[...cut].join(',')}`;
        app.link.partition(cut);
        this.#cut.set(slot, cut);
        this.#update();
        return async () => {
          app.link.heal();
          this.#cut.delete(slot);
          release();
        };
      }
    }
  }

  async #lockNodeFault(fault: PlannedFault, record: AppliedFault): Promise<(() => Promise<void>) | undefined> {
    const count = this.#cluster.locks.nodes.length;
    // At most a minority of the nodes is faulted at any time: the faults the system must survive.
    const budget = Math.floor((count - 1) / 2) - this.#nodesDown.size;
    const nodes = Array.from({ length: count }, (_, i) => (fault.target + i) % count)
      .filter((node) => !this.#nodesDown.has(node))
      .slice(0, Math.min(fault.magnitude, budget));
    if (nodes.length === 0) {
      record.on = 'lock nodes (skipped: a minority is already faulted)';
      return undefined;
    }
    record.applied = true;
    record.on = `lock nodes ${nodes.join(',')}`;
    for (const node of nodes) this.#nodesDown.add(node);
    this.#update();
    const locks = this.#cluster.locks;
    if (fault.kind === 'pause-lock-nodes') {
      await Promise.all(nodes.map((node) => locks.node(node).pause()));
    } else {
      await Promise.all(nodes.map((node) => locks.node(node).kill()));
      // Without its data a node may rejoin only after every lease it held has lapsed (Redlock's delayed restart).
      record.keptData = fault.durationMs <= this.#leaseTtlMs + 1000 || fault.target % 2 === 0;
    }
    return async () => {
      if (fault.kind === 'pause-lock-nodes') await Promise.all(nodes.map((node) => locks.node(node).resume()));
      else await Promise.all(nodes.map((node) => locks.node(node).restart({ keepData: record.keptData ?? true })));
      for (const node of nodes) this.#nodesDown.delete(node);
      this.#update();
    };
  }

  /** Opens or closes an outage window when the set of replicas able to decide a tick becomes empty or not. */
  #update(): void {
    const quorum = Math.floor(this.#cluster.locks.nodes.length / 2) + 1;
    const running = this.#slots.schedulers.filter((slot) => !this.#down.has(slot) && !this.#paused.has(slot));
    const deciding = running.filter((slot) => {
      const cut = this.#cut.get(slot) ?? new Set<number>();
      const reachable = this.#cluster.locks.nodes.filter((_, node) => !cut.has(node) && !this.#nodesDown.has(node)).length;
      return reachable >= quorum;
    });
    const now = Date.now();
    if (deciding.length > 0) {
      if (this.#openOutage) {
        this.#outages.push({ ...this.#openOutage, toMs: now });
        this.#openOutage = undefined;
      }
      return;
    }
    this.#openOutage ??= { fromMs: now, toMs: now, reason: running.length === 0 ? 'no-replica' : 'no-lock-majority' };
  }
}
