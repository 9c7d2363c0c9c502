import type { Redis } from 'ioredis';

/**
 * State shared by every replica, kept in the queue Redis: paused schedules,
 * the recent history of each schedule's ticks, and each schedule's
 * high-water mark. All its keys are built here.
 */
const KEY_PREFIX = 'tickwarden:control';
const PAUSED_KEY = `${KEY_PREFIX}:paused`;
const historyKey = (scheduleId: string) => `${KEY_PREFIX}:history:{${scheduleId}}`;
/** Hash of schedule id -> the latest tick (epoch ms) any replica has taken up. */
const MARKS_KEY = `${KEY_PREFIX}:marks`;
/** Ticks kept per schedule for `status`. */
export const HISTORY_LENGTH = 20;
/** Marks per script call: a call with tens of thousands of arguments overflows ioredis' stack. */
const MARKS_PER_CALL = 1000;
/** History entries per script call. */
const HISTORY_PER_CALL = 500;

/**
 * Prepends ARGV[i] (a tick, JSON) to the history list KEYS[i], then trims that
 * list to its newest ARGV[#KEYS + 1] entries. A key named twice gets both
 * ticks, in order.
 */
const RECORD_HISTORY = `
local keep = tonumber(ARGV[#KEYS + 1]) - 1
for i = 1, #KEYS do
  redis.call('LPUSH', KEYS[i], ARGV[i])
  redis.call('LTRIM', KEYS[i], 0, keep)
end
return #KEYS
`;

/**
 * Raises each field of a hash (ARGV: field, value, field, value, ...) to the
 * value when it is higher; returns the previous values (false where there was
 * none). Atomic, so when several replicas raise a mark at once exactly one of
 * them sees the value from before.
 */
const RAISE_MARKS = `
local previous = {}
for i = 1, #ARGV, 2 do
  local old = redis.call('HGET', KEYS[1], ARGV[i])
  if not old or tonumber(old) < tonumber(ARGV[i + 1]) then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
  previous[#previous + 1] = old or false
end
return previous
`;

/** Why and since when a schedule is paused. */
export interface PauseRecord {
  by: string;
  atMs: number;
  note: string;
}

/** One tick in a schedule's history, as `status` shows it. */
export interface TickRecord {
  tickMs: number;
  outcome: string;
  lagMs: number;
  fence: number | undefined;
  jobId: string | undefined;
  replica: string;
  /** Ticks missed while no replica ran, recorded as one entry at the last of them (`tickMs`) by the replica that found the gap. */
  gap?: { firstTickMs: number; count: number; atLeast: boolean };
}

export class ControlState {
  readonly #redis: Redis;

  constructor(redis: Redis) {
    this.#redis = redis;
  }

  async pause(scheduleId: string, record: PauseRecord): Promise<void> {
    await this.#redis.hset(PAUSED_KEY, scheduleId, JSON.stringify(record));
  }

  /** Resolves true when the schedule was paused. */
  async resume(scheduleId: string): Promise<boolean> {
    return (await this.#redis.hdel(PAUSED_KEY, scheduleId)) === 1;
  }

  async paused(): Promise<Map<string, PauseRecord>> {
    const all = await this.#redis.hgetall(PAUSED_KEY);
    return new Map(Object.entries(all).map(([id, json]) => [id, JSON.parse(json) as PauseRecord]));
  }

  /**
   * Adds ticks to their schedules' histories in one pipeline of one script
   * call per HISTORY_PER_CALL ticks: a 10,000-tick boundary as 20,000 LPUSH and
   * LTRIM commands held 20,000 ioredis commands (and their closures) until the
   * reply. A pipeline, not MULTI: the calls need no isolation.
   */
  async record(entries: readonly { scheduleId: string; tick: TickRecord }[]): Promise<void> {
    if (entries.length === 0) return;
    const pipeline = this.#redis.pipeline();
    for (let at = 0; at < entries.length; at += HISTORY_PER_CALL) {
      const slice = entries.slice(at, at + HISTORY_PER_CALL);
      pipeline.eval(RECORD_HISTORY, slice.length, ...slice.map(({ scheduleId }) => historyKey(scheduleId)), ...slice.map(({ tick }) => JSON.stringify(tick)), String(HISTORY_LENGTH));
    }
    for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
  }

  /**
   * Raises the schedules' high-water marks to the given ticks (a mark never
   * goes back); resolves each schedule's mark from before, undefined where it
   * had none. One round trip for any number of schedules.
   */
  async raiseMarks(marks: ReadonlyMap<string, number>): Promise<Map<string, number | undefined>> {
    const previous = new Map<string, number | undefined>();
    if (marks.size === 0) return previous;
    const entries = [...marks];
    const pipeline = this.#redis.pipeline();
    for (let at = 0; at < entries.length; at += MARKS_PER_CALL) {
      pipeline.eval(RAISE_MARKS, 1, MARKS_KEY, ...entries.slice(at, at + MARKS_PER_CALL).flatMap(([id, tickMs]) => [id, String(tickMs)]));
    }
    for (const [callIndex, [error, values]] of ((await pipeline.exec()) ?? []).entries()) {
      if (error) throw error;
      (values as (string | null)[]).forEach((value, i) => {
        const [id] = entries[callIndex * MARKS_PER_CALL + i] as [string, number];
        previous.set(id, value === null ? undefined : Number(value));
      });
    }
    return previous;
  }

  /** Drops the marks of schedules the config no longer has (a schedule added again later starts afresh). */
  async forgetMarks(scheduleIds: readonly string[]): Promise<void> {
    if (scheduleIds.length === 0) return;
    const pipeline = this.#redis.pipeline();
    for (let at = 0; at < scheduleIds.length; at += MARKS_PER_CALL) pipeline.hdel(MARKS_KEY, ...scheduleIds.slice(at, at + MARKS_PER_CALL));
    for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
  }

  async history(scheduleId: string, count = HISTORY_LENGTH): Promise<TickRecord[]> {
    const items = await this.#redis.lrange(historyKey(scheduleId), 0, count - 1);
    return items.map((json) => JSON.parse(json) as TickRecord);
  }
}
