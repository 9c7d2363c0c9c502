import type { Clock } from '@tickwarden/redlock';
import { scheduleConfig } from '@tickwarden/testkit';
import type { Schedule } from '../src/index.ts';

/** A schedule as the scheduler gets it from a team file; its tests always say when it fires. */
export function scheduleFixture(fields: Partial<Schedule> & Pick<Schedule, 'id' | 'cron'>): Schedule {
  return scheduleConfig(fields);
}

/**
 * A clock a test drives: monotonic and wall time move together on `advance`, and the wall clock
 * alone on `step` (an NTP step, a VM resume). Timers fire in order as time advances.
 */
export class ManualClock implements Clock {
  #mono = 1_000_000;
  #wallMs: number;
  #timers: { at: number; id: number; callback: () => void }[] = [];
  #nextId = 1;

  constructor(wallMs: number) {
    this.#wallMs = wallMs;
  }

  now(): number {
    return this.#mono;
  }

  wallMicros(): number {
    return this.#wallMs * 1000;
  }

  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.#nextId++;
    this.#timers.push({ at: this.#mono + ms, id, callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.#timers = this.#timers.filter((timer) => timer.id !== handle);
  }

  /** Moves both clocks on by `ms`, firing the timers due on the way. */
  advance(ms: number): void {
    const until = this.#mono + ms;
    for (;;) {
      const next = this.#timers.filter((timer) => timer.at <= until).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!next) break;
      this.#timers = this.#timers.filter((timer) => timer !== next);
      this.#wallMs += next.at - this.#mono;
      this.#mono = next.at;
      next.callback();
    }
    this.#wallMs += until - this.#mono;
    this.#mono = until;
  }

  /** Steps the wall clock alone (monotonic time does not move). */
  step(ms: number): void {
    this.#wallMs += ms;
  }
}
