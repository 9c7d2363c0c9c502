import { randomUUID } from 'node:crypto';
import { leaseResource, tickClaim } from '@tickwarden/contracts';
import {
  ClaimAlreadyGrantedError,
  isStartedClaim,
  LockTakenError,
  QuorumUnavailableError,
  type ClaimResult,
  type RedlockError,
} from '@tickwarden/redlock';
import type { Logger } from 'pino';
import type { ClaimGrants, LockQuorum, PauseRecord, ReplicaStore, Tick } from './ports.ts';
import { retentionFrom } from './tick-window.ts';

/** Contest settings: quick retries for claims split among replicas. */
const CONTEST = Object.freeze({ retryCount: 4, retryDelayMs: 15, retryJitterMs: 30 });

/** While this replica is cut from a lock quorum, it probes the nodes at most this often before contesting again, ms. */
export const QUORUM_PROBE_INTERVAL_MS = 500;

/**
 * Whether a failed acquire shows the replica cut from a lock quorum: more nodes did not answer
 * (an error instead of a vote) than a quorum can spare. Its contests would only leave claims on
 * the nodes it reaches, and claims split between such replicas and a healthy one let no value
 * reach a quorum: the tick could never be granted.
 */
export function cutFromQuorum(error: RedlockError, nodeCount: number, quorum: number): boolean {
  let silent = 0;
  for (const cause of error.nodeCauses.values()) if (cause instanceof Error) silent++;
  return silent > nodeCount - quorum;
}

/**
 * Per-node timeout of a tick contest: a tenth of the lease TTL (100 ms to 2 s), plus time for big
 * batches, which a node runs one script after the other. A generous timeout costs little: the
 * contest settles as soon as a quorum answered, so only a hung node is waited for.
 */
export function contestNodeTimeoutMs(leaseTtlMs: number, batchSize: number): number {
  return Math.min(Math.max(leaseTtlMs / 10, 100), 2000) + Math.ceil(batchSize / 20);
}

/**
 * The clock skew tolerated between a replica and the queue Redis: a replica whose clock is off by
 * more withdraws from the contests (Contenders).
 */
export const CLOCK_SKEW_TOLERANCE_MS = 1000;

/**
 * Why a contest did not win: another replica's claim (granted, or split with this one's), a claim
 * a job of the tick has started (a worker's start: the tick ran, or runs), or no quorum.
 */
export type ContestLoss = 'lost-race' | 'started' | 'unavailable';

/** Whether a failed contest found the tick's claim started on some node (see ContestLoss). */
function claimStarted(error: RedlockError): boolean {
  if (error instanceof ClaimAlreadyGrantedError) return isStartedClaim(error.holder);
  if (!(error instanceof LockTakenError || error instanceof QuorumUnavailableError)) return false;
  for (const value of error.claimHolders.keys()) if (isStartedClaim(value)) return true;
  return false;
}

/** Reads a failed contest (see ContestLoss): a claim another value holds on some node is a lost race, even beside silent nodes. */
export function contestLoss(error: RedlockError): ContestLoss {
  if (claimStarted(error)) return 'started';
  if (error instanceof ClaimAlreadyGrantedError) return 'lost-race';
  if (!(error instanceof LockTakenError || error instanceof QuorumUnavailableError)) return 'unavailable';
  return [...error.nodeCauses.values()].includes('claimed') ? 'lost-race' : 'unavailable';
}

/**
 * The value a recovery contests a tick again with, taking its claim over: the one a quorum granted
 * the claim to, else - a split left by contenders that failed or died mid-contest, which no fresh
 * value can win while their parts hold - the one on more nodes than any other. Not on a tie: a
 * failed takeover keeps the claims it recorded, so taking over a contender's part still in flight
 * (its attempt releases it at once) would fix a split for good; the next look decides. Safe: each
 * node keeps one value per claim, so at most one value ever holds it on a quorum. Undefined when
 * no value stands out, and when a job of the tick started on some node: it must not run again.
 */
export function claimTakeover(error: RedlockError): string | undefined {
  if (claimStarted(error)) return undefined;
  if (error instanceof ClaimAlreadyGrantedError) return error.holder;
  if (!(error instanceof LockTakenError || error instanceof QuorumUnavailableError)) return undefined;
  let best: string | undefined;
  let most = 0;
  let tied = false;
  for (const [value, count] of error.claimHolders) {
    if (count > most) [best, most, tied] = [value, count, false];
    else if (count === most) tied = true;
  }
  return tied ? undefined : best;
}

/** The pauses known before that the store no longer has (it lost its data): to write back. */
export function pausesLost(
  known: ReadonlyMap<string, PauseRecord>,
  stored: ReadonlyMap<string, PauseRecord>,
): [string, PauseRecord][] {
  return [...known].filter(([id]) => !stored.has(id));
}

/** One tick's contest result. */
export interface Contested<T extends Tick> {
  tick: T;
  result: ClaimResult;
}

export interface TickContestOptions {
  leases: ClaimGrants & LockQuorum;
  store: Pick<ReplicaStore, 'pausedInEpoch' | 'pause'>;
  /** Told when the queue Redis is found to have lost its data. */
  onQueueReset?: (() => void) | undefined;
  logger: Logger;
  /** Wall time, ms. */
  now: () => number;
}

/**
 * Contests ticks: claim-once on the tick, one batch call per lock node, no lock taken (the
 * schedule's lease is the run's, taken by its worker when it starts). Also holds the paused
 * schedules (`tickwarden pause`), read once per contest.
 */
export class TickContest {
  readonly #options: TickContestOptions;
  #paused = new Map<string, PauseRecord>();
  /** The queue Redis's data epoch this replica last read (see refreshPaused). */
  #epoch: string | undefined;
  /** Pauses the queue Redis lost that this replica is writing back (or could not). */
  readonly #restoring = new Map<string, PauseRecord>();
  #writing: Promise<void> | undefined;
  /** The last acquire found this replica cut from a lock quorum: contests wait for a probe that finds one. */
  #cutOff: { unreachable: Map<string, Error>; probedAtMs: number } | undefined;
  #probing: Promise<void> | undefined;

  constructor(options: TickContestOptions) {
    this.#options = options;
  }

  /** The queue Redis's data epoch this replica last read (undefined before a first read). */
  get epoch(): string | undefined {
    return this.#epoch;
  }

  /**
   * Re-reads the paused schedules; if the queue Redis does not answer, the last known set holds,
   * and before any set was read the error is thrown (nothing may be contested as if none were
   * paused). If its data is of another epoch (it lost everything: see `ReplicaStore.pausedInEpoch`),
   * the pauses it lost would silently resume their schedules: they are written back, and it is logged.
   */
  async refreshPaused(): Promise<void> {
    const { store, logger } = this.#options;
    let read: { epoch: string; paused: Map<string, PauseRecord> };
    try {
      read = await store.pausedInEpoch(randomUUID());
    } catch (error) {
      if (this.#epoch === undefined) throw error;
      logger.warn({ err: error }, 'could not read paused schedules: using the last known set');
      return;
    }
    const previous = this.#epoch;
    this.#epoch = read.epoch;
    if (previous !== undefined && previous !== read.epoch) {
      const lost = pausesLost(this.#paused, read.paused);
      this.#options.onQueueReset?.();
      logger.error(
        { previousEpoch: previous, epoch: read.epoch, restoredPauses: lost.map(([id]) => id) },
        'the queue Redis lost its data (its epoch changed): pauses known here are written back; its tick history, open ticks and marks are gone',
      );
      for (const [id, record] of lost)
        this.#restoring.set(id, {
          ...record,
          note: `${record.note} (restored after the queue Redis lost its data)`.trim(),
        });
    }
    // Written back: stored again. Until then they hold here (a read in between would resume them), and a failed write is tried again.
    for (const id of read.paused.keys()) this.#restoring.delete(id);
    this.#paused = new Map([...read.paused, ...this.#restoring]);
    if (this.#restoring.size > 0)
      await (this.#writing ??= this.#writeBack().finally(() => (this.#writing = undefined)));
  }

  async #writeBack(): Promise<void> {
    const { store, logger } = this.#options;
    const pending = [...this.#restoring];
    try {
      await Promise.all(pending.map(([id, record]) => store.pause(id, record)));
      for (const [id, record] of pending) if (this.#restoring.get(id) === record) this.#restoring.delete(id);
    } catch (error) {
      logger.error(
        { err: error, pauses: pending.map(([id]) => id) },
        'could not write back the pauses the queue Redis lost: they hold on this replica, and are tried again',
      );
    }
  }

  /** Whether the last acquire found this replica cut from a lock quorum (until a probe finds one). */
  get cutOff(): boolean {
    return this.#cutOff !== undefined;
  }

  isPaused(tick: Tick): boolean {
    return tick.schedule.paused || this.#paused.has(tick.schedule.id);
  }

  /**
   * Contests the ticks; with `takeOver` (recovery), a tick whose claim another value holds is
   * contested again with that value (see {@link claimTakeover}): the claim is taken over, never a
   * second one won.
   */
  async contest<T extends Tick>(ticks: readonly T[], takeOver = false): Promise<Contested<T>[]> {
    if (ticks.length > 0 && this.#cutOff) await this.#probe(ticks);
    const cutOff = this.#cutOff;
    // Cut from a quorum: no claim is left on the nodes this replica reaches; its ticks fail as unavailable (others decide them).
    if (cutOff) {
      return ticks.map((tick) => {
        const resource = leaseResource(tick.schedule.id, tick.schedule.overlap, tick.tickMs);
        return {
          tick,
          result: {
            resource,
            ok: false,
            error: new QuorumUnavailableError(resource, 'claim', cutOff.unreachable, this.#options.leases.quorum),
          },
        };
      });
    }
    const results = await this.#claim(ticks.map((tick) => ({ tick, value: undefined })));
    this.#noteCutOff(results);
    if (!takeOver) return results;
    const holders = results.flatMap((entry, i) => {
      const value = entry.result.ok ? undefined : claimTakeover(entry.result.error);
      return value === undefined ? [] : [{ i, tick: entry.tick, value }];
    });
    const again = await this.#claim(holders);
    holders.forEach(({ i }, j) => (results[i] = again[j] as Contested<T>));
    return results;
  }

  /** Closes the gate when a failed acquire shows the replica cut from a quorum (see cutFromQuorum). */
  #noteCutOff(results: readonly Contested<Tick>[]): void {
    const { leases, logger, now } = this.#options;
    const failed = results.find(
      ({ result }) => !result.ok && cutFromQuorum(result.error, leases.nodes.length, leases.quorum),
    )?.result;
    if (!failed || failed.ok || this.#cutOff) return;
    const unreachable = new Map(
      [...failed.error.nodeCauses].filter((entry): entry is [string, Error] => entry[1] instanceof Error),
    );
    this.#cutOff = { unreachable, probedAtMs: now() };
    logger.warn(
      { unreachable: [...unreachable.keys()], quorum: leases.quorum },
      'lock quorum unreachable from this replica: not contesting, and leaving recovery to replicas that reach one, until a probe finds one',
    );
  }

  /** Probes the lock nodes (at most every QUORUM_PROBE_INTERVAL_MS, one probe at a time); opens the gate when a quorum answers. */
  async #probe(ticks: readonly Tick[]): Promise<void> {
    const { leases, logger, now } = this.#options;
    const cutOff = this.#cutOff;
    if (!cutOff || now() - cutOff.probedAtMs < QUORUM_PROBE_INTERVAL_MS) return this.#probing;
    cutOff.probedAtMs = now();
    let nodeTimeoutMs = 0;
    for (const tick of ticks)
      nodeTimeoutMs = Math.max(nodeTimeoutMs, contestNodeTimeoutMs(tick.schedule.leaseTtlMs, 1));
    this.#probing ??= leases
      .probe({ nodeTimeoutMs })
      .then((probe) => {
        if (!probe.quorum) return void (cutOff.unreachable = probe.unreachable);
        this.#cutOff = undefined;
        logger.info({ quorum: leases.quorum }, 'lock quorum reachable again: contesting');
      })
      .catch(() => undefined)
      .finally(() => (this.#probing = undefined));
    return this.#probing;
  }

  async #claim<T extends Tick>(requests: readonly { tick: T; value: string | undefined }[]): Promise<Contested<T>[]> {
    if (requests.length === 0) return [];
    // Loops, not Math.max(...requests): a spread of more than ~125,000 arguments overflows the stack.
    const nowMs = this.#options.now();
    let claimRetentionMs = 0;
    let leaseTtlMs = 0;
    for (const { tick } of requests) {
      claimRetentionMs = Math.max(claimRetentionMs, retentionFrom(tick, nowMs));
      leaseTtlMs = Math.max(leaseTtlMs, tick.schedule.leaseTtlMs);
    }
    const results = await this.#options.leases.claimBatch(
      requests.map(({ tick, value }) => ({
        resource: leaseResource(tick.schedule.id, tick.schedule.overlap, tick.tickMs),
        claim: tickClaim(tick.tickMs),
        value,
      })),
      { ...CONTEST, nodeTimeoutMs: contestNodeTimeoutMs(leaseTtlMs, requests.length), claimRetentionMs },
    );
    return requests.map(({ tick }, i) => ({ tick, result: results[i] as ClaimResult }));
  }
}
