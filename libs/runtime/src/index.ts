export { ConfigWatcher } from './config-watcher.ts';
export {
  boundPort,
  MAX_BODY_BYTES,
  startHttpServer,
  type ApiHandler,
  type ApiResponse,
  type HttpRoutes,
  type MetricsSource,
  type PageHandler,
  type PageRequest,
  type PageResponse,
  type ReadinessCheck,
} from './http-server.ts';
export { startLiveConfig, type LiveConfig, type LiveConfigOptions } from './live-config.ts';
export { envValid, exitUnlessStoppedWithin, processLogger, runMain, untilStopSignal } from './process-main.ts';
export { configHash, packageVersion, ProcessMetrics, type ObservedLockNodes } from './process-metrics.ts';
export { loadRedisTls, queueRedisOptions, redisOptionsFor } from './redis-tls.ts';
export {
  checkServerIdentities,
  IDENTITY_TIMEOUT_MS,
  sameServers,
  serverRunId,
  verifyServers,
  type NamedServer,
} from './server-identity.ts';
export { PROCESS_NODE_FLAGS } from './node-flags.ts';
export {
  CLOCK_OFFSET_WARN_MS,
  clockOffNow,
  followNodeTime,
  NODE_TIME_SAMPLE_MS,
  type TimeReference,
} from './node-time.ts';
export { PAUSED_KEY, pausedNow } from './pauses.ts';
export {
  appendToHistory,
  firstBytes,
  readHistory,
  RUN_ERROR_BYTES,
  RunHistory,
  type RunRecord,
} from './run-history.ts';
export { yieldToLoop } from './yield-to-loop.ts';
