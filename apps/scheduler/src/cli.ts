// `tickwarden`: validate config, preview ticks, pause/resume/trigger/backfill schedules and show their status.
// One table, COMMANDS, holds every command: its arguments, options, help and handler; parsing, the
// help texts and the exit codes follow from it (a new command is one more entry). This module
// loads nothing heavy: a command's work (cli-actions.ts: the config loader, Redis, BullMQ) is
// imported only when it runs, so `--help`, `--version` and usage errors answer at once.
// Run by bin/tickwarden.js (`npx tickwarden`), or `node --conditions=@tickwarden/source src/cli.ts`.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BACKFILL_MAX_LIMIT, DEFAULT_BACKFILL_MAX } from './backfill-plan.ts';

/** Exit codes, as the usage documents them. */
const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** Help text lines are at most this long. */
const WIDTH = 100;

/** The most ticks `next` lists and `status` shows per schedule (`-n`). */
const MAX_COUNT = 10_000;

interface Option {
  type: 'string' | 'boolean';
  short?: string;
  /** What a string option's value is, in the usage: `COUNT`, `TEXT`. */
  value?: string;
  help: string;
}

type Values = Readonly<Record<string, string | boolean | undefined>>;

interface Command {
  /** Positional arguments as the usage names them; `[NAME]` is optional (only at the end). */
  args: readonly string[];
  /** One line for the command list. */
  summary: string;
  /** What `tickwarden <command> --help` says about it. */
  details: string;
  options: Readonly<Record<string, Option>>;
  /** What the command reads from the environment, if anything. */
  env?: string;
  /** When it exits 1. */
  fails: string;
  run(args: readonly string[], values: Values): Promise<number>;
}

const actions = () => import('./cli-actions.ts');

const count = (what: string): Option => ({
  type: 'string',
  short: 'n',
  value: 'COUNT',
  help: `${what} (default 5, at most ${MAX_COUNT})`,
});
const NOTE: Option = { type: 'string', value: 'TEXT', help: 'why, kept in the audit trail (status shows it)' };
const BY: Option = {
  type: 'string',
  value: 'NAME',
  help: 'who, kept in the audit trail (default $TICKWARDEN_ACTOR, else <user>@<host>: under kubectl exec, the pod)',
};
/** The note and actor of a control command. */
const said = (values: Values) => ({
  note: typeof values['note'] === 'string' ? values['note'] : '',
  by: typeof values['by'] === 'string' ? values['by'] : undefined,
});
const REDIS_ENV = 'TICKWARDEN_CONFIG, TICKWARDEN_QUEUE_REDIS (and more: tickwarden --help)';
const QUEUE_FAILS = 'the queue Redis not reached or not answering in time';

const COMMANDS: Readonly<Record<string, Command>> = {
  validate: {
    args: ['PATH'],
    summary: 'check config files as CI would (no Redis needed)',
    details: `Loads the config at PATH (a YAML file or a directory of them) as the replicas do, with the
http destination policy of TICKWARDEN_HTTP_ALLOW and TICKWARDEN_HTTP_DENY when they are set, and
prints a summary; an invalid config prints every error as file:line:column: field: problem.`,
    options: {},
    env: 'TICKWARDEN_HTTP_ALLOW, TICKWARDEN_HTTP_DENY (optional)',
    fails: 'the config has errors',
    run: async ([path]) => (await actions()).validate(path as string),
  },
  next: {
    args: ['PATH', 'SCHEDULE'],
    summary: 'upcoming ticks of a schedule, in its time zone (no Redis needed)',
    details: `The next COUNT ticks of SCHEDULE in the config at PATH, in the schedule's time zone, as
2026-03-29 03:00:00 GMT+2.`,
    options: {
      count: count('how many ticks'),
      json: {
        type: 'boolean',
        help: 'one JSON object per line: schedule, tick (ISO 8601, UTC), tickMs, timezone, local',
      },
    },
    fails: 'only on an unexpected error (a bad PATH or SCHEDULE is a config error)',
    run: async ([path, id], values) => {
      const n = countOf(values);
      return (await actions()).next(path as string, id as string, n, values['json'] === true);
    },
  },
  pause: {
    args: ['SCHEDULE'],
    summary: 'stop firing a schedule, on every replica',
    details: `Every replica records the schedule's ticks skipped-paused until "tickwarden resume". The pause
is kept in the queue Redis with who and when, and added to the schedule's audit trail; status shows both.`,
    options: { note: NOTE, by: BY },
    env: REDIS_ENV,
    fails: QUEUE_FAILS,
    run: async ([id], values) => (await actions()).pause(id as string, said(values)),
  },
  resume: {
    args: ['SCHEDULE'],
    summary: 'fire it again',
    details: 'Every replica fires the schedule again from its next tick. Added to the audit trail.',
    options: { note: NOTE, by: BY },
    env: REDIS_ENV,
    fails: QUEUE_FAILS,
    run: async ([id], values) => (await actions()).resume(id as string, said(values)),
  },
  trigger: {
    args: ['SCHEDULE'],
    summary: 'enqueue one run now (a lease and a job, like a tick)',
    details: `Takes a lease with its own claim (manual:<ms>) on a quorum of the lock nodes and publishes the
job <team>/<name>@manual-<ms> as a replica publishes a tick's; prints the job id and the fencing
token. Lock nodes not reached are named on stderr; fewer than a quorum fails the command. Added to
the audit trail with its job.`,
    options: { note: NOTE, by: BY },
    env: 'TICKWARDEN_CONFIG, TICKWARDEN_QUEUE_REDIS, TICKWARDEN_LOCK_NODES, TICKWARDEN_LOCK_QUORUM (and more: tickwarden --help)',
    fails: `${QUEUE_FAILS}, a quorum of the lock nodes not reached, or the job not enqueued`,
    run: async ([id], values) => (await actions()).trigger(id as string, said(values)),
  },
  backfill: {
    args: ['SCHEDULE'],
    summary: 'run the past ticks of a range that did not run, each once',
    details: `Fires each tick of SCHEDULE from --from to --to (both included) that did not run: skipped while
paused, skipped for an overlap, missed (no replica, no lock quorum, the queue Redis down), or whose
job ended without running (missed its start deadline, skipped, superseded). Ticks that ran, are
queued or running, or have no recorded outcome are left alone and listed with the reason. Each
fired tick goes through its own claim on the lock nodes, so a backfill run twice, or beside
another, fires nothing twice. Its job <team>/<name>@<tick ms>-backfill is due at once, has no
start deadline and waits while another run holds the schedule's lease: runs of an overlap: skip
or cancel-previous schedule go one at a time, not necessarily in tick order. Refused: a range in
the future, one of more than --max ticks, or one older than the schedule's kept tick history
(its history setting). Added to the audit trail.`,
    options: {
      from: {
        type: 'string',
        value: 'TIME',
        help: 'first instant of the range: ISO 8601 with a zone (2026-11-27T22:00:00Z, 2026-11-27T23:00+01:00), "now", or a duration before now (now-90m, now-6h)',
      },
      to: { type: 'string', value: 'TIME', help: 'last instant of the range, as --from (default: now)' },
      max: {
        type: 'string',
        value: 'COUNT',
        help: `refuse a range of more ticks than this (default ${DEFAULT_BACKFILL_MAX}, at most ${BACKFILL_MAX_LIMIT})`,
      },
      'dry-run': { type: 'boolean', help: 'list what would be fired, and why the rest would not; fire nothing' },
      json: {
        type: 'boolean',
        help: 'one JSON object per tick: schedule, tick, tickMs, action (fire, skip), why, jobId',
      },
      note: NOTE,
      by: BY,
    },
    env: 'TICKWARDEN_CONFIG, TICKWARDEN_QUEUE_REDIS, TICKWARDEN_LOCK_NODES, TICKWARDEN_LOCK_QUORUM (and more: tickwarden --help)',
    fails: `${QUEUE_FAILS}, a quorum of the lock nodes not reached, or a job not enqueued`,
    run: async ([id], values) => {
      if (typeof values['from'] !== 'string') throw new UsageError('backfill needs --from TIME');
      const raw = values['max'];
      const max = raw === undefined ? DEFAULT_BACKFILL_MAX : Number(raw);
      if (!Number.isInteger(max) || max < 1 || max > BACKFILL_MAX_LIMIT)
        throw new UsageError(`--max must be a whole number from 1 to ${BACKFILL_MAX_LIMIT}, got "${String(raw)}"`);
      const range = {
        from: values['from'],
        to: typeof values['to'] === 'string' ? values['to'] : 'now',
        max,
        dryRun: values['dry-run'] === true,
      };
      return (await actions()).backfill(id as string, range, values['json'] === true, said(values));
    },
  },
  status: {
    args: ['[SCHEDULE]'],
    summary: 'state, next ticks and last tick records of every schedule, or one',
    details: `Per schedule (every one, or SCHEDULE only): active or paused (by whom, when, why), the next 3
ticks in its time zone, the newest COUNT tick records, newest tick first, with outcome, BullMQ job
state, lag and replica, and the ticks missed while no replica ran; then the newest
COUNT runs (outcome, attempt, worker, fence, duration, exit code or HTTP status, error) and control
actions (pause, resume, trigger: who, when, note). The histories outlive BullMQ's jobs, as long
as each schedule's history setting keeps them.`,
    options: {
      count: count('records of each kind per schedule'),
      json: {
        type: 'boolean',
        help: "the tick records only: one JSON object per line (schedule, tick and the record's fields), newest tick first",
      },
      runs: { type: 'boolean', help: 'with --json: the run records instead' },
      actions: { type: 'boolean', help: 'with --json: the control actions instead' },
    },
    env: REDIS_ENV,
    fails: QUEUE_FAILS,
    run: async ([id], values) => {
      const n = countOf(values);
      const kind = values['runs'] === true ? 'runs' : values['actions'] === true ? 'actions' : 'ticks';
      if (kind !== 'ticks' && values['json'] !== true)
        throw new UsageError('--runs and --actions go with --json (the text output shows every kind)');
      return (await actions()).status(id, n, values['json'] === true ? kind : undefined);
    },
  },
};

const HELP_OPTION: Option = { type: 'boolean', short: 'h', help: 'this help' };

const EXIT_CODES = `Exit codes:
  0  done
  1  the operation failed: a Redis server not reached, or not answering within its timeout (3 s to
     connect and answer the handshake, 5 s per command), a config "validate" found invalid, a
     trigger or backfill that could not take its claim or enqueue its job
  2  usage or config error: bad arguments, an unknown schedule, an invalid TICKWARDEN_CONFIG or
     environment, a Node.js older than the repository needs`;

/** A command's synopsis: `tickwarden next PATH SCHEDULE [-n COUNT] [--json]`. */
function synopsis(name: string, command: Command): string {
  const options = Object.entries(command.options).map(
    ([long, option]) => `[${option.short ? `-${option.short}` : `--${long}`}${option.value ? ` ${option.value}` : ''}]`,
  );
  return ['tickwarden', name, ...command.args, ...options].join(' ');
}

function usage(): string {
  const width =
    Math.max(...Object.entries(COMMANDS).map(([name, command]) => `${name} ${command.args.join(' ')}`.length)) + 2;
  const list = Object.entries(COMMANDS).map(
    ([name, command]) => `  ${`${name} ${command.args.join(' ')}`.padEnd(width)}${command.summary}`,
  );
  return `usage: tickwarden <command> [options]
       tickwarden <command> --help | tickwarden help <command>   what a command does, its options
       tickwarden --version

Commands:
${list.join('\n')}

SCHEDULE is team/name. pause, resume, trigger, backfill and status read the scheduler's environment:
TICKWARDEN_CONFIG, TICKWARDEN_QUEUE_REDIS and TICKWARDEN_LOCK_NODES (trigger and backfill take claims
there; TICKWARDEN_LOCK_QUORUM with an even count), and for rediss:// URLs
TICKWARDEN_REDIS_TLS_CA, TICKWARDEN_REDIS_TLS_CERT and TICKWARDEN_REDIS_TLS_KEY.

${EXIT_CODES}
`;
}

/** `text` in lines of at most {@link WIDTH} characters that start at column `indent` (the first one already there). */
function wrap(text: string, indent: number): string {
  const lines = [''];
  for (const word of text.split(' ')) {
    const line = lines[lines.length - 1] as string;
    if (line !== '' && indent + line.length + 1 + word.length > WIDTH) lines.push(word);
    else lines[lines.length - 1] = line === '' ? word : `${line} ${word}`;
  }
  return lines.join(`\n${' '.repeat(indent)}`);
}

function help(name: string, command: Command): string {
  const options = Object.entries({ ...command.options, help: HELP_OPTION }).map(
    ([long, option]) =>
      [
        `${option.short ? `-${option.short}, ` : '    '}--${long}${option.value ? ` ${option.value}` : ''}`,
        option.help,
      ] as const,
  );
  const width = Math.max(...options.map(([flags]) => flags.length)) + 2;
  return `usage: ${synopsis(name, command)}

${command.details}

Options:
${options.map(([flags, text]) => `  ${flags.padEnd(width)}${wrap(text, 2 + width)}`).join('\n')}
${command.env ? `\n${wrap(`Environment: ${command.env}`, 0)}\n` : ''}
${wrap(`Exit codes: 0 done; 1 ${command.fails}; 2 usage or config error.`, 0)}
`;
}

/** `tickwarden 0.0.0 (Node.js v24.1.0, linux-x64)`: the repository's version (root package.json). */
function version(): string {
  let version = 'unknown';
  try {
    version =
      (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string })
        .version ?? version;
  } catch {
    // Run from a copy without the root package.json: the version stays unknown.
  }
  return `tickwarden ${version} (Node.js ${process.version}, ${process.platform}-${process.arch})\n`;
}

/** A usage error: printed with the command's usage (or the command list), exit 2. */
class UsageError extends Error {}

function countOf(values: Values): number {
  const raw = values['count'];
  const n = raw === undefined ? 5 : Number(raw);
  if (typeof raw === 'boolean' || !Number.isInteger(n) || n < 1 || n > MAX_COUNT)
    throw new UsageError(`-n (--count) must be a whole number from 1 to ${MAX_COUNT}, got "${String(raw)}"`);
  return n;
}

function commandNamed(name: string): Command {
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) throw new UsageError(`unknown command "${name}"`);
  return command;
}

/** Prints `text` to stdout: exit code 0. */
function out(text: string): number {
  process.stdout.write(text);
  return EXIT.ok;
}

/** Runs one command line; returns the exit code. Errors are reported here, never thrown. */
async function main(argv: readonly string[]): Promise<number> {
  let name: string | undefined;
  try {
    const [first, ...rest] = argv;
    if (first === undefined) throw new UsageError('no command given');
    if (first === '--help' || first === '-h') return out(usage());
    if (first === '--version' || first === '-V') return out(version());
    if (first === 'help') {
      if (rest.length > 1 || rest[0]?.startsWith('-')) throw new UsageError('help takes at most 1 argument (COMMAND)');
      return out(rest[0] === undefined ? usage() : help(rest[0], commandNamed(rest[0])));
    }
    if (first.startsWith('-')) throw new UsageError(`unknown option "${first}" (options go after the command)`);
    const command = commandNamed(first);
    name = first;
    let parsed: { values: Values; positionals: string[] };
    try {
      const options = Object.fromEntries(
        Object.entries({ ...command.options, help: HELP_OPTION }).map(([long, { type, short }]) => [
          long,
          short ? { type, short } : { type },
        ]),
      );
      parsed = parseArgs({ args: rest, options, allowPositionals: true, strict: true });
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message : String(error));
    }
    if (parsed.values['help']) return out(help(first, command));
    const required = command.args.filter((arg) => !arg.startsWith('[')).length;
    const given = parsed.positionals.length;
    if (given < required || given > command.args.length) {
      const expected = required === command.args.length ? `${required}` : `${required} to ${command.args.length}`;
      throw new UsageError(`${first} takes ${expected} argument(s) (${command.args.join(' ')}), got ${given}`);
    }
    return await command.run(parsed.positionals, parsed.values);
  } catch (error) {
    process.stderr.write(`tickwarden: ${error instanceof Error ? error.message : String(error)}\n`);
    if (error instanceof UsageError) {
      const command = name === undefined ? undefined : COMMANDS[name];
      process.stderr.write(
        name === undefined || !command
          ? `\n${usage()}`
          : `usage: ${synopsis(name, command)}\nRun "tickwarden ${name} --help" for more.\n`,
      );
      return EXIT.usage;
    }
    // cli-actions.ts's ConfigError (a bad config, environment or schedule name) carries exit code 2.
    return error instanceof Error && 'exitCode' in error && error.exitCode === EXIT.usage ? EXIT.usage : EXIT.failed;
  }
}

// A reader that stops early (`| head`) closes the pipe: stop quietly, as other command-line tools do.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(0);
});

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
  // Every connection is closed by now: should a library still hold the event loop (a timer, a
  // socket), exit anyway rather than hang.
  setTimeout(() => process.exit(code), 1000).unref();
});
