export { nextTickAfter, ticksAround } from './cron.ts';
export { formatDuration, parseDuration } from './duration.ts';
export {
  parseLauncherEnv,
  parseSchedulerEnv,
  parseWorkerEnv,
  CONTROL_TOKEN_FILE_VARIABLE,
  DEFAULT_CONTEST_LEAD_MS,
  DEFAULT_SECRETS_DIR,
  DEFAULT_STALLED_INTERVAL_MS,
  ENV_DURATION_MAX_MS,
  LAUNCHER_SOCKET_VARIABLE,
  LOG_LEVELS,
  REDIS_TLS_VARIABLES,
  type LauncherEnv,
  type LogLevel,
  type RedisTlsFiles,
  type SchedulerEnv,
  type WorkerEnv,
} from './env.ts';
export { formatConfigError, type EnvError, type EnvResult } from './errors.ts';
export {
  addressRefusal,
  ALLOW_VARIABLE,
  DEFAULT_HTTP_DESTINATIONS,
  DENY_VARIABLE,
  hostRefusal,
  httpDestinationErrors,
  parseHttpDestinations,
  type HttpDestinations,
} from './http-destinations.ts';
export { loadConfig } from './load.ts';
export { loadConfigOffThread } from './load-off-thread.ts';
export { redactUrl } from './redact.ts';
export {
  formatBytes,
  MAX_ATTEMPTS,
  MAX_BACKOFF_DELAY_MS,
  MAX_DURATION_MS,
  MAX_FILE_BYTES,
  MAX_HISTORY_AGE_MS,
  MAX_HISTORY_KEEP,
  MAX_JITTER_MS,
  MAX_PAYLOAD_BYTES,
  MAX_SCHEDULES,
  MAX_SCHEDULES_PER_FILE,
  MAX_TICK_WINDOW_MS,
} from './limits.ts';
export type {
  BackoffType,
  ConfigError,
  HistoryRetention,
  ConfigResult,
  ConfigValue,
  HandlerConfig,
  HttpMethod,
  HttpRedirects,
  SecretRef,
  ScheduleConfig,
  TickwardenConfig,
} from './types.ts';
export { validateConfigText, validateConfigTexts, type ConfigText } from './validate.ts';
export { DEFAULT_HISTORY } from './schema.ts';
export { TEAM_SCHEMA_FILE, teamFileJsonSchema, teamFileJsonSchemaText } from './json-schema.ts';
