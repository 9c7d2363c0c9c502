import type { ScheduleConfig } from '@tickwarden/config';
import { RunHistory, type ApiHandler, type ApiResponse } from '@tickwarden/runtime';
import type { Redis } from 'ioredis';
import { RedisReplicaStore } from './replica-store.ts';
import { TickPlanner } from './tick-planner.ts';

/** Records of each kind a request returns by default (`?count=`), and at most. */
const DEFAULT_COUNT = 20;
const MAX_COUNT = 1000;
/** Upcoming ticks listed per schedule. */
const NEXT_TICKS = 3;

const SCHEDULE_PATH = /^\/api\/schedules\/([a-z0-9-]+)\/([a-z0-9-]+)$/;

export interface StatusApiOptions {
  /** The schedules this replica runs now (its newest valid config). */
  schedules: () => readonly ScheduleConfig[];
  /** The queue Redis (the replica's connection): pauses, tick history, run history, audit trail. */
  redis: Redis;
  /** Wall time, ms. */
  now: () => number;
}

/**
 * The scheduler's read-only JSON API, what `tickwarden status` shows: `GET /api/schedules` (every
 * schedule: state, next ticks) and `GET /api/schedules/<team>/<name>?count=N` (one schedule, with
 * its newest N tick records, runs and control actions, newest first).
 */
export function statusApi(options: StatusApiOptions): ApiHandler {
  const store = new RedisReplicaStore(options.redis);
  const runs = new RunHistory(options.redis);
  const summary = (schedule: ScheduleConfig, pause: { by: string; atMs: number; note: string } | undefined) => {
    const planner = new TickPlanner(schedule);
    const next: string[] = [];
    for (let tick = planner.next(options.now()); tick !== undefined && next.length < NEXT_TICKS; tick = planner.next(tick)) next.push(new Date(tick).toISOString());
    const state = schedule.paused ? 'paused (config)' : pause ? 'paused' : 'active';
    return { id: schedule.id, team: schedule.team, cron: schedule.cron, timezone: schedule.timezone, overlap: schedule.overlap, queue: schedule.queue, state, pause, next };
  };
  return async (path, query): Promise<ApiResponse | undefined> => {
    if (path === '/api/schedules') {
      const paused = await store.paused();
      return { status: 200, body: options.schedules().map((schedule) => summary(schedule, paused.get(schedule.id))) };
    }
    const match = SCHEDULE_PATH.exec(path);
    if (!match) return undefined;
    const id = `${match[1]}/${match[2]}`;
    const schedule = options.schedules().find((candidate) => candidate.id === id);
    if (!schedule) return { status: 404, body: { error: `no schedule "${id}" in this replica's configuration` } };
    const count = Number(query.get('count') ?? DEFAULT_COUNT);
    if (!Number.isInteger(count) || count < 1 || count > MAX_COUNT) return { status: 400, body: { error: `count: expected a whole number from 1 to ${MAX_COUNT}, got "${query.get('count')}"` } };
    const [paused, ticks, ran, actions] = await Promise.all([store.paused(), store.history(id, count), runs.read(id, count), store.audits(id, count)]);
    return { status: 200, body: { ...summary(schedule, paused.get(id)), ticks, runs: ran, actions } };
  };
}
