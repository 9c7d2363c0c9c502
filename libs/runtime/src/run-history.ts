import type { HistoryRetention } from '@tickwarden/config';
import type { RunOutcome } from '@tickwarden/contracts';
import type { Redis } from 'ioredis';

/**
 * Each schedule's run history in the queue Redis: one entry per job attempt that ended (the
 * worker writes it; `tickwarden status` and the console read it), kept after BullMQ removed the
 * job. Its own key prefix, so the workers' Redis user may write it and nothing of the replicas'.
 */
const runsKey = (scheduleId: string): string => `tickwarden:runs:{${scheduleId}}`;

/** The first bytes of a run's error the history keeps (the logs have it whole). */
export const RUN_ERROR_BYTES = 256;

/** One job attempt's end. */
export interface RunRecord {
  tickMs: number;
  jobId: string;
  outcome: RunOutcome;
  attempt: number | undefined;
  worker: string | undefined;
  fence: number | undefined;
  /** When the attempt began and ended, wall ms. */
  startedAtMs: number;
  endedAtMs: number;
  exitCode?: number | undefined;
  /** The HTTP status of an http handler. */
  status?: number | undefined;
  /** The first RUN_ERROR_BYTES of the error or abort reason. */
  error?: string | undefined;
}

/**
 * append: adds an entry to a history and trims it to the newest `keep` entries younger than
 * `maxAge`. KEYS[1] the history (a sorted set by time); ARGV[1] score (ms), ARGV[2] entry (JSON),
 * ARGV[3] keep, ARGV[4] drop entries scored before this (ms). Returns the entries kept.
 */
const APPEND = `
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[3]) - 1)
return redis.call('ZCARD', KEYS[1])
`;

/** Cuts `text` to at most `bytes` UTF-8 bytes, on a character boundary. */
export function firstBytes(text: string, bytes = RUN_ERROR_BYTES): string {
  const buffer = Buffer.from(text);
  if (buffer.length <= bytes) return text;
  // Decoding a cut multi-byte character gives U+FFFD: drop it.
  return buffer
    .subarray(0, bytes)
    .toString('utf8')
    .replace(/\uFFFD$/, '');
}

/** Adds `entry` at `atMs` to the history at `key` (a sorted set by time), trimmed to `retention`: one EVAL. */
export async function appendToHistory(
  redis: Redis,
  key: string,
  atMs: number,
  entry: unknown,
  retention: HistoryRetention,
): Promise<void> {
  await redis.eval(
    APPEND,
    1,
    key,
    String(atMs),
    JSON.stringify(entry),
    String(retention.keep),
    String(atMs - retention.maxAgeMs),
  );
}

/** The newest `count` entries of the history at `key`, newest first. */
export async function readHistory<T>(redis: Redis, key: string, count: number): Promise<T[]> {
  return (await redis.zrevrange(key, 0, count - 1)).map((json) => JSON.parse(json) as T);
}

/** Writes and reads the run histories (one EVAL per run: its own round trip, off the run's path). */
export class RunHistory {
  readonly #redis: Redis;

  constructor(redis: Redis) {
    this.#redis = redis;
  }

  async append(scheduleId: string, record: RunRecord, retention: HistoryRetention): Promise<void> {
    const entry: RunRecord = record.error === undefined ? record : { ...record, error: firstBytes(record.error) };
    await appendToHistory(this.#redis, runsKey(scheduleId), record.endedAtMs, entry, retention);
  }

  /** The newest `count` runs, newest first. */
  read(scheduleId: string, count: number): Promise<RunRecord[]> {
    return readHistory<RunRecord>(this.#redis, runsKey(scheduleId), count);
  }
}
