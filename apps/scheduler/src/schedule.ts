import type { HistoryRetention } from '@tickwarden/config';
import type { Overlap } from '@tickwarden/contracts';

/**
 * What the scheduler needs of a schedule (a subset of the config's
 * ScheduleConfig, so a loaded config can be passed as is).
 */
export interface Schedule {
  /** `team/name`. */
  id: string;
  cron: string;
  timezone: string;
  overlap: Overlap;
  leaseTtlMs: number;
  jitterMs: number;
  catchUpMs: number;
  startDeadlineMs: number | undefined;
  maxRuntimeMs: number | undefined;
  attempts: number;
  backoff: { type: 'fixed' | 'exponential'; delayMs: number };
  paused: boolean;
  history: HistoryRetention;
  queue: string;
  payload: unknown;
}
