import type { Clock } from '@tickwarden/redlock';
import type { Logger } from 'pino';
import type { MissReason } from './outcomes.ts';
import type { JobQueue, Publication, ReplicaStore, Run, Tick } from './ports.ts';
import { contestLoss, type TickContest } from './tick-contest.ts';
import { newPublication, type TickPublisher } from './tick-publisher.ts';
import type { TickRecorder } from './tick-recorder.ts';

/** How often a replica looks for open ticks due for recovery, ms. */
export const RESOLVE_INTERVAL_MS = 500;
/** Open ticks taken per look; a full batch is followed by another look at once. */
const RESOLVE_BATCH = 1000;
/** An open tick of a schedule this replica does not know is recorded missed only this long after its tick: replicas' reloads converge within seconds. */
const UNKNOWN_SCHEDULE_GRACE_MS = 60_000;

/** What recovery does with an open tick. */
export type Resolution =
  | { kind: 'closed' }
  | { kind: 'found'; publication: Exclude<Publication, { state: 'none' }> }
  | { kind: 'missed'; reason: MissReason }
  | { kind: 'contest' };

/**
 * Decides an open tick from what the stores say: recorded meanwhile (`closed`); published but not
 * recorded, its publisher gone before it could (`found`: recorded on its behalf); past its start
 * deadline (`missed`, with the last failure this replica saw, or `deadline-passed`); otherwise
 * contest it, honouring its claim (`contest`).
 */
export function resolution(input: {
  recorded: boolean;
  publication: Publication;
  nowMs: number;
  tick: Pick<Tick, 'dueMs' | 'startDeadlineMs'>;
  lastFailure: MissReason | undefined;
}): Resolution {
  if (input.recorded) return { kind: 'closed' };
  if (input.publication.state !== 'none') return { kind: 'found', publication: input.publication };
  if (input.nowMs > input.tick.dueMs + input.tick.startDeadlineMs)
    return { kind: 'missed', reason: input.lastFailure ?? 'deadline-passed' };
  return { kind: 'contest' };
}

/**
 * The last failure seen of a tick, for the reason of its miss: the tick's own last try, unless a
 * look at the open ticks failed after it (the queue Redis did not answer) and after the tick was
 * due: then nothing could try it since. A replica that never tried the tick (another one took it
 * from the open ticks until its deadline) but is cut from the lock quorum names that: it recovers
 * only when no replica in view can win a contest (see TickResolverOptions.recovers).
 */
export function lastFailureOf(
  tryFailed: { reason: MissReason; atMs: number } | undefined,
  lookFailedAtMs: number | undefined,
  tick: Pick<Tick, 'dueMs'>,
  cutOff: boolean,
): MissReason | undefined {
  if (lookFailedAtMs !== undefined && lookFailedAtMs > tick.dueMs && !(tryFailed && tryFailed.atMs > lookFailedAtMs))
    return 'queue-unavailable';
  return tryFailed?.reason ?? (cutOff ? 'no-lock-quorum' : undefined);
}

/** Splits a tick's job id, `<team>/<name>@<tick ms>`, into schedule and tick. */
export function parseJobId(jobId: string): { scheduleId: string; tickMs: number } | undefined {
  const at = jobId.lastIndexOf('@');
  const tickMs = Number(jobId.slice(at + 1));
  return at > 0 && Number.isSafeInteger(tickMs) ? { scheduleId: jobId.slice(0, at), tickMs } : undefined;
}

export interface TickResolverOptions {
  replicaId: string;
  store: Pick<ReplicaStore, 'takeDue' | 'recorded' | 'close'>;
  queue: Pick<JobQueue, 'publications'>;
  contest: TickContest;
  publisher: TickPublisher;
  recorder: TickRecorder;
  /**
   * False while this replica cannot win a contest and another can (it is cut from a lock quorum):
   * it then takes no open tick, since each tick it took would wait a try interval before a replica
   * that can win it gets its turn (a `cancel-previous` tick recovered after its successor is due
   * is superseded). With no other replica that can, it goes on: ticks past their deadline are
   * recorded missed.
   */
  recovers: () => boolean;
  /** The tick of a schedule configured here, with its window; undefined when the schedule is not. */
  tickOf: (scheduleId: string, tickMs: number) => Tick | undefined;
  clock: Clock;
  logger: Logger;
  /** Wall time, ms. */
  now: () => number;
}

/**
 * Recovery: every replica looks at the open ticks (taken up by some replica, no outcome recorded)
 * whose recovery time came, shares them out through the replica store, and decides each one (see
 * {@link resolution}). A contest here takes the claim over by its value when the claim is
 * granted (its winner died or stalled before the enqueue), so a tick is never won twice; a tick
 * that cannot be published is tried again about every second, at a pace fixed per replica, until
 * its start deadline, and then recorded missed with why. The open ticks live in the queue Redis,
 * so a tick whose deciding replicas all stopped is decided by whichever replica runs next.
 */
export class TickResolver {
  readonly #options: TickResolverOptions;
  /** Between tries of one tick, ms: 1 s plus 0-499 ms fixed per replica (from its id), so recoverers do not retry in lockstep. */
  readonly #retryMs: number;
  /** Why and when this replica's last try of an open tick failed, until the tick's deadline has passed. */
  readonly #failures = new Map<string, { reason: MissReason; atMs: number; untilMs: number }>();
  /** When this replica's last look at the open ticks failed (see lastFailureOf). */
  #lookFailedAtMs: number | undefined;
  #timer: unknown;
  #running: Promise<void> | undefined;
  #stopped = true;

  constructor(options: TickResolverOptions) {
    this.#options = options;
    this.#retryMs =
      1000 + ([...options.replicaId].reduce((hash, char) => (hash * 31 + char.charCodeAt(0)) >>> 0, 7) % 500);
  }

  start(): void {
    this.#stopped = false;
    this.#schedule(RESOLVE_INTERVAL_MS);
  }

  /** Stops looking and waits for a look in flight. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#options.clock.clearTimeout(this.#timer);
    await this.#running;
  }

  #schedule(ms: number): void {
    if (this.#stopped) return;
    this.#timer = this.#options.clock.setTimeout(() => {
      this.#running = this.sweep()
        .catch((error: unknown) => {
          this.#lookFailedAtMs = this.#options.now();
          this.#options.logger.warn({ err: error }, 'recovery of open ticks failed: trying again');
          return false;
        })
        .then((full) => this.#schedule(full ? 0 : RESOLVE_INTERVAL_MS));
    }, ms);
  }

  /** One look: takes the due open ticks and decides them. Resolves true when the batch was full. */
  async sweep(): Promise<boolean> {
    const { store, queue, now, recorder, logger, recovers, contest } = this.#options;
    if (!recovers()) return false;
    const nowMs = now();
    for (const [id, { untilMs }] of this.#failures) if (untilMs < nowMs) this.#failures.delete(id);
    const ids = await store.takeDue(nowMs, RESOLVE_BATCH, nowMs + this.#retryMs);
    const ticks: Tick[] = [];
    for (const id of ids) {
      const tick = this.#tickOf(id, nowMs);
      if (tick) ticks.push(tick);
    }
    if (ticks.length === 0) return ids.length === RESOLVE_BATCH;
    const [recorded, publications] = await Promise.all([
      store.recorded(ticks.map((tick) => ({ scheduleId: tick.schedule.id, tickMs: tick.tickMs }))),
      queue.publications(ticks),
    ]);
    const contested: Tick[] = [];
    const closed: string[] = [];
    ticks.forEach((tick, i) => {
      const decision = resolution({
        recorded: recorded[i] ?? false,
        publication: publications[i] ?? { state: 'none' },
        nowMs,
        tick,
        lastFailure: lastFailureOf(this.#failures.get(tick.jobId), this.#lookFailedAtMs, tick, contest.cutOff),
      });
      if (decision.kind !== 'contest') this.#failures.delete(tick.jobId);
      switch (decision.kind) {
        case 'closed':
          // Recorded, yet open: opened by a replica slow to take it up.
          closed.push(tick.jobId);
          return;
        case 'found':
          recorder.outcome('enqueued', tick, {
            found: { by: decision.publication.state === 'stored' ? decision.publication.enqueuedBy : undefined },
          });
          return;
        case 'missed':
          recorder.outcome('missed', tick, { reason: decision.reason });
          return;
        case 'contest':
          contested.push(tick);
      }
    });
    await Promise.all([store.close(closed), contested.length > 0 ? this.#recover(contested) : undefined]);
    logger.debug({ taken: ids.length, contested: contested.length }, 'open ticks looked at');
    return ids.length === RESOLVE_BATCH;
  }

  /** The tick of an open job id; one of a schedule not configured here is left to others, or recorded missed once reloads had time to converge. */
  #tickOf(id: string, nowMs: number): Tick | undefined {
    const parsed = parseJobId(id);
    if (!parsed) return undefined;
    const tick = this.#options.tickOf(parsed.scheduleId, parsed.tickMs);
    if (tick || nowMs - parsed.tickMs < UNKNOWN_SCHEDULE_GRACE_MS) return tick;
    this.#options.recorder.outcome(
      'missed',
      { schedule: { id: parsed.scheduleId }, tickMs: parsed.tickMs, jobId: id, retentionMs: 0 },
      { reason: 'schedule-removed' },
    );
    return undefined;
  }

  async #recover(ticks: Tick[]): Promise<void> {
    const { contest, publisher, recorder } = this.#options;
    await contest.refreshPaused();
    const open = ticks.filter((tick) => {
      if (!contest.isPaused(tick)) return true;
      recorder.outcome('skipped-paused', tick);
      return false;
    });
    const won: Run[] = [];
    for (const { tick, result } of await contest.contest(open, true)) {
      if (result.ok) {
        won.push({ tick, claim: result.claim, publication: newPublication() });
        continue;
      }
      const loss = contestLoss(result.error);
      if (loss === 'started') {
        // Published, and started by a worker, though its job is gone (the queue Redis lost its data): it ran.
        this.#failures.delete(tick.jobId);
        recorder.outcome('enqueued', tick, {
          reason: 'a job of the tick started, found on the lock nodes',
          found: { by: undefined },
        });
        continue;
      }
      this.#failed(tick, 'no-lock-quorum');
      recorder.observe(loss === 'lost-race' ? 'lost-race' : 'lock-unavailable', tick, {
        jobId: tick.jobId,
        err: result.error,
        recovery: true,
      });
    }
    const published = await publisher.publish(won, 'recovered');
    won.forEach((run, i) =>
      published[i] === 'failed' ? this.#failed(run.tick, 'queue-unavailable') : this.#failures.delete(run.tick.jobId),
    );
  }

  /** A try this replica made outside recovery failed (a contest without quorum, an add that failed): the reason a later miss names. */
  failed(tick: Tick, reason: MissReason): void {
    this.#failed(tick, reason);
  }

  #failed(tick: Tick, reason: MissReason): void {
    const untilMs = tick.dueMs + tick.startDeadlineMs + RESOLVE_INTERVAL_MS * 10;
    this.#failures.set(tick.jobId, { reason, atMs: this.#options.now(), untilMs });
  }
}
