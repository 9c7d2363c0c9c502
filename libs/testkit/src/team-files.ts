import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { validateConfigText, type ScheduleConfig } from '@tickwarden/config';

// The defaults live in the config's schema: reading the smallest team file gets them from there.
const MINIMAL_TEAM_FILE = JSON.stringify({
  team: 'team',
  schedules: [{ name: 'job', cron: '* * * * * *', handler: { kind: 'command', argv: ['true'] } }],
});

let defaults: ScheduleConfig | undefined;

function minimalSchedule(): ScheduleConfig {
  if (defaults === undefined) {
    const result = validateConfigText(MINIMAL_TEAM_FILE, '/etc/tickwarden/team.yaml');
    if (!result.ok) throw new Error(`the minimal team file is invalid: ${JSON.stringify(result.errors)}`);
    defaults = result.config.schedules[0] as ScheduleConfig;
  }
  return defaults;
}

/**
 * A schedule as a team file that gives only its name, an every-second cron and a command handler
 * yields (every other field the config's default), with `fields` on top; team and name follow the id.
 */
export function scheduleConfig(fields: Partial<ScheduleConfig> & Pick<ScheduleConfig, 'id'>): ScheduleConfig {
  const [team = 'team', name = 'job'] = fields.id.split('/');
  return { ...structuredClone(minimalSchedule()), team, name, ...fields };
}

/**
 * Writes `broken.yaml` into `dir`: a team file with an invalid cron and an unknown handler kind.
 * Returns where an app must report them (`file:line`), for checking that it names every error.
 */
export function writeBrokenTeamFile(dir: string): string[] {
  writeFileSync(
    path.join(dir, 'broken.yaml'),
    'team: e2e\nschedules:\n  - name: x\n    cron: "61 * * * *"\n    handler: { kind: nope }\n',
  );
  return ['broken.yaml:4', 'broken.yaml:5'];
}
