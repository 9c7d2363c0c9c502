import type { ScheduleConfig } from '@tickwarden/config';
import { RunHistory, type RunRecord } from '@tickwarden/runtime';
import type { Redis } from 'ioredis';
import type { ControlAction, PauseRecord, TickRecord } from './ports.ts';
import { RedisReplicaStore } from './replica-store.ts';

/** Upcoming ticks listed per schedule. */
export const NEXT_TICKS = 3;
/** Records of each kind a schedule's page shows by default (`?count=`), and at most. */
export const DEFAULT_COUNT = 20;
export const MAX_COUNT = 1000;

export interface ScheduleStatusOptions {
  /** The schedules this replica runs now (its newest valid config). */
  schedules: () => readonly ScheduleConfig[];
  /** The queue Redis (the replica's connection): pauses, tick history, run history, audit trail. */
  redis: Redis;
  /** The next ticks of a schedule, from the replica's own planners (parsing 100,000 cron patterns per request would stall its tick loop). */
  upcoming: (scheduleId: string, afterMs: number, count: number) => number[];
  /** Wall time, ms. */
  now: () => number;
}

/** Whether a schedule fires: paused in the queue Redis (by an operator), or in its team file. */
export type ScheduleState = 'active' | 'paused' | 'paused (config)';

/** A schedule as the status API and the console list it. */
export interface ScheduleSummary {
  schedule: ScheduleConfig;
  state: ScheduleState;
  /** Who paused it, when and why (also while its team file pauses it). */
  pause: PauseRecord | undefined;
  /** Its next NEXT_TICKS ticks, epoch ms. */
  next: number[];
}

/** One schedule with its newest records of each kind, newest first. */
export interface ScheduleDetail extends ScheduleSummary {
  ticks: TickRecord[];
  runs: RunRecord[];
  actions: ControlAction[];
}

/** A schedule's newest tick record and run, when it has them. */
export interface LatestRecords {
  tick: TickRecord | undefined;
  run: RunRecord | undefined;
}

/** What the status API and the console read: the replica's schedules, with their state and histories from the queue Redis. */
export class ScheduleStatus {
  readonly #options: ScheduleStatusOptions;
  readonly #store: RedisReplicaStore;
  readonly #runs: RunHistory;

  constructor(options: ScheduleStatusOptions) {
    this.#options = options;
    this.#store = new RedisReplicaStore(options.redis);
    this.#runs = new RunHistory(options.redis);
  }

  /** The schedule `id` of this replica's configuration, if it has one. */
  find(id: string): ScheduleConfig | undefined {
    return this.#options.schedules().find((candidate) => candidate.id === id);
  }

  /** The schedules from `offset`, at most `limit`, in the configuration's order; `total` counts them all. */
  async page(offset: number, limit: number): Promise<{ total: number; summaries: ScheduleSummary[] }> {
    const all = this.#options.schedules();
    const paused = await this.#store.paused();
    return {
      total: all.length,
      summaries: all.slice(offset, offset + limit).map((schedule) => this.#summary(schedule, paused.get(schedule.id))),
    };
  }

  /** The schedule with its newest `count` tick records, runs and control actions. */
  async detail(schedule: ScheduleConfig, count: number): Promise<ScheduleDetail> {
    const [paused, ticks, runs, actions] = await Promise.all([
      this.#store.paused(),
      this.#store.history(schedule.id, count),
      this.#runs.read(schedule.id, count),
      this.#store.audits(schedule.id, count),
    ]);
    return { ...this.#summary(schedule, paused.get(schedule.id)), ticks, runs, actions };
  }

  /** Per schedule id, in order, its newest tick record and run (all sent at once: one round trip's wait for a page). */
  latest(ids: readonly string[]): Promise<LatestRecords[]> {
    return Promise.all(
      ids.map(async (id) => {
        const [[tick], [run]] = await Promise.all([this.#store.history(id, 1), this.#runs.read(id, 1)]);
        return { tick, run };
      }),
    );
  }

  #summary(schedule: ScheduleConfig, pause: PauseRecord | undefined): ScheduleSummary {
    const state = schedule.paused ? 'paused (config)' : pause ? 'paused' : 'active';
    return { schedule, state, pause, next: this.#options.upcoming(schedule.id, this.#options.now(), NEXT_TICKS) };
  }
}
