export type { Schedule } from './schedule.ts';
export { contestNodeTimeoutMs, LATE_TICK_WINDOW_MS, ORPHAN_CHECK_DELAY_MS, Scheduler, type SchedulerOptions, type TickOutcome } from './scheduler.ts';
export { TickPlanner } from './tick-planner.ts';
