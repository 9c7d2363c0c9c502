import { fileURLToPath } from 'node:url';
import type { ExpectedSchedule } from './report.ts';

/** The ledger job (a POSIX shell script): see its header for the line format. */
export const LEDGER_JOB = fileURLToPath(new URL('../fixtures/ledger-job.sh', import.meta.url));

export interface LedgerTeamOptions {
  team: string;
  /** Schedule names; each runs the ledger job on `cron`. */
  names: readonly string[];
  /** Default every second. */
  cron?: string;
  ledgerFile: string;
  /** Default `2s`: short, so faults longer than a lease are quick to inject. */
  leaseTtl?: string;
  /** Default 3: a run lost with its worker is retried (after its lease is gone). */
  attempts?: number;
  /** Beats of 50 ms per run (default 6: a run takes about 0.35 s of a 1 s period). */
  beats?: number;
}

const EVERY_SECOND = '* * * * * *';

/** A team file whose `skip` schedules append to the ledger. */
export function ledgerTeamYaml(options: LedgerTeamOptions): string {
  const { team, names, ledgerFile, cron = EVERY_SECOND, leaseTtl = '2s', attempts = 3, beats = 6 } = options;
  const schedules = names.map((name) =>
    [
      `  - name: ${name}`,
      `    cron: "${cron}"`,
      `    overlap: skip`,
      `    leaseTtl: ${leaseTtl}`,
      `    attempts: ${attempts}`,
      `    handler:`,
      `      kind: command`,
      `      argv: [sh, ${JSON.stringify(LEDGER_JOB)}]`,
      `      env: { TICKWARDEN_LEDGER: ${JSON.stringify(ledgerFile)}, TICKWARDEN_LEDGER_BEATS: "${beats}" }`,
      `      killGrace: 1s`,
    ].join('\n'),
  );
  return `team: ${team}\nschedules:\n${schedules.join('\n')}\n`;
}

/** The schedules of a ledger team, as the report expects them. */
export function ledgerSchedules(team: string, names: readonly string[], cron = EVERY_SECOND): ExpectedSchedule[] {
  return names.map((name) => ({ id: `${team}/${name}`, cron }));
}
