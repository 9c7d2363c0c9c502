import type { HistoryRetention } from '@tickwarden/config';
import type { Claim, ClaimBatchOptions, ClaimRequest, ClaimResult, Mark } from '@tickwarden/redlock';
import type { MissReason, TickOutcome } from './outcomes.ts';
import type { Schedule } from './schedule.ts';
import type { TickWindow } from './tick-window.ts';

/**
 * The narrow interfaces the scheduler's parts talk through: claims (the lock nodes), the
 * job queue (BullMQ) and the replica store (state the replicas share in the queue Redis). The
 * parts decide; these do the I/O, so the decisions are tested without Redis.
 */

/** One tick of one schedule, as the parts that act on it see it. */
export interface Tick extends TickWindow {
  schedule: Schedule;
  tickMs: number;
  /** Tick plus jitter: when its run is due. */
  dueMs: number;
  /** When the schedule's next run is due (undefined: its pattern has no later tick). */
  nextDueMs: number | undefined;
  jobId: string;
}

/** What the scheduler asks of the lock nodes for a tick: its claim (a Redlock has it). */
export interface ClaimGrants {
  claimBatch(requests: readonly ClaimRequest[], options?: ClaimBatchOptions): Promise<ClaimResult[]>;
}

/**
 * How far the replicas have taken up ticks, kept on the lock nodes (a Redlock has it): it outlives a
 * queue Redis that loses its data while no replica runs (see TickMarks).
 */
export interface ProgressMarks {
  raiseMark(resource: string, mark: Mark, keepMs: number): Promise<boolean>;
  readMark(resource: string): Promise<Mark | undefined>;
}

/** What a replica asks of the lock nodes to know whether it can reach a quorum (a Redlock has it). */
export interface LockQuorum {
  readonly nodes: readonly unknown[];
  readonly quorum: number;
  /** Which nodes answer within `nodeTimeoutMs`, and whether they make a quorum. */
  probe(overrides?: { nodeTimeoutMs?: number }): Promise<{ quorum: boolean; unreachable: Map<string, Error> }>;
}

/** A tick's run to add to its queue: the tick's claim, which its job carries to the worker. */
export interface Run {
  tick: Tick;
  claim: Claim;
  /** Names this publication of the tick: the start id its first start records on the claim (see TickJobData's `lease`). */
  publication: number;
  /** A backfilled tick's run: its job has no start deadline and waits for the lease (see TickJobData's `backfill`). */
  backfill?: true;
}

/**
 * Whether a tick was published (its job added): `none` (never, within its retention), `stored`
 * (the job is there: who added it, which publication, under which claim value), `gone` (added
 * once; the job was removed since, its publish marker remains).
 */
export type Publication =
  { state: 'none' } | { state: 'stored'; enqueuedBy: string; publication: number; value: string } | { state: 'gone' };

export interface JobQueue {
  /** Adds the runs' jobs, each at most once per publish marker (`retentionMs`); per run: undefined when added (or already there), or the error. */
  add(runs: readonly Run[]): Promise<(Error | undefined)[]>;
  /** Per tick, whether and by whom its job was published. */
  publications(ticks: readonly Tick[]): Promise<Publication[]>;
  close(): Promise<void>;
}

/** One tick in a schedule's history, as `status` shows it. */
export interface TickRecord {
  tickMs: number;
  outcome: TickOutcome | 'triggered' | 'backfilled';
  /** Why, for `missed` (and what a skip found). */
  reason?: MissReason | string | undefined;
  lagMs: number;
  jobId: string | undefined;
  /** The replica that recorded it (for a run found published, the one that enqueued it when known). */
  replica: string;
  /** Ticks missed while no replica ran, recorded as one entry at the last of them (`tickMs`) by the replica that found the gap. */
  gap?: { firstTickMs: number; count: number; atLeast: boolean };
}

/**
 * A record for a schedule's history. Kept: every entry within `keepMs` of its newest tick (the
 * tick's retention: whether a tick is recorded decides recovery), and beyond it the newest
 * `retention.keep` entries younger than `retention.maxAgeMs`.
 */
export interface HistoryEntry {
  scheduleId: string;
  record: TickRecord;
  keepMs: number;
  retention: HistoryRetention;
}

/** What an operator did to a schedule (`tickwarden pause`, `resume`, `trigger`, `backfill`), for its audit trail. */
export interface ControlAction {
  action: 'pause' | 'resume' | 'trigger' | 'backfill';
  by: string;
  atMs: number;
  note: string;
  /** What it did: the job of a trigger, the ticks of a backfill. */
  detail?: string | undefined;
}

/** Why and since when a schedule is paused. */
export interface PauseRecord {
  by: string;
  atMs: number;
  note: string;
}

/** A tick a replica took up: open until some replica records its outcome; recovery looks at it from `recoverAtMs`. */
export interface OpenTick {
  scheduleId: string;
  tickMs: number;
  jobId: string;
  recoverAtMs: number;
}

/** State the replicas share (in the queue Redis). */
export interface ReplicaStore {
  paused(): Promise<Map<string, PauseRecord>>;
  /**
   * The paused schedules and the epoch of the queue Redis's data (`newEpoch` is set when there is
   * none): an epoch other than the one seen before means the data was lost.
   */
  pausedInEpoch(newEpoch: string): Promise<{ epoch: string; paused: Map<string, PauseRecord> }>;
  pause(scheduleId: string, record: PauseRecord): Promise<void>;
  /** Records outcomes; per entry, whether it became its tick's record (false: another record stands). Closes the ticks. */
  record(entries: readonly HistoryEntry[]): Promise<boolean[]>;
  /** Closes open ticks without a record (their outcome is recorded already). */
  close(jobIds: readonly string[]): Promise<void>;
  /** Per tick, whether its outcome is recorded. */
  recorded(ticks: readonly { scheduleId: string; tickMs: number }[]): Promise<boolean[]>;
  /** Opens ticks taken up, unless their outcome is recorded already. */
  open(ticks: readonly OpenTick[]): Promise<void>;
  /** Open ticks whose recovery time has come (job ids), at most `limit`; each is handed out again only from `nextTryMs`. */
  takeDue(nowMs: number, limit: number, nextTryMs: number): Promise<string[]>;
  /** Raises the schedules' high-water marks; resolves each one's mark from before. */
  raiseMarks(marks: ReadonlyMap<string, number>): Promise<Map<string, number | undefined>>;
  forgetMarks(scheduleIds: readonly string[]): Promise<void>;
  /** Every schedule's high-water mark as it stands, and the epoch of the queue Redis's data (undefined: none set yet). */
  marks(): Promise<{ marks: Map<string, number>; epoch: string | undefined }>;
  /**
   * Stamps this replica's heartbeat (by the queue Redis's clock: replicas' clocks may differ), or
   * deletes it when it does not `register`, and deletes those older than `forgetMs`; resolves the
   * queue Redis's time and the replicas heard from within `liveMs`.
   */
  beat(
    replicaId: string,
    register: boolean,
    liveMs: number,
    forgetMs: number,
  ): Promise<{ serverMs: number; live: string[] }>;
  /** Deletes this replica's heartbeat (it stops). */
  leave(replicaId: string): Promise<void>;
}
