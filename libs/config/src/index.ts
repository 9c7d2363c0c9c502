export { formatDuration, parseDuration } from './duration.ts';
export {
  parseSchedulerEnv,
  parseWorkerEnv,
  LOG_LEVELS,
  type EnvError,
  type EnvResult,
  type LogLevel,
  type SchedulerEnv,
  type WorkerEnv,
} from './env.ts';
export { formatConfigError } from './errors.ts';
export { loadConfig } from './load.ts';
export { redactUrl } from './redact.ts';
export type { BackoffType, ConfigError, ConfigResult, HandlerConfig, HttpMethod, Overlap, ScheduleConfig, TickwardenConfig } from './types.ts';
export { validateConfigText, validateConfigTexts, type ConfigText } from './validate.ts';
