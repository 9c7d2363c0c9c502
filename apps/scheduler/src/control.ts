import type { Redis } from 'ioredis';

/**
 * Operator state shared by every replica, kept in the queue Redis: paused
 * schedules and the recent history of each schedule's ticks. All its keys
 * are built here.
 */
const KEY_PREFIX = 'tickwarden:control';
const PAUSED_KEY = `${KEY_PREFIX}:paused`;
const historyKey = (scheduleId: string) => `${KEY_PREFIX}:history:{${scheduleId}}`;
/** Ticks kept per schedule for `status`. */
export const HISTORY_LENGTH = 20;

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

  async record(scheduleId: string, tick: TickRecord): Promise<void> {
    // A pipeline, not MULTI: the two commands need no isolation, and a transaction per tick costs twice the round trips.
    await this.#redis.pipeline().lpush(historyKey(scheduleId), JSON.stringify(tick)).ltrim(historyKey(scheduleId), 0, HISTORY_LENGTH - 1).exec();
  }

  async history(scheduleId: string, count = HISTORY_LENGTH): Promise<TickRecord[]> {
    const items = await this.#redis.lrange(historyKey(scheduleId), 0, count - 1);
    return items.map((json) => JSON.parse(json) as TickRecord);
  }
}
