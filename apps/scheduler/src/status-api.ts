import type { ApiHandler, ApiResponse } from '@tickwarden/runtime';
import { DEFAULT_COUNT, MAX_COUNT, type ScheduleStatus, type ScheduleSummary } from './schedule-status.ts';

/** Schedules per page of the list unless `?limit=` says otherwise (at most MAX_COUNT). */
const DEFAULT_LIMIT = 500;

const SCHEDULE_PATH = /^\/api\/schedules\/([a-z0-9-]+)\/([a-z0-9-]+)$/;

/** A whole number from `min` to `max` from the query, its default when absent; undefined when bad. */
export function wholeNumber(
  query: URLSearchParams,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number | undefined {
  const value = Number(query.get(name) ?? fallback);
  return Number.isInteger(value) && value >= min && value <= max ? value : undefined;
}

/** Why a query's number is refused. */
export const badNumberMessage = (query: URLSearchParams, name: string, min: number, max: number): string =>
  `${name}: expected a whole number from ${min} to ${max}, got "${query.get(name)}"`;

const badNumber = (query: URLSearchParams, name: string, min: number, max: number): ApiResponse => ({
  status: 400,
  body: { error: badNumberMessage(query, name, min, max) },
});

/** A summary as JSON: next ticks in ISO 8601 UTC. */
function summaryJson({ schedule, state, pause, next }: ScheduleSummary) {
  return {
    id: schedule.id,
    team: schedule.team,
    cron: schedule.cron,
    timezone: schedule.timezone,
    overlap: schedule.overlap,
    queue: schedule.queue,
    state,
    pause,
    next: next.map((tick) => new Date(tick).toISOString()),
  };
}

/**
 * The scheduler's read-only JSON API, what `tickwarden status` shows: `GET /api/schedules?limit=N&offset=M`
 * (a page of the schedules: state, next ticks; `total`) and `GET /api/schedules/<team>/<name>?count=N`
 * (one schedule, with its newest N tick records, runs and control actions, newest first).
 */
export function statusApi(status: ScheduleStatus): ApiHandler {
  return async (path, query): Promise<ApiResponse | undefined> => {
    if (path === '/api/schedules') {
      const limit = wholeNumber(query, 'limit', DEFAULT_LIMIT, 1, MAX_COUNT);
      if (limit === undefined) return badNumber(query, 'limit', 1, MAX_COUNT);
      const offset = wholeNumber(query, 'offset', 0, 0, Number.MAX_SAFE_INTEGER);
      if (offset === undefined) return badNumber(query, 'offset', 0, Number.MAX_SAFE_INTEGER);
      const { total, summaries } = await status.page(offset, limit);
      return { status: 200, body: { total, offset, schedules: summaries.map(summaryJson) } };
    }
    const match = SCHEDULE_PATH.exec(path);
    if (!match) return undefined;
    const id = `${match[1]}/${match[2]}`;
    const schedule = status.find(id);
    if (!schedule) return { status: 404, body: { error: `no schedule "${id}" in this replica's configuration` } };
    const count = wholeNumber(query, 'count', DEFAULT_COUNT, 1, MAX_COUNT);
    if (count === undefined) return badNumber(query, 'count', 1, MAX_COUNT);
    const { ticks, runs, actions, ...summary } = await status.detail(schedule, count);
    return { status: 200, body: { ...summaryJson(summary), ticks, runs, actions } };
  };
}
