import { describe, expect, it } from 'vitest';
import { validateConfigText, type ConfigError } from '../src/index.ts';
import { errorsOf, yaml } from './support.ts';

const FILE = 'teams/payments.yaml';
const head = ['team: payments', 'schedules:'];
/** A valid schedule (lines 3-7 of its file); the cases append one bad line 8 to it. */
const valid = [
  '  - name: nightly-report',
  '    cron: "0 2 * * *"',
  '    handler:',
  '      kind: http',
  '      url: https://example.com/hook',
];
const withLine = (line: string): string => yaml(...head, ...valid, line);
/** A file with one schedule `x` whose cron and handler are the given lines (3: name, 4: cron, 5: handler). */
const schedule = (cron: string, ...handler: string[]): string =>
  yaml(...head, '  - name: x', `    cron: ${cron}`, ...handler);
const moduleHandler = '    handler: { kind: module, path: ./x.js }';
const SCHEDULE_KEYS =
  'name, cron, timezone, handler, payload, overlap, leaseTtl, maxRuntime, startDeadline, catchUp, jitter, attempts, backoff, paused, history, queue';

interface Case {
  name: string;
  /** One file (FILE) or several. */
  files: string | { file: string; text: string }[];
  /** Every error, formatted, in order. */
  expected: string[];
}

const cases: Case[] = [
  {
    name: 'unknown top-level key',
    files: yaml('team: payments', 'owner: alice', 'schedules: []'),
    expected: ['teams/payments.yaml:2:1: owner: unknown key "owner" at the top level; expected one of team, schedules'],
  },
  {
    name: 'unknown schedule key, close to a known one',
    files: withLine('    timezon: Europe/Berlin'),
    expected: [
      'teams/payments.yaml:8:5: schedules[0].timezon: unknown key "timezon" in a schedule; did you mean "timezone"?',
    ],
  },
  {
    name: 'unknown schedule key',
    files: withLine('    retries: 3'),
    expected: [
      `teams/payments.yaml:8:5: schedules[0].retries: unknown key "retries" in a schedule; expected one of ${SCHEDULE_KEYS}`,
    ],
  },
  {
    name: 'unknown handler key (a key of another kind)',
    files: withLine('      argv: [echo]'),
    expected: [
      'teams/payments.yaml:8:7: schedules[0].handler.argv: unknown key "argv" in an http handler; expected one of kind, url, method, headers, timeout, redirects',
    ],
  },
  {
    name: 'missing team',
    files: yaml('schedules: []'),
    expected: ['teams/payments.yaml:1:1: team: missing required key "team": expected a team name like payments'],
  },
  {
    name: 'missing name (reported at the schedule mapping)',
    files: yaml(...head, '  - cron: "0 2 * * *"', moduleHandler),
    expected: [
      'teams/payments.yaml:3:5: schedules[0].name: missing required key "name": expected a schedule name like nightly-report',
    ],
  },
  {
    name: 'bad name pattern',
    files: yaml(...head, '  - name: Nightly_Report', '    cron: "0 2 * * *"', moduleHandler),
    expected: [
      'teams/payments.yaml:3:11: schedules[0].name: expected a schedule name of 1-63 lower-case letters, digits and "-", starting and ending with a letter or digit, got "Nightly_Report"',
    ],
  },
  {
    name: 'bad team pattern',
    files: yaml('team: -payments', 'schedules: []'),
    expected: [
      'teams/payments.yaml:1:7: team: expected a team name of 1-63 lower-case letters, digits and "-", starting and ending with a letter or digit, got "-payments"',
    ],
  },
  {
    name: 'duplicate name in one file',
    files: yaml(...head, ...valid, ...valid),
    expected: [
      'teams/payments.yaml:8:11: schedules[1].name: duplicate schedule name "nightly-report": already defined at line 3 of this file; names must be unique within a team',
    ],
  },
  {
    name: 'duplicate team/name across two files (names both files)',
    files: [
      { file: 'teams/a.yaml', text: yaml(...head, ...valid) },
      { file: 'teams/b.yaml', text: yaml('# more payments schedules', ...head, ...valid) },
    ],
    expected: [
      'teams/b.yaml:4:11: schedules[0].name: duplicate schedule "payments/nightly-report": defined in teams/a.yaml:3 and in teams/b.yaml:4; team/name must be unique across all files',
    ],
  },
  {
    name: 'cron with too many fields',
    files: schedule('"0 0 2 * * * 2030"', moduleHandler),
    expected: [
      'teams/payments.yaml:4:11: schedules[0].cron: invalid cron expression "0 0 2 * * * 2030": expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got 7',
    ],
  },
  {
    name: 'cron with too few fields',
    files: schedule('"0 2 *"', moduleHandler),
    expected: [
      'teams/payments.yaml:4:11: schedules[0].cron: invalid cron expression "0 2 *": expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got 3',
    ],
  },
  {
    name: 'cron value out of range (croner says why)',
    files: schedule('"61 * * * *"', moduleHandler),
    expected: [
      'teams/payments.yaml:4:11: schedules[0].cron: invalid cron expression "61 * * * *": Invalid value for minute: 61',
    ],
  },
  {
    name: 'cron that never fires',
    files: schedule('"0 0 30 2 *"', moduleHandler),
    expected: [
      'teams/payments.yaml:4:11: schedules[0].cron: invalid cron expression "0 0 30 2 *": it never fires (no date matches it)',
    ],
  },
  {
    name: 'cron that is not a string',
    files: schedule('5', moduleHandler),
    expected: [
      'teams/payments.yaml:4:11: schedules[0].cron: expected a cron expression string like "0 2 * * *", got the number 5',
    ],
  },
  {
    name: 'invalid timezone',
    files: withLine('    timezone: Europe/Atlantis'),
    expected: [
      'teams/payments.yaml:8:15: schedules[0].timezone: expected an IANA time zone like Europe/Berlin or UTC, got "Europe/Atlantis"',
    ],
  },
  {
    name: 'unknown handler kind',
    files: schedule('"0 2 * * *"', '    handler: { kind: grpc, url: "https://x" }'),
    expected: [
      'teams/payments.yaml:5:22: schedules[0].handler.kind: expected a handler kind: one of http, command, module, got "grpc"',
    ],
  },
  {
    name: 'handler without kind',
    files: schedule('"0 2 * * *"', '    handler: { url: "https://x" }'),
    expected: [
      'teams/payments.yaml:5:14: schedules[0].handler.kind: missing required key "kind": expected a handler kind: one of http, command, module',
    ],
  },
  {
    name: 'handler left empty',
    files: schedule('"0 2 * * *"', '    handler:'),
    expected: [
      'teams/payments.yaml:5:5: schedules[0].handler: expected a handler mapping with a kind (http, command, module), got an empty value',
    ],
  },
  {
    name: 'http without url',
    files: schedule('"0 2 * * *"', '    handler:', '      kind: http', '      method: GET'),
    expected: [
      'teams/payments.yaml:6:7: schedules[0].handler.url: missing required key "url": expected an http(s) URL string',
    ],
  },
  {
    name: 'http url that is not http(s), its password masked',
    files: schedule('"0 2 * * *"', '    handler: { kind: http, url: "ftp://deploy:hunter2@example.com/x" }'),
    expected: [
      'teams/payments.yaml:5:33: schedules[0].handler.url: expected an http:// or https:// URL, got "ftp://deploy:***@example.com/x"',
    ],
  },
  {
    name: 'http redirects neither none nor same-origin',
    files: withLine('      redirects: follow'),
    expected: [
      'teams/payments.yaml:8:18: schedules[0].handler.redirects: expected one of none, same-origin, got "follow"',
    ],
  },
  {
    name: 'http bad method',
    files: withLine('      method: post'),
    expected: [
      'teams/payments.yaml:8:15: schedules[0].handler.method: expected one of GET, POST, PUT, PATCH, DELETE, got "post"',
    ],
  },
  {
    name: 'http header value that is not a string',
    files: withLine('      headers: { X-Retry: 3 }'),
    expected: [
      'teams/payments.yaml:8:27: schedules[0].handler.headers.X-Retry: expected a string value (quote numbers and booleans) or { secret, key }, got the number 3',
    ],
  },
  {
    name: 'http header from a Secret whose name is not one',
    files: withLine('      headers: { X-Token: { secret: Team_Secrets, key: token } }'),
    expected: [
      'teams/payments.yaml:8:37: schedules[0].handler.headers.X-Token.secret: expected a Secret name (lower-case letters, digits, "-" and "."), got "Team_Secrets"',
    ],
  },
  {
    name: 'command env from a Secret with an unknown field',
    files: schedule(
      '"0 2 * * *"',
      '    handler: { kind: command, argv: ["true"], env: { TOKEN: { secret: s, key: k, file: x } } }',
    ),
    expected: ['teams/payments.yaml:5:82: schedules[0].handler.env.TOKEN.file: unknown key "file"'],
  },
  {
    name: 'command with empty argv',
    files: schedule('"0 2 * * *"', '    handler: { kind: command, argv: [] }'),
    expected: [
      'teams/payments.yaml:5:37: schedules[0].handler.argv: expected a non-empty list of strings: the program and its arguments',
    ],
  },
  {
    name: 'module without path',
    files: schedule('"0 2 * * *"', '    handler:', '      kind: module', '      export: run'),
    expected: [
      'teams/payments.yaml:6:7: schedules[0].handler.path: missing required key "path": expected a module path string',
    ],
  },
  {
    name: 'negative duration',
    files: withLine('    catchUp: -5m'),
    expected: [
      'teams/payments.yaml:8:14: schedules[0].catchUp: expected a duration like 30s, 10m, 2h, got "-5m" (a duration cannot be negative)',
    ],
  },
  {
    name: 'catchUp and startDeadline longer than whether a tick ran is kept',
    files: withLine('    catchUp: 2d\n    startDeadline: 25h'),
    expected: [
      'teams/payments.yaml:8:14: schedules[0].catchUp: expected a duration of at most 1d (whether a tick already ran is kept that long), got "2d"',
      'teams/payments.yaml:9:20: schedules[0].startDeadline: expected a duration of at most 1d (whether a tick already ran is kept that long), got "25h"',
    ],
  },
  {
    name: 'malformed duration',
    files: withLine('    jitter: 5 minutes'),
    expected: ['teams/payments.yaml:8:13: schedules[0].jitter: expected a duration like 30s, 10m, 2h, got "5 minutes"'],
  },
  {
    name: 'number as duration',
    files: withLine('    leaseTtl: 30'),
    expected: [
      'teams/payments.yaml:8:15: schedules[0].leaseTtl: expected a duration like 30s, 10m, 2h, got the number 30 (a duration needs a unit, e.g. 30s)',
    ],
  },
  {
    name: 'duration above the maximum',
    files: withLine('    maxRuntime: 30d'),
    expected: ['teams/payments.yaml:8:17: schedules[0].maxRuntime: expected a duration of at most 24d, got "30d"'],
  },
  {
    name: 'leaseTtl below 1s',
    files: withLine('    leaseTtl: 500ms'),
    expected: ['teams/payments.yaml:8:15: schedules[0].leaseTtl: expected a duration of at least 1s, got "500ms"'],
  },
  {
    name: 'attempts 0',
    files: withLine('    attempts: 0'),
    expected: ['teams/payments.yaml:8:15: schedules[0].attempts: expected an integer of at least 1, got the number 0'],
  },
  {
    name: 'attempts not an integer',
    files: withLine('    attempts: 2.5'),
    expected: [
      'teams/payments.yaml:8:15: schedules[0].attempts: expected an integer of at least 1, got the number 2.5',
    ],
  },
  {
    name: 'bad overlap',
    files: withLine('    overlap: queue'),
    expected: [
      'teams/payments.yaml:8:14: schedules[0].overlap: expected one of skip, allow, cancel-previous, got "queue"',
    ],
  },
  {
    name: 'bad backoff type',
    files: withLine('    backoff: { type: linear, delay: 1s }'),
    expected: [
      'teams/payments.yaml:8:22: schedules[0].backoff.type: expected a backoff type: one of fixed, exponential, got "linear"',
    ],
  },
  {
    name: 'bad queue name',
    files: withLine('    queue: Reports'),
    expected: [
      'teams/payments.yaml:8:12: schedules[0].queue: expected a queue name of 1-63 lower-case letters, digits and "-", starting with a letter or digit, got "Reports"',
    ],
  },
  {
    name: 'paused not a boolean (YAML 1.2: yes is a string)',
    files: withLine('    paused: yes'),
    expected: ['teams/payments.yaml:8:13: schedules[0].paused: expected true or false, got "yes"'],
  },
  {
    name: 'payload that is not JSON',
    files: withLine('    payload: { limit: .inf }'),
    expected: ['teams/payments.yaml:8:23: schedules[0].payload.limit: expected a JSON value, got the number Infinity'],
  },
  {
    name: 'YAML syntax error (reported where the string starts)',
    files: schedule('"0 2 * * *', moduleHandler),
    expected: ['teams/payments.yaml:4:11: YAML syntax error: missing closing " for the string that starts here'],
  },
  {
    name: 'YAML duplicate key',
    files: yaml('team: payments', 'team: billing', 'schedules: []'),
    expected: ['teams/payments.yaml:2:1: YAML syntax error: Map keys must be unique'],
  },
  {
    name: 'YAML alias without anchor',
    files: withLine('    payload: *defaults'),
    expected: ['teams/payments.yaml:8:14: YAML alias *defaults has no anchor &defaults before it'],
  },
  {
    name: 'schedules not a list',
    files: yaml('team: payments', 'schedules:', '  name: x'),
    expected: ['teams/payments.yaml:3:3: schedules: expected a list of schedules (it may be empty: []), got a mapping'],
  },
  {
    name: 'schedule that is not a mapping',
    files: yaml(...head, '  - nightly-report'),
    expected: [
      'teams/payments.yaml:3:5: schedules[0]: expected a schedule mapping with at least name, cron and handler, got "nightly-report"',
    ],
  },
  {
    name: 'empty file',
    files: '',
    expected: ['teams/payments.yaml:1:1: the file is empty: expected a mapping with the keys team and schedules'],
  },
  {
    name: 'top level not a mapping',
    files: yaml('- team: payments'),
    expected: ['teams/payments.yaml:1:1: expected a mapping with the keys team and schedules, got a list'],
  },
  {
    name: 'several errors in one file, all reported in order',
    files: yaml(
      'team: payments',
      'schedules:',
      '  - name: nightly-report',
      '    cron: "0 25 * * *"',
      '    timezone: Mars/Olympus',
      '    handler:',
      '      kind: command',
      '      argv: []',
      '      killGrace: 10',
      '    attempts: 0',
      '  - name: hourly',
      '    cron: "@hourly"',
      '    handler: { kind: module }',
      '    colour: blue',
    ),
    expected: [
      'teams/payments.yaml:4:11: schedules[0].cron: invalid cron expression "0 25 * * *": Invalid value for hour: 25',
      'teams/payments.yaml:5:15: schedules[0].timezone: expected an IANA time zone like Europe/Berlin or UTC, got "Mars/Olympus"',
      'teams/payments.yaml:8:13: schedules[0].handler.argv: expected a non-empty list of strings: the program and its arguments',
      'teams/payments.yaml:9:18: schedules[0].handler.killGrace: expected a duration like 30s, 10m, 2h, got the number 10 (a duration needs a unit, e.g. 10s)',
      'teams/payments.yaml:10:15: schedules[0].attempts: expected an integer of at least 1, got the number 0',
      'teams/payments.yaml:13:14: schedules[1].handler.path: missing required key "path": expected a module path string',
      `teams/payments.yaml:14:5: schedules[1].colour: unknown key "colour" in a schedule; expected one of ${SCHEDULE_KEYS}`,
    ],
  },
];

describe('configuration errors', () => {
  it('covers at least 25 bad inputs', () => {
    expect(cases.length).toBeGreaterThanOrEqual(25);
  });

  it.each(cases.map((testCase) => [testCase.name, testCase] as const))('%s', (_name, { files, expected }) => {
    expect(errorsOf(typeof files === 'string' ? [{ file: FILE, text: files }] : files)).toEqual(expected);
  });

  it('gives the structured fields behind the formatted line', () => {
    const result = validateConfigText(withLine('    timezone: Europe/Atlantis'), FILE);
    expect(result).toEqual({
      ok: false,
      errors: [
        {
          file: FILE,
          line: 8,
          column: 15,
          path: ['schedules', 0, 'timezone'],
          message: 'expected an IANA time zone like Europe/Berlin or UTC, got "Europe/Atlantis"',
        } satisfies ConfigError,
      ],
    });
  });

  it('still checks the cron expression when the time zone is invalid', () => {
    const errors = errorsOf([
      {
        file: FILE,
        text: yaml(...head, '  - name: x', '    cron: "0 2 * * 8"', '    timezone: Nowhere', moduleHandler),
      },
    ]);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(
      /^teams\/payments\.yaml:4:11: schedules\[0\]\.cron: invalid cron expression "0 2 \* \* 8": /,
    );
    expect(errors[1]).toMatch(/^teams\/payments\.yaml:5:15: schedules\[0\]\.timezone: /);
  });

  it('reports an unknown key inside a merged anchor at the anchor, for every schedule that merges it', () => {
    const text = yaml(
      'team: payments',
      'schedules:',
      '  - &hourly',
      '    name: a',
      '    cron: "0 * * * *"',
      '    handler: { kind: module, path: ./a.js }',
      '    retry: 3',
      '  - <<: *hourly',
      '    name: b',
    );
    expect(errorsOf([{ file: FILE, text }])).toEqual([
      `teams/payments.yaml:7:5: schedules[0].retry: unknown key "retry" in a schedule; expected one of ${SCHEDULE_KEYS}`,
      `teams/payments.yaml:7:5: schedules[1].retry: unknown key "retry" in a schedule; expected one of ${SCHEDULE_KEYS}`,
    ]);
  });

  it('rejects an unknown YAML tag instead of silently reading a string', () => {
    expect(errorsOf([{ file: FILE, text: withLine('    payload: !!binary aGVsbG8=') }])).toEqual([
      'teams/payments.yaml:8:14: YAML: Unresolved tag: tag:yaml.org,2002:binary',
    ]);
  });

  it('rejects a payload that contains itself through an alias', () => {
    const errors = errorsOf([{ file: FILE, text: withLine('    payload: &loop [1, *loop]') }]);
    expect(errors).toEqual([
      'teams/payments.yaml:8:24: schedules[0].payload[1]: expected a JSON value, got a list or mapping that contains itself (through a YAML alias)',
    ]);
  });

  it('collects the errors of every file, in file order', () => {
    const errors = errorsOf([
      { file: 'teams/a.yaml', text: yaml('team: a', 'schedules: nope') },
      { file: 'teams/b.yaml', text: yaml('team: B', 'schedules: []') },
      { file: 'teams/c.yaml', text: yaml(...head, ...valid) },
    ]);
    expect(errors).toEqual([
      'teams/a.yaml:2:12: schedules: expected a list of schedules (it may be empty: []), got "nope"',
      'teams/b.yaml:1:7: team: expected a team name of 1-63 lower-case letters, digits and "-", starting and ending with a letter or digit, got "B"',
    ]);
  });
});
