export { peersToMarkRevoked, predecessorsWaitUntil, unseenRevokedUntil, type ActivePeer } from './cancel-previous.ts';
export {
  COMMAND_GUARD_UNAVAILABLE,
  CommandGuard,
  GUARD_READY_TIMEOUT_MS,
  GUARD_RESPAWN_DELAY_MS,
  hostMonotonicMs,
  type CommandGuardOptions,
} from './command-guard.ts';
export {
  deferralsOf,
  handlerStarted,
  lostAttemptsOf,
  lostFinish,
  lostStart,
  markDeferred,
  markFinished,
  markHandlerStarted,
  type DeferralMarks,
  type FinishedMark,
  type HandlerStartedMark,
  type LastDeferral,
  type RunProgress,
  type StartMark,
} from './run-progress.ts';
export { runCommand, type CommandHandlerConfig } from './handlers/command.ts';
export { LEASE_KILL_MARGIN_MS, type CommandRunOptions } from './handlers/guarded-program.ts';
export { HTTP_DESTINATION_REFUSED, HTTP_ERROR_BODY_LIMIT, runHttp, type HttpHandlerConfig } from './handlers/http.ts';
export { runHandler, type HandlerOptions } from './handlers/index.ts';
export { resolveModulePath, runModule, type ModuleHandlerConfig } from './handlers/module.ts';
export { DEFAULT_OUTPUT_LIMITS, OutputLog, type OutputLimits } from './handlers/output.ts';
export { HandlerError, type LeaseValidity, type RunContext, type RunDetails } from './run-context.ts';
export {
  CANCEL_PREVIOUS_EXTEND_MS,
  DEFER_DELAY_MS,
  DEFER_JITTER_MS,
  FINISHED_MARK_WAIT_MS,
  JobRunner,
  PREDECESSOR_POLL_MS,
  RunAbortedError,
  TAKEOVER_SLACK_MS,
  type AbortKind,
  type JobRunnerOptions,
  type RunResult,
} from './job-runner.ts';
export {
  BEHIND_WAIT_MS,
  firstStart,
  leaseNodeTimeoutMs,
  MAX_LEASE_NODE_TIMEOUT_MS,
  NOT_YET_WINDOW_MS,
  heldByRun,
  QUORUM_WAIT_MS,
  runFences,
  START_RETRY_MS,
  startOrder,
  type FirstStartOptions,
  type TicksAround,
} from './first-start.ts';
export { WorkerMetrics } from './metrics.ts';
export { LeaseValidityTracker, RunLeaseValidity } from './run-lease.ts';
export {
  lockDurationFor,
  MAX_STALLED_COUNT,
  MIN_LOCK_DURATION_MS,
  QUORUM_POLL_MS,
  WorkerService,
  type WorkerServiceOptions,
} from './worker-service.ts';
export { RemoteLauncher } from './launcher-client.ts';
export { LAUNCHER_UNAVAILABLE } from './launcher-protocol.ts';
export { LauncherServer, type LauncherServerOptions } from './launcher-server.ts';
export {
  GuardLauncher,
  type LaunchedProgram,
  type ProgramExit,
  type ProgramLauncher,
  type ProgramSpec,
} from './handlers/program.ts';
