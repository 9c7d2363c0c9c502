import { LATE_TICK_WINDOW_MS } from '@tickwarden/contracts';
import { sleep, type ClientLink, type Fault } from '@tickwarden/testkit';
import { writeClockOffset, type AppRole, type Cluster } from './cluster.ts';
import { queueInFlightMs, type OutageWindow, type WorkerFaultWindow } from './report.ts';

/** The faults the chaos suite draws from the seed (see the README's table). */
export const FAULT_KINDS = [
  'kill-scheduler',
  'kill-worker',
  'pause-scheduler',
  'pause-worker',
  'skew-scheduler',
  'step-clock-scheduler',
  'step-clock-worker',
  'partition-scheduler',
  'partition-schedulers',
  'partition-worker',
  'latency',
  'latency-lock-node',
  'reset-links',
  'kill-lock-nodes',
  'pause-lock-nodes',
  'kill-queue-redis',
  'pause-queue-redis',
  'latency-queue-redis',
  'partition-queue',
] as const;
/** The kinds drawn from the seed. */
export type DrawnFaultKind = (typeof FAULT_KINDS)[number];
/**
 * Drawn kinds, plus `late-restart-scheduler` (planned at fixed offsets after the long-period
 * schedule's ticks) and `restart-all-schedulers` (planned apart: `planReplicaRestarts`).
 */
export type FaultKind = DrawnFaultKind | 'late-restart-scheduler' | 'restart-all-schedulers';

/**
 * How often each kind is drawn: its copies in each bag of kinds the plan draws from (see
 * `planFaults`). The queue Redis faults count twice: it is one server that every process uses, and
 * `kill-queue-redis` has two ways back.
 */
export const FAULT_WEIGHTS: Readonly<Record<DrawnFaultKind, number>> = {
  'kill-scheduler': 1,
  'kill-worker': 1,
  'pause-scheduler': 1,
  'pause-worker': 1,
  'skew-scheduler': 1,
  'step-clock-scheduler': 1,
  'step-clock-worker': 1,
  'partition-scheduler': 1,
  'partition-schedulers': 1,
  'partition-worker': 1,
  latency: 1,
  'latency-lock-node': 1,
  'reset-links': 1,
  'kill-lock-nodes': 1,
  'pause-lock-nodes': 1,
  'kill-queue-redis': 2,
  'pause-queue-redis': 2,
  'latency-queue-redis': 2,
  'partition-queue': 2,
};

/** Faults that need libfaketime. */
const CLOCK_KINDS: readonly FaultKind[] = ['skew-scheduler', 'step-clock-scheduler', 'step-clock-worker'];

/** How a killed lock node comes back. */
export type LockNodeRestart = 'aof' | 'empty' | 'at-once';
/** How the killed queue Redis comes back: from its AOF (`appendfsync always`), or empty (its data lost). */
export type QueueRedisRestart = 'aof' | 'empty';

/** One fault of the seeded plan: what, when (from the run's start), for how long, and which slot it targets. */
export interface PlannedFault {
  atMs: number;
  kind: FaultKind;
  durationMs: number;
  /** Picks the target among the slots of its kind (process slot or lock nodes), modulo their count. */
  target: number;
  /**
   * Kind-specific draw: lock node count (1-2), latency ms, clock offset or step ms, the delay
   * of the second cut of `partition-schedulers`, ms.
   */
  magnitude: number;
  /** `kill-lock-nodes` (any of LockNodeRestart) and `kill-queue-redis` (QueueRedisRestart) only. */
  restart?: LockNodeRestart;
  /** `restart-all-schedulers` only: how every replica is stopped. */
  signal?: 'SIGTERM' | 'SIGKILL';
}

export interface PlanOptions {
  seed: number;
  durationMs: number;
  /** The schedules' lease TTL: pauses are drawn longer than it, empty restarts wait longer than it. */
  leaseTtlMs: number;
  /** Whether clock faults (`skew-scheduler`, `step-clock-scheduler`, `step-clock-worker`) may be drawn (they need libfaketime). */
  clockSkew: boolean;
  /** Offsets (from the run's start) of the ticks of the long-period `catchUp` schedule: each gets a `late-restart-scheduler`. */
  longTicksAtMs?: readonly number[];
  /** How long after such a tick its late restart comes: past the job retention (`2 x leaseTtl + 60 s`). Default 75 s. */
  lateRestartAfterMs?: number;
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

/** The late restart after a long tick. */
export const LATE_RESTART_AFTER_MS = 75_000;

/**
 * The fault schedule of a run: a fault every 1-4 s, each drawn from the seed
 * alone, plus a `late-restart-scheduler` 75 s after each tick of the long
 * schedule (offsets given by the caller). Kinds are dealt from a shuffled bag
 * holding each kind FAULT_WEIGHTS times, refilled when empty: every kind comes
 * up in every bag's worth of faults (about 50 s), where independent draws left
 * some out of a 90 s run.
 */
export function planFaults(options: PlanOptions): PlannedFault[] {
  const random = seededRandom(options.seed);
  const between = (min: number, max: number): number => Math.round(min + random() * (max - min));
  const kinds = FAULT_KINDS.filter((kind) => options.clockSkew || !CLOCK_KINDS.includes(kind));
  const bag: DrawnFaultKind[] = [];
  const drawKind = (): DrawnFaultKind => {
    if (bag.length === 0) {
      for (const kind of kinds) for (let copy = 0; copy < FAULT_WEIGHTS[kind]; copy++) bag.push(kind);
      // Fisher-Yates, from the seed.
      for (let i = bag.length - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [bag[i], bag[j]] = [bag[j] as DrawnFaultKind, bag[i] as DrawnFaultKind];
      }
    }
    return bag.pop() ?? 'latency';
  };
  const ttl = options.leaseTtlMs;
  const plan: PlannedFault[] = [];
  for (let atMs = between(2000, 4000); atMs < options.durationMs; atMs += between(1000, 4000)) {
    const kind = drawKind();
    const target = Math.floor(random() * 1000);
    const draw = random();
    const fault: PlannedFault = { atMs, kind, durationMs: 0, target, magnitude: 0 };
    switch (kind) {
      case 'kill-scheduler':
      case 'kill-worker':
        fault.durationMs = between(1000, 6000); // down this long
        break;
      case 'pause-scheduler':
      case 'pause-worker':
        fault.durationMs = between(ttl + 500, ttl + 2500);
        break;
      case 'skew-scheduler':
        fault.durationMs = between(1000, 3000); // the skew stays; the slot is left alone this long
        fault.magnitude = between(-1000, 1000);
        break;
      case 'step-clock-scheduler':
      case 'step-clock-worker':
        // As large as production sees (an NTP daemon down for a day, a VM resumed): 3-30 s, for 10 s.
        fault.durationMs = 10_000;
        fault.magnitude = (draw < 0.5 ? -1 : 1) * between(3000, 30_000);
        break;
      case 'partition-scheduler':
      case 'partition-worker':
        fault.durationMs = between(5000, 7000);
        break;
      case 'partition-schedulers':
        fault.durationMs = between(5000, 7000);
        fault.magnitude = between(0, 2000);
        break;
      case 'latency':
        fault.durationMs = between(1000, 8000);
        fault.magnitude = between(20, 250);
        break;
      case 'latency-lock-node':
        fault.durationMs = 5000;
        fault.magnitude = 300;
        break;
      case 'reset-links':
        fault.durationMs = between(200, 1500);
        break;
      case 'kill-lock-nodes': {
        fault.magnitude = between(1, 2);
        fault.restart = draw < 0.4 ? 'aof' : draw < 0.75 ? 'empty' : 'at-once';
        // Without its data a node may rejoin only after every lease it held has lapsed (Redlock's delayed restart).
        // Empty: down longer than a lease TTL plus the late-tick window, as the manifests' delayed restart keeps one.
        fault.durationMs =
          fault.restart === 'aof'
            ? between(1000, 6000)
            : fault.restart === 'empty'
              ? between(ttl + LATE_TICK_WINDOW_MS + 1000, ttl + LATE_TICK_WINDOW_MS + 3000)
              : 0;
        break;
      }
      case 'pause-lock-nodes':
        fault.durationMs = between(4000, 7000);
        fault.magnitude = between(1, 2);
        break;
      case 'kill-queue-redis':
        // Down this long, then back from its AOF (appendfsync always: nothing acknowledged is lost), or empty.
        fault.restart = draw < 0.5 ? 'aof' : 'empty';
        fault.durationMs = fault.restart === 'aof' ? between(1000, 6000) : between(1000, 3000);
        break;
      case 'pause-queue-redis':
        fault.durationMs = between(1000, 5000);
        break;
      case 'latency-queue-redis':
        fault.durationMs = between(2000, 8000);
        // Each way, on every process's link: a busy queue Redis, not a broken one.
        fault.magnitude = between(10, 60);
        break;
      case 'partition-queue':
        fault.durationMs = between(2000, 8000);
        break;
    }
    // An empty lock node must stay away longer than the lease TTL, even past the end of the run.
    if (!(kind === 'kill-lock-nodes' && fault.restart === 'empty'))
      fault.durationMs = Math.min(fault.durationMs, options.durationMs - atMs + 1000);
    plan.push(fault);
  }
  const lateAfter = options.lateRestartAfterMs ?? LATE_RESTART_AFTER_MS;
  for (const [i, tickAtMs] of (options.longTicksAtMs ?? []).entries()) {
    const atMs = tickAtMs + lateAfter;
    if (atMs < options.durationMs)
      plan.push({ atMs, kind: 'late-restart-scheduler', durationMs: 1000, target: i, magnitude: 0 });
  }
  return plan.sort((a, b) => a.atMs - b.atMs);
}

/** How long a restart of every replica waits at most for their other faults to heal, ms: longer than any replica fault lasts. */
const ALL_REPLICAS_WAIT_MS = 12_000;
/** How long the replicas take to start again, at most, ms. */
const REPLICAS_START_MS = 3_000;
/** How often a restart of every replica looks for the replicas it waits for, ms. */
const CLAIM_POLL_MS = 100;

/**
 * The restarts of every replica at once (`restart-all-schedulers`), from the seed: the first
 * 15-35 s into the run, then one every 30-60 s, each stopping them all (SIGTERM or SIGKILL, even
 * odds) for 2-5 s. Planned apart from `planFaults`, from a stream of its own, so that the drawn
 * plan of a seed stays as it is. Each is kept clear of the long schedule's ticks (they must run)
 * and of their late restarts (which need a replica to restart), its wait for the replicas included.
 */
export function planReplicaRestarts(options: PlanOptions): PlannedFault[] {
  const random = seededRandom(options.seed ^ 0x5bd1e995);
  const between = (min: number, max: number): number => Math.round(min + random() * (max - min));
  const lateAfter = options.lateRestartAfterMs ?? LATE_RESTART_AFTER_MS;
  const keepClear = (options.longTicksAtMs ?? []).flatMap((tickAtMs) => [
    { fromMs: tickAtMs - 2000, toMs: tickAtMs + 5000 },
    { fromMs: tickAtMs + lateAfter - 1000, toMs: tickAtMs + lateAfter + 4000 },
  ]);
  const plan: PlannedFault[] = [];
  for (let atMs = between(15_000, 35_000); ; atMs += between(30_000, 60_000)) {
    const durationMs = between(2000, 5000);
    const signal = random() < 0.5 ? 'SIGTERM' : 'SIGKILL';
    const spanMs = ALL_REPLICAS_WAIT_MS + durationMs + REPLICAS_START_MS;
    for (let clash = clashOf(keepClear, atMs, spanMs); clash; clash = clashOf(keepClear, atMs, spanMs))
      atMs = clash.toMs + 1;
    if (atMs >= options.durationMs) return plan;
    plan.push({ atMs, kind: 'restart-all-schedulers', durationMs, target: 0, magnitude: 0, signal });
  }
}

/** The first window that [atMs, atMs + spanMs] meets, if any. */
function clashOf(
  windows: readonly { fromMs: number; toMs: number }[],
  atMs: number,
  spanMs: number,
): { fromMs: number; toMs: number } | undefined {
  return windows.find((window) => atMs <= window.toMs && atMs + spanMs >= window.fromMs);
}

/** What happened to one planned fault. */
export interface AppliedFault extends PlannedFault {
  /** The process or lock nodes it hit, or why it was skipped (its target was already faulted). */
  on: string;
  applied: boolean;
}

/** Process slots of the cluster the chaos runs: names are stable across restarts. */
export interface ChaosSlots {
  schedulers: readonly string[];
  workers: readonly string[];
}

export interface ChaosRunnerOptions {
  leaseTtlMs: number;
  /** Per slot, the libfaketime timestamp file its clock follows (clock faults); absent without libfaketime. */
  clockFiles?: ReadonlyMap<string, string>;
  /**
   * Stretches of the run (offsets from its start) that no worker fault may touch: around the long
   * schedule's ticks, so that they run and a late restart can show whether a replica runs one again.
   */
  workersSpared?: readonly { fromMs: number; toMs: number }[];
  log: (line: string) => void;
}

/**
 * What one process slot's links suffer now; the proxies are set from this (`#applyLinks` for the
 * lock links, `#applyQueueLink` for its link to the queue Redis).
 */
interface LinkState {
  cut: Set<number>;
  resetting: boolean;
  latencyMs: number;
  /** Cut from the queue Redis (`partition-queue`). */
  queueCut: boolean;
}

/**
 * Applies a fault plan to a running cluster and heals every fault after its
 * duration, while tracking when no scheduler replica could decide a tick (no
 * replica alive and running, or none reaching a lock majority): misses inside
 * those windows are allowed by design, all others fail the run.
 *
 * Rules that keep the faults those the system must survive: at most a
 * minority of the lock nodes is faulted (killed, paused or slowed) at once;
 * at most one worker is faulted at once (the other one is healthy); a slot
 * already faulted is left alone (the fault is skipped, and listed as such);
 * `partition-schedulers` needs all three replicas unfaulted and keeps the
 * third one healthy while it lasts; `restart-all-schedulers` claims every
 * replica as its other fault heals (ALL_REPLICAS_WAIT_MS at most, skipped
 * past that) and no other fault touches them until all are back; no worker
 * fault touches the stretches around the long schedule's ticks
 * (`workersSpared`); the queue Redis is killed or paused by one fault at a
 * time, and slowed by one at a time (either may overlap process faults).
 */
export class ChaosRunner {
  readonly applied: AppliedFault[] = [];
  readonly #cluster: Cluster;
  readonly #slots: ChaosSlots;
  readonly #options: ChaosRunnerOptions;
  readonly #busy = new Set<string>();
  readonly #paused = new Set<string>();
  readonly #down = new Set<string>();
  /** Scheduler slots' clock offsets that stay (skew), ms. */
  readonly #clockBase = new Map<string, number>();
  readonly #links = new Map<string, LinkState>();
  /** Lock nodes killed or paused (unreachable for everyone). */
  readonly #nodesDown = new Set<number>();
  /** Lock nodes slowed for everyone: node -> ms. */
  readonly #nodesSlow = new Map<number, number>();
  /** The queue Redis killed or paused (`kill-queue-redis`, `pause-queue-redis`): one such fault at a time. */
  #queueDown = false;
  /** When it was (toMs infinite while it is): outage windows name one cause each, and no replica running comes first. */
  readonly #queueDownTimes: { fromMs: number; toMs: number }[] = [];
  /** The queue Redis slowed for everyone (`latency-queue-redis`), ms; 0 when not. */
  #queueSlowMs = 0;
  /** The last such slowing, and when it ended (infinite while it lasts). */
  #lastQueueSlow = { ms: 0, untilMs: -Infinity };
  readonly #outages: OutageWindow[] = [];
  #openOutage: OutageWindow | undefined;
  /** Workers killed, paused or cut from the queue Redis, with when (toMs set once healed). */
  readonly workerFaults: WorkerFaultWindow[] = [];
  /** When the queue Redis came back empty (its data lost), ms. */
  readonly queueWipesMs: number[] = [];
  /**
   * Faults that threw while being applied or healed: what the runner records may then be wrong (a
   * queue Redis that did not come back would stay an outage to the end), so each fails the run.
   */
  readonly errors: string[] = [];

  constructor(cluster: Cluster, slots: ChaosSlots, options: ChaosRunnerOptions) {
    this.#cluster = cluster;
    this.#slots = slots;
    this.#options = options;
  }

  get outages(): OutageWindow[] {
    return [...this.#outages, ...(this.#openOutage ? [this.#openOutage] : [])];
  }

  /** Whether the queue Redis was killed or paused at any time in [fromMs, toMs]. */
  queueDownBetween(fromMs: number, toMs: number): boolean {
    return this.#queueDownTimes.some((down) => down.fromMs <= toMs && down.toMs >= fromMs);
  }

  /** Runs the plan from `startMs` (wall clock); resolves once every fault is healed. */
  async run(plan: readonly PlannedFault[], startMs: number): Promise<void> {
    const heals: Promise<void>[] = [];
    for (const fault of plan) {
      await sleep(Math.max(0, startMs + fault.atMs - Date.now()));
      heals.push(
        this.#apply(fault, startMs).catch((error: unknown) => {
          const message = `fault ${fault.kind} at +${(fault.atMs / 1000).toFixed(1)}s failed: ${(error as Error).message}`;
          this.errors.push(message);
          this.#options.log(message);
        }),
      );
    }
    await Promise.all(heals);
  }

  async #apply(fault: PlannedFault, startMs: number): Promise<void> {
    const record: AppliedFault = { ...fault, on: '', applied: false };
    this.applied.push(record);
    const stamp = `+${((Date.now() - startMs) / 1000).toFixed(1)}s`;
    const heal = await this.#inject(fault, record);
    const detail =
      fault.kind === 'kill-lock-nodes' || fault.kind === 'kill-queue-redis'
        ? ` (restart ${fault.restart ?? 'aof'})`
        : fault.magnitude && record.applied
          ? ` (${fault.magnitude})`
          : '';
    this.#options.log(
      `${stamp} ${fault.kind} ${record.on}${record.applied ? ` for ${(fault.durationMs / 1000).toFixed(1)}s${detail}` : ''}`,
    );
    if (!heal) return;
    await sleep(fault.durationMs);
    await heal();
  }

  #link(slot: string): Promise<ClientLink> {
    return this.#cluster.locks.link(slot);
  }

  #linkState(slot: string): LinkState {
    let state = this.#links.get(slot);
    if (!state) this.#links.set(slot, (state = { cut: new Set(), resetting: false, latencyMs: 0, queueCut: false }));
    return state;
  }

  /** Sets the queue Redis link of `slot` from its state and the queue-wide latency: cut > latency. */
  async #applyQueueLink(slot: string): Promise<void> {
    const link = await this.#cluster.queue.link(slot);
    const state = this.#linkState(slot);
    link.setFault(
      0,
      state.queueCut
        ? { kind: 'blackhole' }
        : this.#queueSlowMs > 0
          ? { kind: 'latency', ms: this.#queueSlowMs }
          : { kind: 'none' },
    );
  }

  /** Sets every lock link of `slot` from its state and the node-wide faults: cut > reset > the larger latency. */
  async #applyLinks(slot: string): Promise<void> {
    const link = await this.#link(slot);
    const state = this.#linkState(slot);
    for (let node = 0; node < this.#cluster.locks.nodes.length; node++) {
      const latencyMs = Math.max(state.latencyMs, this.#nodesSlow.get(node) ?? 0);
      const fault: Fault = state.cut.has(node)
        ? { kind: 'blackhole' }
        : state.resetting
          ? { kind: 'reset' }
          : latencyMs > 0
            ? { kind: 'latency', ms: latencyMs }
            : { kind: 'none' };
      link.setFault(node, fault);
    }
  }

  #allSlots(): string[] {
    return [...this.#slots.schedulers, ...this.#slots.workers];
  }

  /** A worker slot may be faulted only while every other worker is unfaulted. */
  #workerFree(slot: string): boolean {
    return !this.#busy.has(slot) && this.#slots.workers.every((worker) => worker === slot || !this.#busy.has(worker));
  }

  /** Injects the fault; returns how to heal it, or undefined when its target was busy. */
  async #inject(fault: PlannedFault, record: AppliedFault): Promise<(() => Promise<void>) | undefined> {
    switch (fault.kind) {
      case 'kill-lock-nodes':
      case 'pause-lock-nodes':
      case 'latency-lock-node':
        return this.#lockNodeFault(fault, record);
      case 'partition-schedulers':
        return this.#partitionTwo(fault, record);
      case 'kill-queue-redis':
      case 'pause-queue-redis':
        return this.#queueRedisFault(fault, record);
      case 'latency-queue-redis':
        return this.#queueLatency(fault, record);
      case 'restart-all-schedulers':
        return this.#restartAllSchedulers(fault, record);
      case 'latency':
      case 'reset-links':
      case 'partition-queue': {
        const slots = this.#allSlots();
        return this.#processFault(fault, record, slots[fault.target % slots.length] ?? '');
      }
      case 'late-restart-scheduler': {
        // It must happen: the first unfaulted replica from the target on.
        const { schedulers } = this.#slots;
        const free = Array.from(
          { length: schedulers.length },
          (_, i) => schedulers[(fault.target + i) % schedulers.length] ?? '',
        ).find((slot) => !this.#busy.has(slot));
        return this.#processFault(fault, record, free ?? schedulers[fault.target % schedulers.length] ?? '');
      }
      default: {
        const slots = fault.kind.endsWith('worker') ? this.#slots.workers : this.#slots.schedulers;
        return this.#processFault(fault, record, slots[fault.target % slots.length] ?? '');
      }
    }
  }

  async #processFault(
    fault: PlannedFault,
    record: AppliedFault,
    slot: string,
  ): Promise<(() => Promise<void>) | undefined> {
    const role: AppRole = this.#slots.workers.includes(slot) ? 'worker' : 'scheduler';
    record.on = slot;
    if (
      role === 'worker' &&
      (this.#options.workersSpared ?? []).some(
        (spared) => fault.atMs <= spared.toMs && fault.atMs + fault.durationMs >= spared.fromMs,
      )
    ) {
      record.on = `${slot} (skipped: workers are spared around the long schedule's tick)`;
      return undefined;
    }
    if (role === 'worker' ? !this.#workerFree(slot) : this.#busy.has(slot)) {
      record.on = `${slot} (skipped: ${this.#busy.has(slot) ? 'already faulted' : 'the other worker is faulted'})`;
      return undefined;
    }
    const clockFile = this.#options.clockFiles?.get(slot);
    if (CLOCK_KINDS.includes(fault.kind) && clockFile === undefined) {
      record.on = `${slot} (skipped: no libfaketime)`;
      return undefined;
    }
    this.#busy.add(slot);
    record.applied = true;
    const release = (): void => {
      this.#busy.delete(slot);
      this.#update();
    };
    const start = (): Promise<unknown> => this.#start(role, slot);
    switch (fault.kind) {
      case 'kill-scheduler':
      case 'kill-worker':
      case 'late-restart-scheduler': {
        this.#down.add(slot);
        this.#update();
        const window = this.#workerFault(role, slot, 'kill');
        await this.#cluster.stopApp(slot, 'SIGKILL');
        return async () => {
          await start();
          this.#down.delete(slot);
          if (window) window.toMs = Date.now();
          release();
        };
      }
      case 'pause-scheduler':
      case 'pause-worker': {
        const app = this.#cluster.app(slot);
        this.#paused.add(slot);
        this.#update();
        const window = this.#workerFault(role, slot, 'pause');
        app.process.signal('SIGSTOP');
        return async () => {
          app.process.signal('SIGCONT');
          if (window) window.toMs = Date.now();
          this.#paused.delete(slot);
          release();
        };
      }
      case 'skew-scheduler':
        // A graceful restart with the wall clock shifted: the replica keeps the skew.
        this.#down.add(slot);
        this.#update();
        await this.#cluster.stopApp(slot, 'SIGTERM');
        this.#clockBase.set(slot, fault.magnitude);
        writeClockOffset(clockFile as string, fault.magnitude);
        await start();
        this.#down.delete(slot);
        this.#update();
        return async () => release();
      case 'step-clock-scheduler':
      case 'step-clock-worker': {
        // The live process's wall clock steps by `magnitude` (forward or back), and back when healed.
        const base = this.#clockBase.get(slot) ?? 0;
        writeClockOffset(clockFile as string, base + fault.magnitude);
        return async () => {
          writeClockOffset(clockFile as string, this.#clockBase.get(slot) ?? 0);
          release();
        };
      }
      case 'latency': {
        const state = this.#linkState(slot);
        state.latencyMs = fault.magnitude;
        await this.#applyLinks(slot);
        return async () => {
          state.latencyMs = 0;
          await this.#applyLinks(slot);
          release();
        };
      }
      case 'reset-links': {
        // Every open connection to every lock node is reset, and new ones too until healed.
        const state = this.#linkState(slot);
        state.resetting = true;
        this.#update();
        await this.#applyLinks(slot);
        return async () => {
          state.resetting = false;
          await this.#applyLinks(slot);
          release();
        };
      }
      case 'partition-scheduler':
      case 'partition-worker': {
        // Cut from a majority of the lock nodes, while still reaching the queue Redis.
        const cut = this.#majority(fault.target);
        record.on = `${slot} from nodes ${[...cut].join(',')}`;
        return this.#cut(slot, cut, release);
      }
      case 'partition-queue': {
        // Cut from the queue Redis (blackholed: its commands wait and land when healed), still reaching every lock node.
        record.on = `${slot} from the queue Redis`;
        const state = this.#linkState(slot);
        state.queueCut = true;
        this.#update();
        // A worker cut from the queue Redis holds the jobs it took as a paused one does: they wait for it or for the stall check.
        const window = this.#workerFault(role, slot, 'queue-cut');
        await this.#applyQueueLink(slot);
        return async () => {
          state.queueCut = false;
          await this.#applyQueueLink(slot);
          if (window) window.toMs = Date.now();
          release();
        };
      }
      default:
        throw new Error(`not a process fault: ${fault.kind}`);
    }
  }

  /** Starts a slot's process again (on its libfaketime clock file, when it has one). */
  #start(role: AppRole, slot: string): Promise<unknown> {
    const clockFile = this.#options.clockFiles?.get(slot);
    return this.#cluster.startApp(role, slot, clockFile === undefined ? {} : { clockFile });
  }

  /**
   * Every replica stopped at once (`signal`) and started again after `durationMs`: none runs
   * meanwhile (a `no-replica` outage, closed as the first is back), and the `catchUp` schedules take
   * up the ticks missed. Each replica is claimed first, once its other fault has healed.
   */
  async #restartAllSchedulers(fault: PlannedFault, record: AppliedFault): Promise<(() => Promise<void>) | undefined> {
    const { schedulers } = this.#slots;
    const waitedMs = await this.#claimAll(schedulers);
    if (waitedMs === undefined) {
      record.on = `schedulers (skipped: their faults did not heal within ${ALL_REPLICAS_WAIT_MS / 1000} s)`;
      return undefined;
    }
    const signal = fault.signal ?? 'SIGKILL';
    record.applied = true;
    record.on = `${schedulers.join(', ')} (${signal}${waitedMs > 0 ? `, after ${(waitedMs / 1000).toFixed(1)} s waiting for their faults to heal` : ''})`;
    for (const slot of schedulers) this.#down.add(slot);
    this.#update();
    await Promise.all(schedulers.map((slot) => this.#cluster.stopApp(slot, signal)));
    return async () => {
      await Promise.all(
        schedulers.map(async (slot) => {
          await this.#start('scheduler', slot);
          this.#down.delete(slot);
          this.#busy.delete(slot);
          this.#update();
        }),
      );
    };
  }

  /**
   * Claims every slot (marks it busy) as soon as it is free, so that no other fault takes it
   * meanwhile. Resolves with how long that took, or undefined once ALL_REPLICAS_WAIT_MS has passed
   * (the slots claimed are released).
   */
  async #claimAll(slots: readonly string[]): Promise<number | undefined> {
    const fromMs = Date.now();
    const claimed = new Set<string>();
    for (;;) {
      for (const slot of slots.filter((slot) => !this.#busy.has(slot))) {
        this.#busy.add(slot);
        claimed.add(slot);
      }
      if (claimed.size === slots.length) return Date.now() - fromMs;
      if (Date.now() - fromMs >= ALL_REPLICAS_WAIT_MS) {
        for (const slot of claimed) this.#busy.delete(slot);
        return undefined;
      }
      await sleep(CLAIM_POLL_MS);
    }
  }

  /** Opens a worker fault window (a worker's kill or pause; the report reads it); undefined for a scheduler. */
  #workerFault(role: AppRole, worker: string, kind: WorkerFaultWindow['kind']): WorkerFaultWindow | undefined {
    if (role !== 'worker') return undefined;
    const window = { worker, kind, fromMs: Date.now(), toMs: Number.POSITIVE_INFINITY };
    this.workerFaults.push(window);
    return window;
  }

  /** A majority of the lock nodes, from `first` on (modulo the count). */
  #majority(first: number): Set<number> {
    const count = this.#cluster.locks.nodes.length;
    return new Set(Array.from({ length: Math.floor(count / 2) + 1 }, (_, i) => (first + i) % count));
  }

  async #cut(slot: string, cut: Set<number>, release: () => void): Promise<() => Promise<void>> {
    const state = this.#linkState(slot);
    state.cut = cut;
    this.#update();
    await this.#applyLinks(slot);
    return async () => {
      state.cut = new Set();
      await this.#applyLinks(slot);
      release();
    };
  }

  /**
   * Two replicas cut at once, each from a different majority (the second cut
   * `magnitude` ms after the first), while the third stays healthy: only it can
   * decide ticks, and both others hold claims on the nodes they reach.
   */
  async #partitionTwo(fault: PlannedFault, record: AppliedFault): Promise<(() => Promise<void>) | undefined> {
    const { schedulers } = this.#slots;
    if (schedulers.some((slot) => this.#busy.has(slot))) {
      record.on = 'schedulers (skipped: one is already faulted)';
      return undefined;
    }
    const count = this.#cluster.locks.nodes.length;
    const first = schedulers[fault.target % schedulers.length] ?? '';
    const second = schedulers[(fault.target + 1) % schedulers.length] ?? '';
    const third = schedulers[(fault.target + 2) % schedulers.length] ?? '';
    const quorum = Math.floor(count / 2) + 1;
    const firstCut = this.#majority(fault.target % count);
    const secondCut = this.#majority((fault.target + quorum - 1) % count);
    for (const slot of schedulers) this.#busy.add(slot); // the third is kept healthy
    record.applied = true;
    record.on = `${first} from nodes ${[...firstCut].join(',')}, then ${second} from nodes ${[...secondCut].join(',')} (${third} healthy)`;
    let released = 0;
    const release = (): void => {
      if (++released < 2) return;
      for (const slot of schedulers) this.#busy.delete(slot);
      this.#update();
    };
    const healFirst = await this.#cut(first, firstCut, release);
    await sleep(fault.magnitude);
    const healSecond = await this.#cut(second, secondCut, release);
    return async () => {
      await healFirst();
      await sleep(fault.magnitude); // each cut lasts `durationMs` plus `magnitude`
      await healSecond();
    };
  }

  async #lockNodeFault(fault: PlannedFault, record: AppliedFault): Promise<(() => Promise<void>) | undefined> {
    const count = this.#cluster.locks.nodes.length;
    // At most a minority of the nodes is faulted at any time: the faults the system must survive.
    const faulted = new Set([...this.#nodesDown, ...this.#nodesSlow.keys()]);
    const budget = Math.floor((count - 1) / 2) - faulted.size;
    const wanted = fault.kind === 'latency-lock-node' ? 1 : fault.magnitude;
    const nodes = Array.from({ length: count }, (_, i) => (fault.target + i) % count)
      .filter((node) => !faulted.has(node))
      .slice(0, Math.min(wanted, budget));
    if (nodes.length === 0) {
      record.on = 'lock nodes (skipped: a minority is already faulted)';
      return undefined;
    }
    record.applied = true;
    record.on = `lock node${nodes.length > 1 ? 's' : ''} ${nodes.join(',')}`;
    const locks = this.#cluster.locks;
    if (fault.kind === 'latency-lock-node') {
      // Slow for every process: its links to these nodes.
      for (const node of nodes) this.#nodesSlow.set(node, fault.magnitude);
      await Promise.all(this.#allSlots().map((slot) => this.#applyLinks(slot)));
      return async () => {
        for (const node of nodes) this.#nodesSlow.delete(node);
        await Promise.all(this.#allSlots().map((slot) => this.#applyLinks(slot)));
      };
    }
    for (const node of nodes) this.#nodesDown.add(node);
    this.#update();
    if (fault.kind === 'pause-lock-nodes') {
      await Promise.all(nodes.map((node) => locks.node(node).pause()));
      return async () => {
        await Promise.all(nodes.map((node) => locks.node(node).resume()));
        for (const node of nodes) this.#nodesDown.delete(node);
        this.#update();
      };
    }
    await Promise.all(nodes.map((node) => locks.node(node).kill()));
    const restart = async (): Promise<void> => {
      await Promise.all(nodes.map((node) => locks.node(node).restart({ keepData: fault.restart !== 'empty' })));
      for (const node of nodes) this.#nodesDown.delete(node);
      this.#update();
    };
    if (fault.restart === 'at-once') {
      await restart();
      return undefined;
    }
    return restart;
  }

  /**
   * The queue Redis killed or paused (one such fault at a time): every process loses it. Killed,
   * it comes back from its AOF or empty (`restart`); paused, it is continued.
   */
  async #queueRedisFault(fault: PlannedFault, record: AppliedFault): Promise<(() => Promise<void>) | undefined> {
    if (this.#queueDown) {
      record.on = 'queue Redis (skipped: already killed or paused)';
      return undefined;
    }
    record.applied = true;
    record.on = 'queue Redis';
    const node = this.#cluster.queue.node(0);
    const down = { fromMs: Date.now(), toMs: Number.POSITIVE_INFINITY };
    this.#queueDownTimes.push(down);
    this.#queueDown = true;
    this.#update();
    const back = (): void => {
      down.toMs = Date.now();
      this.#queueDown = false;
      this.#update();
    };
    if (fault.kind === 'pause-queue-redis') {
      await node.pause();
      return async () => {
        await node.resume();
        back();
      };
    }
    await node.kill();
    return async () => {
      await node.restart({ keepData: fault.restart !== 'empty' });
      if (fault.restart === 'empty') this.queueWipesMs.push(Date.now());
      back();
    };
  }

  /** The queue Redis slowed for every process (their queue links), one such fault at a time. */
  async #queueLatency(fault: PlannedFault, record: AppliedFault): Promise<(() => Promise<void>) | undefined> {
    if (this.#queueSlowMs > 0) {
      record.on = 'queue Redis (skipped: already slowed)';
      return undefined;
    }
    record.applied = true;
    record.on = 'queue Redis, for every process';
    this.#queueSlowMs = fault.magnitude;
    this.#lastQueueSlow = { ms: fault.magnitude, untilMs: Infinity };
    await Promise.all(this.#allSlots().map((slot) => this.#applyQueueLink(slot)));
    return async () => {
      this.#queueSlowMs = 0;
      this.#lastQueueSlow = { ms: fault.magnitude, untilMs: Date.now() };
      await Promise.all(this.#allSlots().map((slot) => this.#applyQueueLink(slot)));
    };
  }

  /**
   * Opens or closes an outage window when the set of replicas able to decide a tick (running,
   * reaching a lock majority and the queue Redis) becomes empty or not. A window whose cause
   * changes is closed and the next one opened at once, so that each names its cause.
   */
  #update(): void {
    const quorum = Math.floor(this.#cluster.locks.nodes.length / 2) + 1;
    const running = this.#slots.schedulers.filter((slot) => !this.#down.has(slot) && !this.#paused.has(slot));
    const reachingLocks = running.filter((slot) => {
      const state = this.#links.get(slot);
      if (state?.resetting) return false;
      const reachable = this.#cluster.locks.nodes.filter(
        (_, node) => !state?.cut.has(node) && !this.#nodesDown.has(node),
      ).length;
      return reachable >= quorum;
    });
    const deciding = this.#queueDown ? [] : reachingLocks.filter((slot) => !this.#links.get(slot)?.queueCut);
    const now = Date.now();
    const reason: OutageWindow['reason'] | undefined =
      deciding.length > 0
        ? undefined
        : running.length === 0
          ? 'no-replica'
          : this.#queueDown
            ? 'queue-redis-down'
            : reachingLocks.length === 0
              ? 'no-lock-majority'
              : 'queue-redis-unreachable';
    if (this.#openOutage && this.#openOutage.reason !== reason) {
      this.#outages.push({ ...this.#openOutage, toMs: now });
      this.#openOutage = undefined;
    }
    // A tick due just before the queue Redis went down may still have been starting: slower if it was slowed then.
    const slow = this.#lastQueueSlow;
    const inFlight =
      reason === 'queue-redis-down' && slow.ms > 0 && now - slow.untilMs <= queueInFlightMs(slow.ms)
        ? { inFlightMs: queueInFlightMs(slow.ms) }
        : {};
    if (reason !== undefined) this.#openOutage ??= { fromMs: now, toMs: now, reason, ...inFlight };
  }
}
