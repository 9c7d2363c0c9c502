import { fileURLToPath } from 'node:url';
import type { Overlap } from '@tickwarden/contracts';
import type { ExpectedSchedule } from './report.ts';

/** The ledger command (a bash script): see its header for the line format. */
export const LEDGER_JOB = fileURLToPath(new URL('../fixtures/ledger-job.sh', import.meta.url));
/** The ledger module (an ES module the worker runs in a thread): the same lines as the command. */
export const LEDGER_MODULE = fileURLToPath(new URL('../fixtures/ledger-module.mjs', import.meta.url));

/** How a ledger schedule runs: the command, the module, or an http call to the harness's ledger endpoint. */
export type LedgerHandlerKind = 'command' | 'module' | 'http';

/** One schedule writing the ledger, as a team would write it: only what is set here is in its YAML. */
export interface LedgerScheduleSpec {
  name: string;
  kind: LedgerHandlerKind;
  cron: string;
  /** Written only when set (the default is `skip`). */
  overlap?: Overlap;
  /** A duration (`3s`); written only when set (the default is 30 s). */
  leaseTtl?: string;
  /** A duration; written only when set. */
  catchUp?: string;
  /** Written only when set (the default is 1). */
  attempts?: number;
  /** How long a run works: drawn per tick between these, ms (default 100-3000). */
  minMs?: number;
  maxMs?: number;
  /** Command only: a fixed number of 50 ms beats instead of a drawn time (the end-to-end tests). */
  beats?: number;
}

/** Where ledger handlers write: the file, and the harness's ledger endpoint for http schedules. */
export interface LedgerTargets {
  ledgerFile: string;
  /** `http://127.0.0.1:<port>/run` (see `LedgerEndpoint`); required for http schedules. */
  httpUrl?: string;
}

const q = (text: string): string => JSON.stringify(text);

/** One schedule's YAML list item. */
export function ledgerScheduleYaml(spec: LedgerScheduleSpec, targets: LedgerTargets): string {
  const { minMs = 100, maxMs = 3000 } = spec;
  const lines = [`  - name: ${spec.name}`, `    cron: ${q(spec.cron)}`];
  if (spec.overlap !== undefined) lines.push(`    overlap: ${spec.overlap}`);
  if (spec.leaseTtl !== undefined) lines.push(`    leaseTtl: ${spec.leaseTtl}`);
  if (spec.catchUp !== undefined) lines.push(`    catchUp: ${spec.catchUp}`);
  if (spec.attempts !== undefined) lines.push(`    attempts: ${spec.attempts}`);
  switch (spec.kind) {
    case 'command': {
      const env =
        spec.beats !== undefined
          ? `TICKWARDEN_LEDGER_BEATS: "${spec.beats}"`
          : `TICKWARDEN_LEDGER_MIN_MS: "${minMs}", TICKWARDEN_LEDGER_MAX_MS: "${maxMs}"`;
      lines.push(
        `    handler:`,
        `      kind: command`,
        `      argv: [bash, ${q(LEDGER_JOB)}]`,
        `      env: { TICKWARDEN_LEDGER: ${q(targets.ledgerFile)}, ${env} }`,
        `      killGrace: 1s`,
      );
      break;
    }
    case 'module':
      lines.push(
        `    handler: { kind: module, path: ${q(LEDGER_MODULE)}, killGrace: 1s }`,
        `    payload: { ledger: ${q(targets.ledgerFile)}, minMs: ${minMs}, maxMs: ${maxMs} }`,
      );
      break;
    case 'http':
      if (targets.httpUrl === undefined)
        throw new Error(`schedule ${spec.name}: an http ledger schedule needs the ledger endpoint's URL`);
      lines.push(
        `    handler: { kind: http, url: ${q(targets.httpUrl)}, timeout: 10s }`,
        `    payload: { minMs: ${minMs}, maxMs: ${maxMs} }`,
      );
      break;
  }
  return lines.join('\n');
}

/** A team file of ledger schedules. */
export function ledgerTeamFile(team: string, specs: readonly LedgerScheduleSpec[], targets: LedgerTargets): string {
  return `team: ${team}\nschedules:\n${specs.map((spec) => ledgerScheduleYaml(spec, targets)).join('\n')}\n`;
}

/** A schedule of a ledger team, as the report expects it. */
export function expectedLedgerSchedule(team: string, spec: LedgerScheduleSpec): ExpectedSchedule {
  const leaseTtlMs = spec.leaseTtl === undefined ? 30_000 : parseSeconds(spec.leaseTtl);
  return {
    id: `${team}/${spec.name}`,
    cron: spec.cron,
    overlap: spec.overlap ?? 'skip',
    leaseTtlMs,
    attempts: spec.attempts ?? 1,
  };
}

/** `3s`, `2000ms`, `1.5s` -> ms (the few forms these suites write). */
function parseSeconds(duration: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)$/.exec(duration);
  if (!match) throw new Error(`ledger schedules write leaseTtl as <n>s or <n>ms, got "${duration}"`);
  return Math.round(Number(match[1]) * (match[2] === 's' ? 1000 : 1));
}

// The end-to-end tests' teams: `skip` command schedules with a fixed run length.

export interface LedgerTeamOptions {
  team: string;
  /** Schedule names; each runs the ledger command on `cron`. */
  names: readonly string[];
  /** Default every second. */
  cron?: string;
  ledgerFile: string;
  /** Default `2s`: short, so faults longer than a lease are quick to inject. */
  leaseTtl?: string;
  /** Not written by default: the default, 1, as a team's file would have it. */
  attempts?: number;
  /** Beats of 50 ms per run (default 6: a run takes about 0.35 s of a 1 s period). */
  beats?: number;
}

const EVERY_SECOND = '* * * * * *';

function legacySpecs(
  options: Pick<LedgerTeamOptions, 'names' | 'cron' | 'leaseTtl' | 'attempts' | 'beats'>,
): LedgerScheduleSpec[] {
  const { names, cron = EVERY_SECOND, leaseTtl = '2s', attempts, beats = 6 } = options;
  return names.map((name) => ({ name, kind: 'command', cron, overlap: 'skip', leaseTtl, attempts, beats }));
}

/** A team file whose `skip` schedules run the ledger command (the end-to-end tests). */
export function ledgerTeamYaml(options: LedgerTeamOptions): string {
  return ledgerTeamFile(options.team, legacySpecs(options), { ledgerFile: options.ledgerFile });
}

/** The schedules of a `ledgerTeamYaml` team, as the report expects them. */
export function ledgerSchedules(
  team: string,
  names: readonly string[],
  cron = EVERY_SECOND,
  leaseTtl = '2s',
  attempts?: number,
): ExpectedSchedule[] {
  return legacySpecs({ names, cron, leaseTtl, attempts }).map((spec) => expectedLedgerSchedule(team, spec));
}
