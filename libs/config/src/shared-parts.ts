import type { ConfigValue, HandlerConfig, ScheduleConfig } from './types.ts';

/**
 * One copy of the parts that many loaded schedules repeat. JSON.parse (the load worker's transfer)
 * gives every schedule its own copy of each string and object, so a big config held the same
 * file path, team, time zone and defaults once per schedule. A `SharedParts` lives for one load: the
 * schedules it has seen keep the first copy of each equal string, of each backoff and history
 * retention, and one empty object for empty headers and environments. The shared objects are
 * frozen, so code that tried to change one for a single schedule would throw instead of changing
 * it for all.
 */
export class SharedParts {
  readonly #strings = new Map<string, string>();
  readonly #objects = new Map<string, object>();

  /** Makes `schedule` use the shared copies of its repeated parts (in place) and returns it. */
  share(schedule: ScheduleConfig): ScheduleConfig {
    schedule.team = this.#string(schedule.team);
    schedule.cron = this.#string(schedule.cron);
    schedule.timezone = this.#string(schedule.timezone);
    schedule.queue = this.#string(schedule.queue);
    schedule.overlap = this.#string(schedule.overlap);
    schedule.source.file = this.#string(schedule.source.file);
    const { backoff, history } = schedule;
    schedule.backoff = this.#object(`backoff ${backoff.type} ${backoff.delayMs}`, backoff);
    schedule.history = this.#object(`history ${history.keep} ${history.maxAgeMs}`, history);
    this.#handler(schedule.handler);
    return schedule;
  }

  #handler(handler: HandlerConfig): void {
    handler.kind = this.#string(handler.kind);
    switch (handler.kind) {
      case 'http':
        handler.method = this.#string(handler.method);
        handler.redirects = this.#string(handler.redirects);
        handler.headers = this.#values(handler.headers);
        break;
      case 'command':
        handler.env = this.#values(handler.env);
        break;
      case 'module':
        handler.path = this.#string(handler.path);
        handler.exportName = this.#string(handler.exportName);
    }
  }

  /** Headers or an environment: the shared empty object when there are none. */
  #values(values: Record<string, ConfigValue>): Record<string, ConfigValue> {
    for (const _ in values) return values;
    return this.#object('{}', values);
  }

  #string<T extends string>(value: T): T {
    const shared = this.#strings.get(value);
    if (shared !== undefined) return shared as T;
    this.#strings.set(value, value);
    return value;
  }

  /** The first object seen under `key` (frozen), for objects equal whenever their keys are. */
  #object<T extends object>(key: string, value: T): T {
    const shared = this.#objects.get(key);
    if (shared !== undefined) return shared as T;
    this.#objects.set(key, Object.freeze(value));
    return value;
  }
}
