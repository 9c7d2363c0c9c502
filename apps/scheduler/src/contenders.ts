import type { Clock } from '@tickwarden/redlock';
import type { Logger } from 'pino';
import type { ReplicaStore, Tick } from './ports.ts';
import { CLOCK_SKEW_TOLERANCE_MS } from './tick-contest.ts';

/** Each replica stamps its heartbeat this often, ms, and reads who else is there (two commands: cheap). */
export const CONTENDER_BEAT_MS = 500;
/**
 * A replica heard from within this is a contender, ms (four beats: a lost beat or a short stall
 * does not drop it). The ticks of a replica that died go to recovery until the others drop it.
 */
export const CONTENDER_LIVE_MS = 4 * CONTENDER_BEAT_MS;
/** A heartbeat older than this is deleted, ms: the hash holds only replicas of the last minute. */
export const CONTENDER_FORGET_MS = 60_000;
/** Added to a beat while a leaving replica waits for the others to read it left, ms: their beat's round trip. */
const HANDOVER_MARGIN_MS = 100;

/** 32-bit FNV-1a of a string. */
export function hash32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}

/** Murmur3's finalizer: every input bit moves every output bit, so two hashes combine into an even score. */
function mix(hash: number): number {
  let h = hash;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * The contender of a key (a tick's job id) among replicas (their id hashes), by rendezvous
 * hashing: the one whose combined score is highest. Every replica with the same list picks the
 * same one; a replica joining or leaving moves only the keys it wins or held.
 */
export function preferredContender(replicas: readonly { id: string; hash: number }[], key: string): string | undefined {
  const keyHash = hash32(key);
  let best: string | undefined;
  let bestScore = -1;
  for (const { id, hash } of replicas) {
    const score = mix(keyHash ^ hash);
    if (score > bestScore || (score === bestScore && best !== undefined && id < best)) [best, bestScore] = [id, score];
  }
  return best;
}

export interface ContendersOptions {
  replicaId: string;
  store: Pick<ReplicaStore, 'beat' | 'leave'>;
  clock: Clock;
  logger: Logger;
  /** False while this replica cannot win contests (cut from a lock quorum): it withdraws, so that its ticks are not left to recovery. */
  canContest: () => boolean;
  /** Told the number of contenders this replica sees after each beat (0: no view, it contests every tick). */
  onView?: ((contenders: number) => void) | undefined;
}

/**
 * Shares the contests out: each tick is contested by one replica, its preferred contender among
 * the replicas that beat within CONTENDER_LIVE_MS (see preferredContender). The others only open
 * the tick; if the preferred one died or stalled, recovery decides the tick from its recovery
 * time (claim-once keeps it single whoever contests). A replica that cannot win contests (cut
 * from a lock quorum, or its clock off the queue Redis's by more than CLOCK_SKEW_TOLERANCE_MS)
 * withdraws from the contenders and, like one without a fresh view (the queue Redis did not
 * answer for CONTENDER_LIVE_MS), contests every tick, as all would without sharing.
 */
export class Contenders {
  readonly #options: ContendersOptions;
  readonly #selfHash: number;
  #view: { replicas: { id: string; hash: number }[]; atMono: number } | undefined;
  /** Whether this replica withdrew at its last beat (see canContest, clockOffMs). */
  #withdrawn = false;
  /** How far this replica's wall clock was off the queue Redis's at the last beat, ms (0 before). */
  #clockOffMs = 0;
  #timer: unknown;
  #stopped = true;
  #ready: Promise<void> | undefined;
  #beating: Promise<void> | undefined;

  constructor(options: ContendersOptions) {
    this.#options = options;
    this.#selfHash = hash32(options.replicaId);
  }

  /** Beats now and every CONTENDER_BEAT_MS. */
  start(): void {
    this.#stopped = false;
    this.#ready = this.#beat();
  }

  /** Settles once the first beat answered or failed: the first contests wait for it, so that a replica starting does not contest the whole contest lead alone. */
  get ready(): Promise<void> {
    return this.#ready ?? Promise.resolve();
  }

  /**
   * Stops beating and deletes this replica's heartbeat; with other replicas in view, resolves a
   * beat and a bit later, once they have read that it left: the caller contests its ticks until
   * then, so that none waits for recovery while the others learn it.
   */
  async leave(): Promise<void> {
    const { clock, store, replicaId, logger } = this.#options;
    this.#stopped = true;
    clock.clearTimeout(this.#timer);
    await this.#beating;
    try {
      await store.leave(replicaId);
    } catch (error) {
      logger.warn(
        { err: error },
        'could not delete this replica from the contenders: the others drop it when its heartbeat ages',
      );
      return;
    }
    if ((this.#view?.replicas.length ?? 0) > 1)
      await new Promise<void>((resolve) => clock.setTimeout(resolve, CONTENDER_BEAT_MS + HANDOVER_MARGIN_MS));
  }

  /** Whether this replica contests the tick now: it is the tick's preferred contender, or it has no fresh view. */
  prefers(tick: Pick<Tick, 'jobId'>): boolean {
    const view = this.#view;
    if (!view || this.#withdrawn || this.#options.clock.now() - view.atMono > CONTENDER_LIVE_MS) return true;
    return preferredContender(view.replicas, tick.jobId) === this.#options.replicaId;
  }

  /**
   * Whether the fresh view holds a replica other than this one: one that can win contests, since
   * a withdrawn replica deletes its heartbeat.
   */
  othersContest(): boolean {
    const view = this.#view;
    if (!view || this.#options.clock.now() - view.atMono > CONTENDER_LIVE_MS) return false;
    return view.replicas.some(({ id }) => id !== this.#options.replicaId);
  }

  #beat(): Promise<void> {
    this.#beating = this.#beatOnce();
    return this.#beating;
  }

  async #beatOnce(): Promise<void> {
    const { store, replicaId, clock, logger, canContest, onView } = this.#options;
    const startedMono = clock.now();
    const sentMs = clock.wallMicros() / 1000;
    const withdraw = !canContest() || Math.abs(this.#clockOffMs) > CLOCK_SKEW_TOLERANCE_MS;
    try {
      const { serverMs, live } = await store.beat(replicaId, !withdraw, CONTENDER_LIVE_MS, CONTENDER_FORGET_MS);
      this.#clockOffMs = (sentMs + clock.wallMicros() / 1000) / 2 - serverMs;
      const ids = [...new Set([...live, replicaId])].sort();
      const before = this.#view?.replicas.map(({ id }) => id).join(',');
      this.#view = {
        replicas: ids.map((id) => ({ id, hash: id === replicaId ? this.#selfHash : hash32(id) })),
        atMono: startedMono,
      };
      if (withdraw !== this.#withdrawn)
        logger.warn(
          { clockOffMs: Math.round(this.#clockOffMs), cutFromLockQuorum: !canContest() },
          withdraw
            ? 'this replica cannot win contests now (cut from a lock quorum, or its clock is off): it withdraws from the contenders and contests every tick'
            : 'this replica can win contests again: it shares them with the other replicas',
        );
      this.#withdrawn = withdraw;
      if (ids.join(',') !== before) logger.info({ contenders: ids }, 'replicas sharing the tick contests');
    } catch (error) {
      logger.warn({ err: error }, 'could not beat with the other replicas: contesting every tick until a beat works');
    }
    const fresh = this.#view !== undefined && clock.now() - this.#view.atMono <= CONTENDER_LIVE_MS;
    onView?.(fresh && !this.#withdrawn ? (this.#view?.replicas.length ?? 0) : 0);
    if (!this.#stopped) this.#timer = clock.setTimeout(() => void this.#beat(), CONTENDER_BEAT_MS);
  }
}
