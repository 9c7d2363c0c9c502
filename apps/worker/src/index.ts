export { runCommand, type CommandHandlerConfig } from './handlers/command.ts';
export { HTTP_ERROR_BODY_LIMIT, runHttp, type HttpHandlerConfig } from './handlers/http.ts';
export { runHandler } from './handlers/index.ts';
export { resolveModulePath, runModule, type ModuleHandlerConfig } from './handlers/module.ts';
export { DEFAULT_OUTPUT_LIMITS, OutputLog, type OutputLimits } from './handlers/output.ts';
export { HandlerError, type RunContext, type RunDetails } from './handlers/types.ts';
export { JobRunner, RunAbortedError, TAKEOVER_SLACK_MS, type AbortKind, type JobRunnerOptions, type RunResult } from './job-runner.ts';
export { RUN_OUTCOMES, WorkerMetrics, type RunOutcome } from './metrics.ts';
export { lockDurationFor, MIN_LOCK_DURATION_MS, WorkerService, type WorkerServiceOptions } from './worker-service.ts';
