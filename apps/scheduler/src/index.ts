export {
  MISS_REASONS,
  TICK_OBSERVATIONS,
  TICK_OUTCOMES,
  type MissReason,
  type TickObservation,
  type TickOutcome,
} from './outcomes.ts';
export type { Schedule } from './schedule.ts';
export { Scheduler, type SchedulerOptions } from './scheduler.ts';
export type { OutcomeEvent, OutcomeListener, ObservationListener } from './tick-recorder.ts';
export { claimTakeover, contestLoss, contestNodeTimeoutMs } from './tick-contest.ts';
export { TickPlanner } from './tick-planner.ts';
export { LATE_TICK_WINDOW_MS, RECOVERY_DELAY_MS, tickWindow } from './tick-window.ts';
