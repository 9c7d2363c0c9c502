import type { Clock } from './clock.ts';

/** The lock nodes' time at one monotonic instant: the median of a quorum of nodes' TIME (Redlock.nodeTime). */
export interface NodeTime {
  /** The nodes' wall time, microseconds since the Unix epoch, at `atMono`. */
  micros: number;
  /** The instant, on the monotonic clock of the process that asked. */
  atMono: number;
  /** The slowest round trip among the answers counted, ms: the estimate is off by at most half of it. */
  roundTripMs: number;
}

/** What a ReferenceClock reads the lock nodes' time from (a Redlock). */
export interface NodeTimeSource {
  nodeTime(): Promise<NodeTime | undefined>;
}

/**
 * One node's TIME reply, taken back to the moment the call was sent: its time minus half the
 * round trip (the reply was read at the middle of it, give or take half the round trip).
 */
export function timeAtSend(reply: unknown, roundTripMs: number): { micros: number; roundTripMs: number } {
  const [seconds, micros] = reply as [string, string];
  return { micros: Number(seconds) * 1_000_000 + Number(micros) - roundTripMs * 500, roundTripMs };
}

/** The median of a non-empty list (the lower middle of an even one: a value some node gave). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] as number;
}

/** How far the monotonic clock may drift from the lock nodes' clocks per ms of an anchor's age: 1,000 ppm, far above a crystal's. */
export const DRIFT_PER_MS = 0.001;

/**
 * Whether a new sample replaces the anchor: its error (half its round trip) is no larger than the
 * anchor's, grown with the anchor's age by DRIFT_PER_MS. A sample slowed by a loaded node or link
 * (a round trip of seconds) would otherwise move the clock by up to half of it.
 */
export function betterAnchor(current: NodeTime | undefined, next: NodeTime): boolean {
  if (current === undefined) return true;
  return next.roundTripMs / 2 <= current.roundTripMs / 2 + (next.atMono - current.atMono) * DRIFT_PER_MS;
}

/**
 * Wall time from the lock nodes, not from this host: each sample of the nodes' time is an
 * anchor, and between samples the time moves on the monotonic clock. A host clock stepped or
 * drifting (NTP down for a day, a VM resumed from a snapshot) changes nothing a process decides on
 * this clock; `offsetMs` says how far the host's clock is off. Before a first sample (no quorum
 * answered yet) it is the host's clock. Timers and monotonic time are the base clock's.
 */
export class ReferenceClock implements Clock {
  readonly #nodes: NodeTimeSource;
  readonly #base: Clock;
  #anchor: NodeTime | undefined;
  #timer: unknown;
  #running = false;

  constructor(nodes: NodeTimeSource, base: Clock) {
    this.#nodes = nodes;
    this.#base = base;
  }

  now(): number {
    return this.#base.now();
  }

  wallMicros(): number {
    const anchor = this.#anchor;
    return anchor ? Math.floor(anchor.micros + (this.#base.now() - anchor.atMono) * 1000) : this.#base.wallMicros();
  }

  setTimeout(callback: () => void, ms: number): unknown {
    return this.#base.setTimeout(callback, ms);
  }

  clearTimeout(handle: unknown): void {
    this.#base.clearTimeout(handle);
  }

  /** Whether a sample of the nodes' time was taken: until then this clock is the host's. */
  get anchored(): boolean {
    return this.#anchor !== undefined;
  }

  /** How far the host's wall clock is off the lock nodes' time, ms (positive: ahead); undefined before a first sample. */
  get offsetMs(): number | undefined {
    return this.#anchor ? (this.#base.wallMicros() - this.wallMicros()) / 1000 : undefined;
  }

  /** Reads the nodes' time once and keeps it if it is a better anchor (betterAnchor); false (the anchor kept) when no quorum answered. */
  async sample(): Promise<boolean> {
    const time = await this.#nodes.nodeTime().catch(() => undefined);
    if (time === undefined) return false;
    if (betterAnchor(this.#anchor, time)) this.#anchor = time;
    return true;
  }

  /** Samples every `intervalMs` until `stop`, telling `onSample` whether each one read the nodes. */
  start(intervalMs: number, onSample: (sampled: boolean) => void = () => undefined): void {
    this.#running = true;
    const next = (): void => {
      this.#timer = this.#base.setTimeout(() => {
        void this.sample().then((sampled) => {
          if (!this.#running) return;
          onSample(sampled);
          next();
        });
      }, intervalMs);
    };
    next();
  }

  stop(): void {
    this.#running = false;
    this.#base.clearTimeout(this.#timer);
  }
}
