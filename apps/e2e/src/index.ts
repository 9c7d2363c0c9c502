export { Cluster, LIBFAKETIME, writeClockOffset, type AppProcess, type AppRole, type ClusterOptions, type StartAppOptions } from './cluster.ts';
export { checkLedger, parseLedger, readLedger, splitTickKey, tickKey, type CheckOptions, type FenceRegression, type LedgerCheck, type LedgerEvent, type LedgerLine, type LedgerRun, type Overlap } from './ledger.ts';
export {
  expectedLedgerSchedule,
  LEDGER_JOB,
  LEDGER_MODULE,
  ledgerScheduleYaml,
  ledgerSchedules,
  ledgerTeamFile,
  ledgerTeamYaml,
  type LedgerHandlerKind,
  type LedgerScheduleSpec,
  type LedgerTargets,
  type LedgerTeamOptions,
} from './ledger-config.ts';
export { LedgerEndpoint, runLengthMs, type LedgerEndpointStats } from './ledger-endpoint.ts';
export {
  buildReport,
  expectedTicks,
  formatReport,
  outageOf,
  reportFailures,
  unexplainedByOutcome,
  unexplainedMisses,
  WORKER_RECOVERY_MS,
  type ExpectedSchedule,
  type FailureRules,
  type HeldTick,
  type LogRecord,
  type MissedTick,
  type MissReason,
  type OutageWindow,
  type OverlapPolicy,
  type ReportInput,
  type StartLag,
  type TickReport,
  type WorkerFaultWindow,
} from './report.ts';
export { ChaosRunner, FAULT_KINDS, LATE_RESTART_AFTER_MS, planFaults, seededRandom, type AppliedFault, type ChaosRunnerOptions, type ChaosSlots, type FaultKind, type LockNodeRestart, type PlannedFault, type PlanOptions } from './chaos.ts';
export { prettyLine } from './pretty.ts';
