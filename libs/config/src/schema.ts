import { OVERLAPS } from '@tickwarden/contracts';
import * as z from 'zod';
import { isTimeZone } from './cron.ts';
import { DURATION_PATTERN, formatDuration, parseDuration } from './duration.ts';
import { describeValue } from './errors.ts';
import {
  MAX_ATTEMPTS,
  MAX_BACKOFF_DELAY_MS,
  MAX_DURATION_MS,
  MAX_HISTORY_AGE_MS,
  MAX_HISTORY_KEEP,
  MAX_JITTER_MS,
  MAX_PAYLOAD_BYTES,
  MAX_SCHEDULES_PER_FILE,
  MAX_TICK_WINDOW_MS,
  formatBytes,
} from './limits.ts';

/**
 * The zod schema of one team file. Every message says what was expected; a message of the form
 * `expected X, got Y` becomes `missing required key "k" (expected X)` when the key is absent
 * (see `issueMessage` in validate.ts). Durations come out in milliseconds; the cron expression
 * and duplicate names are checked after the schema (they need the time zone and other schedules).
 *
 * The `.meta()` calls (descriptions, examples, and the duration pattern) document the schema for
 * editors: `teamFileJsonSchema` (json-schema.ts) turns it into the JSON Schema of a team file, as a
 * team writes it (its input). Metadata changes neither what is accepted nor any message. Defaults
 * of durations are `.prefault`s, written as a team would write them (`'30s'`), so the JSON Schema
 * can show them; they go through the same parsing as a written value.
 */

/** DNS label: 1-63 lower-case letters, digits and `-`, starting and ending with a letter or digit. */
export const NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
export const QUEUE_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

interface IssueInput {
  readonly input?: unknown;
}

/** The error function of a schema: `expected <what>` (plus `, got <value>` when there is a value). */
export function expecting(what: string): (issue: IssueInput) => string {
  return (issue) =>
    issue.input === undefined ? `expected ${what}` : `expected ${what}, got ${describeValue(issue.input)}`;
}

const DURATION_EXAMPLE = 'a duration like 30s, 10m, 2h';

/** The JSON Schema of every duration's input (its bounds are in each field's description). */
const DURATION_META = {
  pattern: DURATION_PATTERN,
  minLength: 1,
  // a VS Code extension keyword, shown instead of the pattern when a value does not match
  patternErrorMessage: `expected ${DURATION_EXAMPLE}: a number with a unit ms, s, m, h or d, or several, largest first (1h30m)`,
};

/** The part of a duration field's description that says what it accepts. */
function durationText(min: number, max = MAX_DURATION_MS): string {
  const bounds =
    min === 0
      ? `at most ${formatDuration(max)}`
      : min === 1
        ? `more than 0s, at most ${formatDuration(max)}`
        : `from ${formatDuration(min)} to ${formatDuration(max)}`;
  return `A duration like 30s, 10m or 1h30m, ${bounds}`;
}

function duration(
  min: number,
  max = MAX_DURATION_MS,
  why = '',
): z.ZodPipe<z.ZodString, z.ZodTransform<number, string>> {
  const atLeast =
    min === 0 ? '' : min === 1 ? 'a duration greater than 0s' : `a duration of at least ${formatDuration(min)}`;
  return z
    .string({
      error: (issue) =>
        typeof issue.input === 'number'
          ? `expected ${DURATION_EXAMPLE}, got ${describeValue(issue.input)} (a duration needs a unit, e.g. ${issue.input}s)`
          : expecting(DURATION_EXAMPLE)(issue),
    })
    .meta(DURATION_META)
    .transform((text, ctx) => {
      const ms = parseDuration(text);
      let message: string | undefined;
      if (ms === undefined) {
        message = `expected ${DURATION_EXAMPLE}, got ${describeValue(text)}`;
        if (/^\s*-/.test(text)) message += ' (a duration cannot be negative)';
      } else if (ms < min) message = `expected ${atLeast}, got ${describeValue(text)}`;
      else if (ms > max)
        message = `expected a duration of at most ${formatDuration(max)}${why}, got ${describeValue(text)}`;
      if (message === undefined && ms !== undefined) return ms;
      ctx.addIssue({ code: 'custom', message, input: text });
      return z.NEVER;
    });
}

const NAME_RULE = '1-63 lower-case letters, digits and "-", starting and ending with a letter or digit';

const dnsName = (what: string, example: string): z.ZodString =>
  z
    .string({ error: expecting(`a ${what} like ${example}`) })
    .regex(NAME_PATTERN, { error: expecting(`a ${what} of ${NAME_RULE}`) })
    .meta({ patternErrorMessage: `expected a ${what} of ${NAME_RULE}`, examples: [example] });

/** A Kubernetes Secret's name (a DNS subdomain) and one of its keys. */
const SECRET_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const SECRET_KEY = /^(?!\.{1,2}$)[-._a-zA-Z0-9]{1,253}$/;

/**
 * A value a worker reads at run time from a Secret it mounts (`TICKWARDEN_SECRETS_DIR/<secret>/<key>`):
 * the value is never in a schedule file, a job, a log line or the tick history.
 */
const secretRef = z
  .strictObject({
    secret: z
      .string()
      .regex(SECRET_NAME, { error: expecting('a Secret name (lower-case letters, digits, "-" and ".")') })
      .meta({
        description: 'The name of a Kubernetes Secret the worker mounts (lower-case letters, digits, "-" and ".").',
      }),
    key: z
      .string()
      .regex(SECRET_KEY, { error: expecting('a key of the Secret (letters, digits, "-", "_" and ".")') })
      .meta({ description: 'One key of the Secret (letters, digits, "-", "_" and ".").' }),
  })
  .meta({
    title: 'value from a Secret',
    description:
      'Read by the worker at each run from $TICKWARDEN_SECRETS_DIR/<secret>/<key> (default /var/run/tickwarden/secrets), so the value is never in this file, a job, a log line or the history.',
  });

const stringMap = (what: string, keyWhat: string, keyPattern: RegExp) =>
  z.record(
    z.string().regex(keyPattern, { error: expecting(keyWhat) }),
    z.union([z.string(), secretRef], {
      error: expecting('a string value (quote numbers and booleans) or { secret, key }'),
    }),
    { error: expecting(`a mapping of ${what} to string values`) },
  );

const isHttpUrl = (text: string): boolean => {
  try {
    const url = new URL(text);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.host !== '';
  } catch {
    return false;
  }
};

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
/** Which redirects an http handler follows: none (a 3xx fails the run), or those to the same origin. */
export const HTTP_REDIRECTS = ['none', 'same-origin'] as const;

/**
 * What `isHttpUrl` accepts, loosely, for editors: an http or https scheme in any case, after the
 * leading control characters and spaces that `URL` strips. It rejects no URL the validator accepts
 * but one with a tab or line break inside its scheme (which `URL` drops).
 */
const HTTP_URL_HINT = '^[\\u0000-\\u0020]*[Hh][Tt][Tt][Pp][Ss]?:';

const httpHandler = z
  .strictObject({
    kind: z.literal('http').meta({ description: 'An HTTP request to url.' }),
    url: z
      .string({ error: expecting('an http(s) URL string') })
      .refine(isHttpUrl, { error: expecting('an http:// or https:// URL') })
      .meta({
        description:
          'The http:// or https:// URL to call. Hosts may be restricted by TICKWARDEN_HTTP_ALLOW and TICKWARDEN_HTTP_DENY.',
        pattern: HTTP_URL_HINT,
        patternErrorMessage: 'expected an http:// or https:// URL',
        examples: ['https://example.com/hooks/report'],
      }),
    method: z
      .enum(HTTP_METHODS, { error: expecting(`one of ${HTTP_METHODS.join(', ')}`) })
      .default('POST')
      .meta({ description: `The request method (upper case): ${HTTP_METHODS.join(', ')}. Default POST.` }),
    headers: stringMap('header names', "a header name (letters, digits and !#$%&'*+-.^_`|~)", HEADER_NAME)
      .refine(
        (headers) => Object.values(headers).every((value) => typeof value !== 'string' || !/[\r\n\0]/.test(value)),
        {
          error: 'expected header values without line breaks or NUL characters',
        },
      )
      .default({})
      .meta({
        description:
          'Header name -> string value (quote numbers: X-Retry: "3"), or { secret, key } to read the value from a Secret at run time. Default {}.',
      }),
    timeout: duration(1)
      .prefault('30s')
      .meta({ description: `${durationText(1)}: how long the request may take. Default 30s.` }),
    redirects: z
      .enum(HTTP_REDIRECTS, { error: expecting(`one of ${HTTP_REDIRECTS.join(', ')}`) })
      .default('none')
      .meta({
        description:
          'none (default): a 3xx response fails the run; same-origin: follow redirects to the same scheme, host and port (at most 5). A redirect never takes the body or headers to another origin.',
      }),
  })
  .meta({ title: 'http handler', description: 'Calls url; a run succeeds with a 2xx response.' });

const KILL_GRACE_TEXT = `${durationText(0)}: how long after SIGTERM the process group is sent SIGKILL. Default 10s.`;

const commandHandler = z
  .strictObject({
    kind: z.literal('command').meta({ description: 'A program run without a shell.' }),
    argv: z
      .array(z.string({ error: expecting('a string argument') }), {
        error: expecting('a list of strings: the program and its arguments'),
      })
      .min(1, { error: 'expected a non-empty list of strings: the program and its arguments' })
      .refine((argv) => argv[0] !== '', {
        error: 'expected the program (the first argv entry) to be a non-empty string',
        path: [0],
      })
      .meta({
        description: 'The program, then its arguments (no shell): a non-empty list of strings.',
        examples: [['node', 'cleanup.js', '--all']],
      }),
    cwd: z
      .string({ error: expecting('a directory path string') })
      .min(1, { error: 'expected a non-empty directory path' })
      .optional()
      .meta({ description: 'The directory the program runs in (a non-empty path). Default: none.' }),
    env: stringMap('environment variable names', 'an environment variable name (no "=")', /^[^=\0]+$/)
      .default({})
      .meta({
        description:
          "Variable name -> string value, or { secret, key } to read the value from a Secret at run time; added to an allowlist of the worker's variables, never its whole environment. Default {}.",
      }),
    killGrace: duration(0).prefault('10s').meta({ description: KILL_GRACE_TEXT }),
  })
  .meta({
    title: 'command handler',
    description: 'Runs argv with the payload as JSON on stdin; exit code 0 is success.',
  });

const moduleHandler = z
  .strictObject({
    kind: z.literal('module').meta({ description: 'A JavaScript module export, called in a process of its own.' }),
    path: z
      .string({ error: expecting('a module path string') })
      .min(1, { error: 'expected a non-empty module path' })
      .meta({
        description: "The module to import: absolute, or relative to this file's directory.",
        examples: ['./jobs/digest.js'],
      }),
    export: z
      .string({ error: expecting('an export name string') })
      .regex(IDENTIFIER, { error: expecting('an export name (a JavaScript identifier such as default or run)') })
      .default('default')
      .meta({
        description: 'The export to call (a JavaScript identifier). Default default.',
        patternErrorMessage: 'expected a JavaScript identifier such as default or run',
      }),
    killGrace: duration(0).prefault('10s').meta({ description: KILL_GRACE_TEXT }),
  })
  .meta({
    title: 'module handler',
    description:
      'Imports path and calls its export once with the run (schedule, tick, payload, an AbortSignal, a logger).',
  });

export const HANDLER_KINDS = ['http', 'command', 'module'] as const;

const handler = z
  .discriminatedUnion('kind', [httpHandler, commandHandler, moduleHandler], {
    error: (issue) =>
      issue.code === 'invalid_union'
        ? // the discriminator: `input` is the handler mapping, not the value of `kind`
          expecting(`a handler kind: one of ${HANDLER_KINDS.join(', ')}`)({ input: kindOf(issue.input) })
        : expecting(`a handler mapping with a kind (${HANDLER_KINDS.join(', ')})`)(issue),
  })
  .meta({
    description: `What a run does, chosen by kind (${HANDLER_KINDS.join(', ')}); each kind allows only its own keys.`,
  });

function kindOf(input: unknown): unknown {
  return typeof input === 'object' && input !== null && !Array.isArray(input)
    ? (input as Record<string, unknown>)['kind']
    : input;
}

/** Any JSON value of at most MAX_PAYLOAD_BYTES: no `.inf`/`.nan`, no binary or other tagged types. */
const jsonValue = z.unknown().superRefine((value, ctx) => {
  let json = true;
  const problem = (path: (string | number)[], input: unknown, message: string): void => {
    json = false;
    ctx.addIssue({ code: 'custom', path, input, message });
  };
  const ancestors = new Set<unknown>(); // a YAML alias can make a list contain itself: `a: &a [*a]`
  const visit = (node: unknown, path: (string | number)[]): void => {
    if (node === null || typeof node === 'string' || typeof node === 'boolean') return;
    if (typeof node === 'number') {
      if (!Number.isFinite(node)) problem(path, node, `expected a JSON value, got ${describeValue(node)}`);
      return;
    }
    const plain =
      typeof node === 'object' &&
      (Array.isArray(node) || [Object.prototype, null].includes(Object.getPrototypeOf(node)));
    if (!plain) {
      problem(
        path,
        node,
        `expected a JSON value (string, number, boolean, null, list or mapping), got ${describeValue(node)}`,
      );
      return;
    }
    if (ancestors.has(node)) {
      problem(path, node, 'expected a JSON value, got a list or mapping that contains itself (through a YAML alias)');
      return;
    }
    ancestors.add(node);
    for (const [key, item] of Array.isArray(node) ? node.entries() : Object.entries(node)) visit(item, [...path, key]);
    ancestors.delete(node);
  };
  visit(value, []);
  // Only a JSON value has a JSON size (one that contains itself has none).
  const bytes = json ? jsonBytes(value) : 0;
  if (bytes > MAX_PAYLOAD_BYTES)
    problem([], value, `expected a payload of at most ${formatBytes(MAX_PAYLOAD_BYTES)} as JSON, got ${bytes} bytes`);
});

/**
 * The UTF-8 length of a JSON value as `JSON.stringify` writes it, counted without building the
 * text (YAML aliases can repeat one big value many times over).
 */
function jsonBytes(value: unknown): number {
  if (value === null || typeof value !== 'object') return Buffer.byteLength(JSON.stringify(value));
  const entries: [string | undefined, unknown][] = Array.isArray(value)
    ? value.map((item) => [undefined, item])
    : Object.entries(value);
  let bytes = 2 + Math.max(0, entries.length - 1); // the brackets, and a comma between entries
  for (const [key, item] of entries)
    bytes += (key === undefined ? 0 : Buffer.byteLength(JSON.stringify(key)) + 1) + jsonBytes(item);
  return bytes;
}

const TICK_WINDOW_WHY = ' (whether a tick already ran is kept that long)';

export const BACKOFF_TYPES = ['fixed', 'exponential'] as const;

const backoff = z.strictObject(
  {
    type: z
      .enum(BACKOFF_TYPES, { error: expecting(`a backoff type: one of ${BACKOFF_TYPES.join(', ')}`) })
      .default('fixed')
      .meta({
        description:
          'fixed (default): wait delay before each retry; exponential: wait delay × 2^(n-2) before attempt n.',
      }),
    delay: duration(0, MAX_BACKOFF_DELAY_MS)
      .prefault('0s')
      .meta({ description: `${durationText(0, MAX_BACKOFF_DELAY_MS)}. Default 0s.` }),
  },
  { error: expecting('a backoff mapping like { type: exponential, delay: 1s }') },
);

/** Defaults of a schedule's `history`: what `status` and the console show, and what it costs in the queue Redis. */
export const DEFAULT_HISTORY = Object.freeze({ keep: 20, maxAge: 7 * 86_400_000 });

const history = z.strictObject(
  {
    keep: z
      .number({ error: expecting(`an integer from 1 to ${MAX_HISTORY_KEEP}`) })
      .int({ error: expecting(`an integer from 1 to ${MAX_HISTORY_KEEP}`) })
      .min(1, { error: expecting(`an integer from 1 to ${MAX_HISTORY_KEEP}`) })
      .max(MAX_HISTORY_KEEP, { error: expecting(`an integer from 1 to ${MAX_HISTORY_KEEP}`) })
      .default(DEFAULT_HISTORY.keep)
      .meta({
        description: `How many entries of each kind (tick outcomes, run results, control actions) are kept: 1 to ${MAX_HISTORY_KEEP}. Default ${DEFAULT_HISTORY.keep}.`,
      }),
    maxAge: duration(60_000, MAX_HISTORY_AGE_MS)
      .prefault(formatDuration(DEFAULT_HISTORY.maxAge))
      .meta({
        description: `${durationText(60_000, MAX_HISTORY_AGE_MS)}: how long an entry is kept. Default ${formatDuration(DEFAULT_HISTORY.maxAge)}.`,
      }),
  },
  { error: expecting('a history mapping like { keep: 50, maxAge: 14d }') },
);

const schedule = z
  .strictObject(
    {
      name: dnsName('schedule name', 'nightly-report').meta({
        description: `The schedule's name: ${NAME_RULE}. team/name must be unique across all files.`,
      }),
      cron: z.string({ error: expecting('a cron expression string like "0 2 * * *"') }).meta({
        description:
          "When it fires: 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first, in croner syntax (*/5, 1-5, MON-FRI, L, #), or a nickname (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly). Read in the schedule's time zone; an expression that never fires is an error (tickwarden validate checks it).",
        examples: ['0 2 * * *', '*/5 * * * *', '0 */15 * * * *', '@daily'],
      }),
      timezone: z
        .string({ error: expecting('an IANA time zone string like Europe/Berlin') })
        .refine(isTimeZone, { error: expecting('an IANA time zone like Europe/Berlin or UTC') })
        .default('UTC')
        .meta({
          description:
            'The IANA time zone the cron expression is read in (Europe/Berlin, America/New_York, Etc/GMT+1); offsets such as +01:00 are not accepted. Default UTC.',
          examples: ['UTC', 'Europe/Berlin', 'America/New_York'],
        }),
      handler,
      payload: jsonValue.default(null).meta({
        description: `Any JSON value (no .inf/.nan, no tagged values) of at most ${formatBytes(MAX_PAYLOAD_BYTES)} as JSON, given to each run: the http body, a command's stdin, a module's argument. Default null.`,
      }),
      overlap: z
        .enum(OVERLAPS, { error: expecting(`one of ${OVERLAPS.join(', ')}`) })
        .default('skip')
        .meta({
          description:
            'What a tick does while the previous run of this schedule is still going: skip (default), allow, or cancel-previous.',
        }),
      leaseTtl: duration(1_000)
        .prefault('30s')
        .meta({
          description: `${durationText(1_000)}: the TTL of the lease a tick and its run hold on the lock nodes, renewed while the run goes on; a tick whose holder died or stalled is taken over after about this long. Default 30s.`,
        }),
      maxRuntime: duration(1)
        .optional()
        .meta({
          description: `${durationText(1)}: a run still going after this long is aborted (aborted-timeout) and retried per attempts. Default: none.`,
        }),
      startDeadline: duration(1, MAX_TICK_WINDOW_MS, TICK_WINDOW_WHY)
        .optional()
        .meta({
          description: `${durationText(1, MAX_TICK_WINDOW_MS)}: how late after its tick a run may still start (missed-deadline otherwise). Default: the later of the next tick's due time and leaseTtl + 10s, at most ${formatDuration(MAX_TICK_WINDOW_MS)}.`,
        }),
      catchUp: duration(0, MAX_TICK_WINDOW_MS, TICK_WINDOW_WHY)
        .prefault('0s')
        .meta({
          description: `${durationText(0, MAX_TICK_WINDOW_MS)}: how far back ticks missed while no replica ran are still run. Default 0s (none).`,
        }),
      jitter: duration(0, MAX_JITTER_MS)
        .prefault('0s')
        .meta({
          description: `${durationText(0, MAX_JITTER_MS)}: a random delay added to each tick, the same on every replica, never past the next tick. Default 0s.`,
        }),
      attempts: z
        .number({ error: expecting('an integer of at least 1') })
        .int({ error: expecting('an integer of at least 1') })
        .min(1, { error: expecting('an integer of at least 1') })
        .max(MAX_ATTEMPTS, { error: expecting(`an integer of at most ${MAX_ATTEMPTS}`) })
        .default(1)
        .meta({
          description: `How often a tick's handler may start (a failed or lost run is retried while attempts remain): 1 to ${MAX_ATTEMPTS}. Default 1.`,
        }),
      backoff: backoff.prefault({ type: 'fixed', delay: '0s' }).meta({
        description: `The wait before each retry. With exponential, the wait before the last attempt (delay × 2^(attempts-2)) must be at most ${formatDuration(MAX_DURATION_MS)}. Default { type: fixed, delay: 0s }.`,
      }),
      paused: z
        .boolean({ error: expecting('true or false') })
        .default(false)
        .meta({
          description: 'true: every tick is skipped (skipped-paused), as after tickwarden pause. Default false.',
        }),
      history: history.prefault({ keep: DEFAULT_HISTORY.keep, maxAge: formatDuration(DEFAULT_HISTORY.maxAge) }).meta({
        description: `What the queue Redis keeps per kind (tick outcomes, run results, control actions) for tickwarden status and the console: the newest keep entries younger than maxAge. Default { keep: ${DEFAULT_HISTORY.keep}, maxAge: ${formatDuration(DEFAULT_HISTORY.maxAge)} }.`,
      }),
      queue: z
        .string({ error: expecting('a queue name string') })
        .regex(QUEUE_PATTERN, {
          error: expecting('a queue name of 1-63 lower-case letters, digits and "-", starting with a letter or digit'),
        })
        .default('default')
        .meta({
          description:
            'The queue its runs go to (workers may serve only some queues: TICKWARDEN_QUEUES): 1-63 lower-case letters, digits and "-", starting with a letter or digit. Default default.',
          patternErrorMessage:
            'expected a queue name of 1-63 lower-case letters, digits and "-", starting with a letter or digit',
        }),
    },
    { error: expecting('a schedule mapping with at least name, cron and handler') },
  )
  .superRefine(exponentialBackoffWithinBounds)
  .meta({ title: 'schedule', description: 'One schedule: at least name, cron and handler.' });

/** The wait before the last attempt of an exponential backoff (delay × 2^(attempts-2), as BullMQ computes it) is a timer too: at most MAX_DURATION_MS. */
function exponentialBackoffWithinBounds(
  schedule: { attempts: number; backoff: { type: string; delay: number } },
  ctx: z.RefinementCtx,
): void {
  const { attempts, backoff } = schedule;
  if (backoff.type !== 'exponential' || attempts < 2 || backoff.delay * 2 ** (attempts - 2) <= MAX_DURATION_MS) return;
  ctx.addIssue({
    code: 'custom',
    path: ['backoff', 'delay'],
    input: backoff.delay,
    message: `expected an exponential backoff that waits at most ${formatDuration(MAX_DURATION_MS)} before an attempt, got ${formatDuration(backoff.delay)} × 2^${attempts - 2} before attempt ${attempts} (lower the delay or the attempts)`,
  });
}

export const fileSchema = z
  .strictObject(
    {
      team: dnsName('team name', 'payments').meta({
        description: `The team that owns these schedules: ${NAME_RULE}. A schedule's id is team/name.`,
      }),
      schedules: z.array(schedule, { error: expecting('a list of schedules (it may be empty: [])') }).meta({
        description: `The team's schedules (it may be empty: []): at most ${MAX_SCHEDULES_PER_FILE} in one file, names unique within the team.`,
      }),
    },
    { error: expecting('a mapping with the keys team and schedules') },
  )
  .meta({
    title: 'Tickwarden team file',
    description:
      "One team's schedules. tickwarden validate PATH checks more than this schema can: cron expressions, time zones, duration bounds, payload size, unique names, and a file or directory as a whole.",
  });

export type ParsedFile = z.output<typeof fileSchema>;
export type ParsedSchedule = ParsedFile['schedules'][number];

/** The keys each kind of mapping allows, for `unknown key` messages. */
export const ALLOWED_KEYS = {
  file: Object.keys(fileSchema.shape),
  schedule: Object.keys(schedule.shape),
  backoff: Object.keys(backoff.shape),
  handler: {
    http: Object.keys(httpHandler.shape),
    command: Object.keys(commandHandler.shape),
    module: Object.keys(moduleHandler.shape),
  },
} as const;
