export { Cluster, LIBFAKETIME, type AppProcess, type AppRole, type ClusterOptions, type StartAppOptions } from './cluster.ts';
export { checkLedger, parseLedger, readLedger, tickKey, type LedgerCheck, type LedgerEvent, type LedgerLine, type LedgerRun } from './ledger.ts';
export { LEDGER_JOB, ledgerSchedules, ledgerTeamYaml, type LedgerTeamOptions } from './ledger-config.ts';
export { buildReport, expectedTicks, formatReport, reportFailures, unexplainedMisses, type ExpectedSchedule, type MissReason, type OutageWindow, type ReportInput, type TickReport } from './report.ts';
export { ChaosRunner, FAULT_KINDS, planFaults, seededRandom, type AppliedFault, type ChaosSlots, type FaultKind, type PlannedFault, type PlanOptions } from './chaos.ts';
export { prettyLine } from './pretty.ts';
