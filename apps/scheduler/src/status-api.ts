import type { ScheduleConfig } from '@tickwarden/config';
import { RunHistory, type ApiHandler, type ApiResponse } from '@tickwarden/runtime';
import type { Redis } from 'ioredis';
import { RedisReplicaStore } from './replica-store.ts';

/** Records of each kind a request returns by default (`?count=`), and at most; schedules per page of the list (`?limit=`), likewise. */
const DEFAULT_COUNT = 20;
const MAX_COUNT = 1000;
const DEFAULT_LIMIT = 500;
/** Upcoming ticks listed per schedule. */
const NEXT_TICKS = 3;

const SCHEDULE_PATH = /^\/api\/schedules\/([a-z0-9-]+)\/([a-z0-9-]+)$/;

export interface StatusApiOptions {
  /** The schedules this replica runs now (its newest valid config). */
  schedules: () => readonly ScheduleConfig[];
  /** The queue Redis (the replica's connection): pauses, tick history, run history, audit trail. */
  redis: Redis;
  /** The next ticks of a schedule, from the replica's own planners (parsing 50,000 cron patterns per request would stall its tick loop). */
  upcoming: (scheduleId: string, afterMs: number, count: number) => number[];
  /** Wall time, ms. */
  now: () => number;
}

/** A whole number from `min` to `max` from the query, its default when absent; undefined when bad. */
function wholeNumber(query: URLSearchParams, name: string, fallback: number, min: number, max: number): number | undefined {
  const value = Number(query.get(name) ?? fallback);
  return Number.isInteger(value) && value >= min && value <= max ? value : undefined;
}

const badNumber = (query: URLSearchParams, name: string, min: number, max: number): ApiResponse => ({ status: 400, body: { error: `${name}: expected a whole number from ${min} to ${max}, got "${query.get(name)}"` } });

/**
 * The scheduler's read-only JSON API, what `tickwarden status` shows: `GET /api/schedules?limit=N&offset=M`
 * (a page of the schedules: state, next ticks; `total`) and `GET /api/schedules/<team>/<name>?count=N`
 * (one schedule, with its newest N tick records, runs and control actions, newest first).
 */
export function statusApi(options: StatusApiOptions): ApiHandler {
  const store = new RedisReplicaStore(options.redis);
  const runs = new RunHistory(options.redis);
  const summary = (schedule: ScheduleConfig, pause: { by: string; atMs: number; note: string } | undefined) => {
    const next = options.upcoming(schedule.id, options.now(), NEXT_TICKS).map((tick) => new Date(tick).toISOString());
    const state = schedule.paused ? 'paused (config)' : pause ? 'paused' : 'active';
    return { id: schedule.id, team: schedule.team, cron: schedule.cron, timezone: schedule.timezone, overlap: schedule.overlap, queue: schedule.queue, state, pause, next };
  };
  return async (path, query): Promise<ApiResponse | undefined> => {
    if (path === '/api/schedules') {
      const all = options.schedules();
      const limit = wholeNumber(query, 'limit', DEFAULT_LIMIT, 1, MAX_COUNT);
      if (limit === undefined) return badNumber(query, 'limit', 1, MAX_COUNT);
      const offset = wholeNumber(query, 'offset', 0, 0, Number.MAX_SAFE_INTEGER);
      if (offset === undefined) return badNumber(query, 'offset', 0, Number.MAX_SAFE_INTEGER);
      const paused = await store.paused();
      return { status: 200, body: { total: all.length, offset, schedules: all.slice(offset, offset + limit).map((schedule) => summary(schedule, paused.get(schedule.id))) } };
    }
    const match = SCHEDULE_PATH.exec(path);
    if (!match) return undefined;
    const id = `${match[1]}/${match[2]}`;
    const schedule = options.schedules().find((candidate) => candidate.id === id);
    if (!schedule) return { status: 404, body: { error: `no schedule "${id}" in this replica's configuration` } };
    const count = wholeNumber(query, 'count', DEFAULT_COUNT, 1, MAX_COUNT);
    if (count === undefined) return badNumber(query, 'count', 1, MAX_COUNT);
    const [paused, ticks, ran, actions] = await Promise.all([store.paused(), store.history(id, count), runs.read(id, count), store.audits(id, count)]);
    return { status: 200, body: { ...summary(schedule, paused.get(id)), ticks, runs: ran, actions } };
  };
}
