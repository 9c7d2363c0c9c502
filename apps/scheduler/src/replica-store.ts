import { DEFAULT_HISTORY, type HistoryRetention } from '@tickwarden/config';
import { appendToHistory, PAUSED_KEY, readHistory, yieldToLoop } from '@tickwarden/runtime';
import type { Redis } from 'ioredis';
import type { ControlAction, HistoryEntry, OpenTick, PauseRecord, ReplicaStore, TickRecord } from './ports.ts';

/**
 * State shared by every replica, kept in the queue Redis: paused schedules, each schedule's tick
 * history (the cluster's record of each tick's outcome), the open ticks (taken up, no outcome
 * recorded yet) and each schedule's high-water mark. All its keys are built here.
 */
const KEY_PREFIX = 'tickwarden:control';
/** Per schedule, a sorted set: score the tick (epoch ms), member the record (JSON). */
const historyKey = (scheduleId: string) => `${KEY_PREFIX}:ticks:{${scheduleId}}`;
/** Per schedule, its audit trail: a sorted set of ControlAction (JSON) by time. */
const auditKey = (scheduleId: string) => `${KEY_PREFIX}:audit:{${scheduleId}}`;
/** Sorted set of open ticks: member the tick's job id, score when recovery may look at it (epoch ms). */
const OPEN_KEY = `${KEY_PREFIX}:open`;
/** Hash of schedule id -> the latest tick (epoch ms) any replica has taken up. */
const MARKS_KEY = `${KEY_PREFIX}:marks`;
/** Hash of replica id -> its last heartbeat, ms by the queue Redis's clock (see Contenders). */
const REPLICAS_KEY = `${KEY_PREFIX}:replicas`;
/** A random id set once per life of the queue Redis's data: a different one means it lost everything (an empty restart, a failover to a replica that had not got the writes). */
const EPOCH_KEY = `${KEY_PREFIX}:epoch`;
/** Marks per script call: a call with tens of thousands of arguments overflows ioredis' stack. */
const MARKS_PER_CALL = 1000;
/** Mark calls built, or replies read, per turn of the event loop. */
const CALLS_PER_SLICE = 2;
/** Entries per script call (history records, opened ticks). */
const ENTRIES_PER_CALL = 500;
/** Ticks per round trip of `recorded` (one read each): recovery asks about up to a thousand at once. */
const RECORDED_SLICE = 500;

/**
 * record: makes each entry its tick's record in its schedule's history, closes the tick (removes
 * it from the open ticks) and trims the history.
 * KEYS[1]     open ticks
 * KEYS[i + 1] history of entry i
 * per entry i (j = 7i - 6): ARGV[j] tick ms, ARGV[j + 1] record (JSON), ARGV[j + 2] how it
 *             stands beside the tick's other records: '0' only as the first, '1' it publishes
 *             (enqueued, recovered) and replaces records that do not, '2' a backfill, added beside
 *             them; ARGV[j + 3] keep ms (entries this close to the
 *             newest are kept), ARGV[j + 4] the tick's job id, ARGV[j + 5] entries kept beyond
 *             that at least, ARGV[j + 6] their longest age, ms
 * Returns one integer per entry: 1 it is a record of the tick now, 0 another record stands (the
 * tick's first, unless that one does not publish and this one does: then this one replaces it; a
 * backfill stands beside any but another backfill), or it is older than what the history keeps.
 */
const RECORD = `
local out, closed = {}, {}
for i = 1, #KEYS - 1 do
  local key, j = KEYS[i + 1], 7 * i - 6
  local tick, record, mode, keep = ARGV[j], ARGV[j + 1], ARGV[j + 2], tonumber(ARGV[j + 3])
  local minimum, maxAge = tonumber(ARGV[j + 5]), tonumber(ARGV[j + 6])
  local existing = redis.call('ZRANGEBYSCORE', key, tick, tick)
  local write = #existing == 0
  if mode ~= '0' then
    write = true
    for _, member in ipairs(existing) do
      local outcome = cjson.decode(member).outcome
      if outcome == 'backfilled' or (mode == '1' and (outcome == 'enqueued' or outcome == 'recovered')) then write = false end
    end
    if write and mode == '1' then
      for _, member in ipairs(existing) do redis.call('ZREM', key, member) end
    end
  end
  if write then redis.call('ZADD', key, tick, record) end
  closed[i] = ARGV[j + 4]
  -- Trimming drops only entries older than keep from the newest, which it never removes.
  local newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  if newest then
    local count = redis.call('ZCARD', key)
    if count > minimum then
      local old = redis.call('ZCOUNT', key, '-inf', '(' .. (newest - keep))
      local drop = math.min(old, count - minimum)
      if drop > 0 then redis.call('ZREMRANGEBYRANK', key, 0, drop - 1) end
    end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. (newest - math.max(keep, maxAge)))
  end
  -- A record within keep of the newest survived the trim; only an older one is looked up.
  local kept = write and (tonumber(tick) >= newest - keep or redis.call('ZSCORE', key, record))
  out[i] = kept and 1 or 0
end
if #closed > 0 then redis.call('ZREM', KEYS[1], unpack(closed)) end
return out
`;

/**
 * open: adds ticks to the open ticks unless their outcome is recorded (a replica slow to take a
 * tick up must not reopen it); one already open keeps its time.
 * KEYS[1]     open ticks
 * KEYS[i + 1] history of entry i
 * per entry i (j = 3i - 2): ARGV[j] job id, ARGV[j + 1] recovery time (ms), ARGV[j + 2] tick ms
 * Returns the number of ticks opened. The ticks not recorded are added in one ZADD (a command per
 * call, not per tick: every replica opens every tick).
 */
const OPEN = `
local add = {}
for i = 1, #KEYS - 1 do
  local j = 3 * i - 2
  if not redis.call('ZRANGEBYSCORE', KEYS[i + 1], ARGV[j + 2], ARGV[j + 2], 'LIMIT', 0, 1)[1] then
    add[#add + 1] = ARGV[j + 1]
    add[#add + 1] = ARGV[j]
  end
end
if #add == 0 then return 0 end
return redis.call('ZADD', KEYS[1], 'NX', unpack(add))
`;

/**
 * paused-in-epoch: the paused schedules and the data's epoch, setting the epoch when it is missing.
 * KEYS[1] paused schedules, KEYS[2] epoch
 * ARGV[1] the epoch to set if none is
 * Returns { epoch, paused hash as a flat list }.
 */
const PAUSED_IN_EPOCH = `
local epoch = redis.call('GET', KEYS[2])
if not epoch then
  epoch = ARGV[1]
  redis.call('SET', KEYS[2], epoch)
end
return { epoch, redis.call('HGETALL', KEYS[1]) }
`;

/**
 * take-due: hands out open ticks whose time has come, and moves each one's time to the next try,
 * so that the replicas sweeping at once share the work instead of repeating it.
 * KEYS[1] open ticks
 * ARGV[1] now (ms), ARGV[2] at most this many, ARGV[3] the next try (ms)
 * Returns the job ids handed out.
 */
const TAKE_DUE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, member in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[3], member) end
return due
`;

/**
 * beat: stamps a replica's heartbeat with this server's clock (or deletes it), deletes heartbeats
 * older than ARGV[4], and returns the server's time and the replicas heard from within ARGV[3].
 * KEYS[1] heartbeats
 * ARGV[1] replica id, ARGV[2] '1' to stamp its heartbeat, '0' to delete it, ARGV[3] live window
 *         (ms), ARGV[4] forget after (ms)
 * Returns { server time (ms), live replica id, ... }.
 */
const BEAT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if ARGV[2] == '1' then redis.call('HSET', KEYS[1], ARGV[1], now) else redis.call('HDEL', KEYS[1], ARGV[1]) end
local all = redis.call('HGETALL', KEYS[1])
local out = { now }
for i = 1, #all, 2 do
  local age = now - tonumber(all[i + 1])
  if age <= tonumber(ARGV[3]) then out[#out + 1] = all[i]
  elseif age > tonumber(ARGV[4]) then redis.call('HDEL', KEYS[1], all[i]) end
end
return out
`;

/**
 * Raises each field of a hash (ARGV: field, value, field, value, ...) to the
 * value when it is higher; returns the previous values (false where there was
 * none). Atomic, so when several replicas raise a mark at once exactly one of
 * them sees the value from before. One HMGET and one HSET per call, whatever
 * its size: every replica raises every schedule's mark.
 */
const RAISE_MARKS = `
local fields = {}
for i = 1, #ARGV, 2 do fields[#fields + 1] = ARGV[i] end
local previous = redis.call('HMGET', KEYS[1], unpack(fields))
local raise = {}
for i, old in ipairs(previous) do
  local value = ARGV[2 * i]
  if not old or tonumber(old) < tonumber(value) then
    raise[#raise + 1] = fields[i]
    raise[#raise + 1] = value
  end
end
if #raise > 0 then redis.call('HSET', KEYS[1], unpack(raise)) end
return previous
`;

/** The replica store on the queue Redis. */
export class RedisReplicaStore implements ReplicaStore {
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

  async pausedInEpoch(newEpoch: string): Promise<{ epoch: string; paused: Map<string, PauseRecord> }> {
    const [epoch, flat] = (await this.#redis.eval(PAUSED_IN_EPOCH, 2, PAUSED_KEY, EPOCH_KEY, newEpoch)) as [
      string,
      string[],
    ];
    const paused = new Map<string, PauseRecord>();
    for (let i = 0; i + 1 < flat.length; i += 2)
      paused.set(flat[i] as string, JSON.parse(flat[i + 1] as string) as PauseRecord);
    return { epoch, paused };
  }

  /**
   * One pipeline of one script call per ENTRIES_PER_CALL records: a 10,000-tick boundary is one
   * round trip, not 10,000 (a pipeline, not MULTI: the calls need no isolation).
   */
  async record(entries: readonly HistoryEntry[]): Promise<boolean[]> {
    const replies = await this.#calls(RECORD, entries, (slice) => [
      [OPEN_KEY, ...slice.map(({ scheduleId }) => historyKey(scheduleId))],
      slice.flatMap(({ record, keepMs, scheduleId, retention }) => [
        String(record.tickMs),
        JSON.stringify(record),
        record.outcome === 'enqueued' || record.outcome === 'recovered'
          ? '1'
          : record.outcome === 'backfilled'
            ? '2'
            : '0',
        String(keepMs),
        record.jobId ?? `${scheduleId}@${record.tickMs}`,
        String(retention.keep),
        String(retention.maxAgeMs),
      ]),
    ]);
    return replies.flatMap((reply) => (reply as number[]).map((code) => code === 1));
  }

  async close(jobIds: readonly string[]): Promise<void> {
    if (jobIds.length > 0) await this.#redis.zrem(OPEN_KEY, ...jobIds);
  }

  async recorded(ticks: readonly { scheduleId: string; tickMs: number }[]): Promise<boolean[]> {
    const result: boolean[] = [];
    for (let from = 0; from < ticks.length; from += RECORDED_SLICE) {
      const slice = ticks.slice(from, from + RECORDED_SLICE);
      const pipeline = this.#redis.pipeline(
        slice.map(({ scheduleId, tickMs }) => ['zcount', historyKey(scheduleId), String(tickMs), String(tickMs)]),
      );
      for (const [error, count] of (await pipeline.exec()) ?? []) {
        if (error) throw error;
        result.push(Number(count) > 0);
      }
    }
    return result;
  }

  async open(ticks: readonly OpenTick[]): Promise<void> {
    await this.#calls(OPEN, ticks, (slice) => [
      [OPEN_KEY, ...slice.map(({ scheduleId }) => historyKey(scheduleId))],
      slice.flatMap(({ jobId, recoverAtMs, tickMs }) => [jobId, String(Math.round(recoverAtMs)), String(tickMs)]),
    ]);
  }

  async takeDue(nowMs: number, limit: number, nextTryMs: number): Promise<string[]> {
    return (await this.#redis.eval(
      TAKE_DUE,
      1,
      OPEN_KEY,
      String(Math.floor(nowMs)),
      String(limit),
      String(Math.round(nextTryMs)),
    )) as string[];
  }

  async marks(): Promise<{ marks: Map<string, number>; epoch: string | undefined }> {
    const [[hashError, hash], [epochError, epoch]] = (await this.#redis
      .multi()
      .hgetall(MARKS_KEY)
      .get(EPOCH_KEY)
      .exec()) as [[Error | null, Record<string, string>], [Error | null, string | null]];
    if (hashError ?? epochError) throw hashError ?? epochError;
    const marks = new Map<string, number>();
    for (const [id, tickMs] of Object.entries(hash)) marks.set(id, Number(tickMs));
    return { marks, epoch: epoch ?? undefined };
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
      pipeline.eval(
        RAISE_MARKS,
        1,
        MARKS_KEY,
        ...entries.slice(at, at + MARKS_PER_CALL).flatMap(([id, tickMs]) => [id, String(tickMs)]),
      );
      // A start-up gap check writes every schedule's mark: its calls are built, and their replies read, a few a turn.
      if ((at / MARKS_PER_CALL) % CALLS_PER_SLICE === CALLS_PER_SLICE - 1) await yieldToLoop();
    }
    for (const [callIndex, [error, values]] of ((await pipeline.exec()) ?? []).entries()) {
      if (error) throw error;
      (values as (string | null)[]).forEach((value, i) => {
        const [id] = entries[callIndex * MARKS_PER_CALL + i] as [string, number];
        previous.set(id, value === null ? undefined : Number(value));
      });
      if (callIndex % CALLS_PER_SLICE === CALLS_PER_SLICE - 1) await yieldToLoop();
    }
    return previous;
  }

  /** Drops the marks of schedules the config no longer has (a schedule added again later starts afresh). */
  async forgetMarks(scheduleIds: readonly string[]): Promise<void> {
    if (scheduleIds.length === 0) return;
    const pipeline = this.#redis.pipeline();
    for (let at = 0; at < scheduleIds.length; at += MARKS_PER_CALL)
      pipeline.hdel(MARKS_KEY, ...scheduleIds.slice(at, at + MARKS_PER_CALL));
    for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
  }

  async beat(
    replicaId: string,
    register: boolean,
    liveMs: number,
    forgetMs: number,
  ): Promise<{ serverMs: number; live: string[] }> {
    const [serverMs, ...live] = (await this.#redis.eval(
      BEAT,
      1,
      REPLICAS_KEY,
      replicaId,
      register ? '1' : '0',
      String(liveMs),
      String(forgetMs),
    )) as [number, ...string[]];
    return { serverMs, live };
  }

  async leave(replicaId: string): Promise<void> {
    await this.#redis.hdel(REPLICAS_KEY, replicaId);
  }

  /** Adds an operator's action to the schedule's audit trail, trimmed to its history retention. */
  async audit(scheduleId: string, action: ControlAction, retention: HistoryRetention): Promise<void> {
    await appendToHistory(this.#redis, auditKey(scheduleId), action.atMs, action, retention);
  }

  /** A schedule's newest `count` control actions, newest first. */
  audits(scheduleId: string, count: number): Promise<ControlAction[]> {
    return readHistory<ControlAction>(this.#redis, auditKey(scheduleId), count);
  }

  /** A schedule's newest `count` records, newest tick first. */
  async history(scheduleId: string, count: number = DEFAULT_HISTORY.keep): Promise<TickRecord[]> {
    const items = await this.#redis.zrevrange(historyKey(scheduleId), 0, count - 1);
    return items.map((json) => JSON.parse(json) as TickRecord);
  }

  /** Runs `script` once per ENTRIES_PER_CALL items, in one pipeline; the replies in order. */
  async #calls<T>(
    script: string,
    items: readonly T[],
    call: (slice: readonly T[]) => [keys: string[], args: string[]],
  ): Promise<unknown[]> {
    if (items.length === 0) return [];
    const pipeline = this.#redis.pipeline();
    for (let at = 0; at < items.length; at += ENTRIES_PER_CALL) {
      const [keys, args] = call(items.slice(at, at + ENTRIES_PER_CALL));
      pipeline.eval(script, keys.length, ...keys, ...args);
    }
    return ((await pipeline.exec()) ?? []).map(([error, reply]) => {
      if (error) throw error;
      return reply;
    });
  }
}
