import * as z from 'zod';
import { isTimeZone } from './cron.ts';
import { formatDuration, parseDuration } from './duration.ts';
import { describeValue } from './errors.ts';
import { MAX_ATTEMPTS, MAX_BACKOFF_DELAY_MS, MAX_DURATION_MS, MAX_HISTORY_AGE_MS, MAX_HISTORY_KEEP, MAX_JITTER_MS, MAX_PAYLOAD_BYTES, MAX_TICK_WINDOW_MS, formatBytes } from './limits.ts';

/**
 * The zod schema of one team file. Every message says what was expected; a message of the form
 * `expected X, got Y` becomes `missing required key "k" (expected X)` when the key is absent
 * (see `issueMessage` in validate.ts). Durations come out in milliseconds; the cron expression
 * and duplicate names are checked after the schema (they need the time zone and other schedules).
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
  return (issue) => (issue.input === undefined ? `expected ${what}` : `expected ${what}, got ${describeValue(issue.input)}`);
}

const DURATION_EXAMPLE = 'a duration like 30s, 10m, 2h';

function duration(min: number, max = MAX_DURATION_MS, why = ''): z.ZodPipe<z.ZodString, z.ZodTransform<number, string>> {
  const atLeast = min === 0 ? '' : min === 1 ? 'a duration greater than 0s' : `a duration of at least ${formatDuration(min)}`;
  return z
    .string({
      error: (issue) =>
        typeof issue.input === 'number'
          ? `expected ${DURATION_EXAMPLE}, got ${describeValue(issue.input)} (a duration needs a unit, e.g. ${issue.input}s)`
          : expecting(DURATION_EXAMPLE)(issue),
    })
    .transform((text, ctx) => {
      const ms = parseDuration(text);
      let message: string | undefined;
      if (ms === undefined) {
        message = `expected ${DURATION_EXAMPLE}, got ${describeValue(text)}`;
        if (/^\s*-/.test(text)) message += ' (a duration cannot be negative)';
      } else if (ms < min) message = `expected ${atLeast}, got ${describeValue(text)}`;
      else if (ms > max) message = `expected a duration of at most ${formatDuration(max)}${why}, got ${describeValue(text)}`;
      if (message === undefined && ms !== undefined) return ms;
      ctx.addIssue({ code: 'custom', message, input: text });
      return z.NEVER;
    });
}

const dnsName = (what: string, example: string): z.ZodString =>
  z
    .string({ error: expecting(`a ${what} like ${example}`) })
    .regex(NAME_PATTERN, { error: expecting(`a ${what} of 1-63 lower-case letters, digits and "-", starting and ending with a letter or digit`) });

/** A Kubernetes Secret's name (a DNS subdomain) and one of its keys. */
const SECRET_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const SECRET_KEY = /^(?!\.{1,2}$)[-._a-zA-Z0-9]{1,253}$/;

/**
 * A value a worker reads at run time from a Secret it mounts (`TICKWARDEN_SECRETS_DIR/<secret>/<key>`):
 * the value is never in a schedule file, a job, a log line or the tick history.
 */
const secretRef = z.strictObject({
  secret: z.string().regex(SECRET_NAME, { error: expecting('a Secret name (lower-case letters, digits, "-" and ".")') }),
  key: z.string().regex(SECRET_KEY, { error: expecting('a key of the Secret (letters, digits, "-", "_" and ".")') }),
});

const stringMap = (what: string, keyWhat: string, keyPattern: RegExp) =>
  z.record(
    z.string().regex(keyPattern, { error: expecting(keyWhat) }),
    z.union([z.string(), secretRef], { error: expecting('a string value (quote numbers and booleans) or { secret, key }') }),
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

const httpHandler = z.strictObject({
  kind: z.literal('http'),
  url: z.string({ error: expecting('an http(s) URL string') }).refine(isHttpUrl, { error: expecting('an http:// or https:// URL') }),
  method: z.enum(HTTP_METHODS, { error: expecting(`one of ${HTTP_METHODS.join(', ')}`) }).default('POST'),
  headers: stringMap('header names', "a header name (letters, digits and !#$%&'*+-.^_`|~)", HEADER_NAME)
    .refine((headers) => Object.values(headers).every((value) => typeof value !== 'string' || !/[\r\n\0]/.test(value)), {
      error: 'expected header values without line breaks or NUL characters',
    })
    .default({}),
  timeout: duration(1).default(30_000),
  redirects: z.enum(HTTP_REDIRECTS, { error: expecting(`one of ${HTTP_REDIRECTS.join(', ')}`) }).default('none'),
});

const commandHandler = z.strictObject({
  kind: z.literal('command'),
  argv: z
    .array(z.string({ error: expecting('a string argument') }), { error: expecting('a list of strings: the program and its arguments') })
    .min(1, { error: 'expected a non-empty list of strings: the program and its arguments' })
    .refine((argv) => argv[0] !== '', { error: 'expected the program (the first argv entry) to be a non-empty string', path: [0] }),
  cwd: z
    .string({ error: expecting('a directory path string') })
    .min(1, { error: 'expected a non-empty directory path' })
    .optional(),
  env: stringMap('environment variable names', 'an environment variable name (no "=")', /^[^=\0]+$/).default({}),
  killGrace: duration(0).default(10_000),
});

const moduleHandler = z.strictObject({
  kind: z.literal('module'),
  path: z.string({ error: expecting('a module path string') }).min(1, { error: 'expected a non-empty module path' }),
  export: z
    .string({ error: expecting('an export name string') })
    .regex(IDENTIFIER, { error: expecting('an export name (a JavaScript identifier such as default or run)') })
    .default('default'),
  killGrace: duration(0).default(10_000),
});

export const HANDLER_KINDS = ['http', 'command', 'module'] as const;

const handler = z.discriminatedUnion('kind', [httpHandler, commandHandler, moduleHandler], {
  error: (issue) =>
    issue.code === 'invalid_union'
      ? // the discriminator: `input` is the handler mapping, not the value of `kind`
        expecting(`a handler kind: one of ${HANDLER_KINDS.join(', ')}`)({ input: kindOf(issue.input) })
      : expecting(`a handler mapping with a kind (${HANDLER_KINDS.join(', ')})`)(issue),
});

function kindOf(input: unknown): unknown {
  return typeof input === 'object' && input !== null && !Array.isArray(input) ? (input as Record<string, unknown>)['kind'] : input;
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
    const plain = typeof node === 'object' && (Array.isArray(node) || [Object.prototype, null].includes(Object.getPrototypeOf(node)));
    if (!plain) {
      problem(path, node, `expected a JSON value (string, number, boolean, null, list or mapping), got ${describeValue(node)}`);
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
  if (bytes > MAX_PAYLOAD_BYTES) problem([], value, `expected a payload of at most ${formatBytes(MAX_PAYLOAD_BYTES)} as JSON, got ${bytes} bytes`);
});

/**
 * The UTF-8 length of a JSON value as `JSON.stringify` writes it, counted without building the
 * text (YAML aliases can repeat one big value many times over).
 */
function jsonBytes(value: unknown): number {
  if (value === null || typeof value !== 'object') return Buffer.byteLength(JSON.stringify(value));
  const entries: [string | undefined, unknown][] = Array.isArray(value) ? value.map((item) => [undefined, item]) : Object.entries(value);
  let bytes = 2 + Math.max(0, entries.length - 1); // the brackets, and a comma between entries
  for (const [key, item] of entries) bytes += (key === undefined ? 0 : Buffer.byteLength(JSON.stringify(key)) + 1) + jsonBytes(item);
  return bytes;
}

const TICK_WINDOW_WHY = ' (whether a tick already ran is kept that long)';

export const OVERLAP_VALUES = ['skip', 'allow', 'cancel-previous'] as const;
export const BACKOFF_TYPES = ['fixed', 'exponential'] as const;

const backoff = z.strictObject(
  {
    type: z.enum(BACKOFF_TYPES, { error: expecting(`a backoff type: one of ${BACKOFF_TYPES.join(', ')}`) }).default('fixed'),
    delay: duration(0, MAX_BACKOFF_DELAY_MS).default(0),
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
      .default(DEFAULT_HISTORY.keep),
    maxAge: duration(60_000, MAX_HISTORY_AGE_MS).default(DEFAULT_HISTORY.maxAge),
  },
  { error: expecting('a history mapping like { keep: 50, maxAge: 14d }') },
);

const schedule = z.strictObject(
  {
    name: dnsName('schedule name', 'nightly-report'),
    cron: z.string({ error: expecting('a cron expression string like "0 2 * * *"') }),
    timezone: z
      .string({ error: expecting('an IANA time zone string like Europe/Berlin') })
      .refine(isTimeZone, { error: expecting('an IANA time zone like Europe/Berlin or UTC') })
      .default('UTC'),
    handler,
    payload: jsonValue.default(null),
    overlap: z.enum(OVERLAP_VALUES, { error: expecting(`one of ${OVERLAP_VALUES.join(', ')}`) }).default('skip'),
    leaseTtl: duration(1_000).default(30_000),
    maxRuntime: duration(1).optional(),
    startDeadline: duration(1, MAX_TICK_WINDOW_MS, TICK_WINDOW_WHY).optional(),
    catchUp: duration(0, MAX_TICK_WINDOW_MS, TICK_WINDOW_WHY).default(0),
    jitter: duration(0, MAX_JITTER_MS).default(0),
    attempts: z
      .number({ error: expecting('an integer of at least 1') })
      .int({ error: expecting('an integer of at least 1') })
      .min(1, { error: expecting('an integer of at least 1') })
      .max(MAX_ATTEMPTS, { error: expecting(`an integer of at most ${MAX_ATTEMPTS}`) })
      .default(1),
    backoff: backoff.default({ type: 'fixed', delay: 0 }),
    paused: z.boolean({ error: expecting('true or false') }).default(false),
    history: history.default({ keep: DEFAULT_HISTORY.keep, maxAge: DEFAULT_HISTORY.maxAge }),
    queue: z
      .string({ error: expecting('a queue name string') })
      .regex(QUEUE_PATTERN, { error: expecting('a queue name of 1-63 lower-case letters, digits and "-", starting with a letter or digit') })
      .default('default'),
  },
  { error: expecting('a schedule mapping with at least name, cron and handler') },
).superRefine(exponentialBackoffWithinBounds);

/** The wait before the last attempt of an exponential backoff (delay × 2^(attempts-2), as BullMQ computes it) is a timer too: at most MAX_DURATION_MS. */
function exponentialBackoffWithinBounds(schedule: { attempts: number; backoff: { type: string; delay: number } }, ctx: z.RefinementCtx): void {
  const { attempts, backoff } = schedule;
  if (backoff.type !== 'exponential' || attempts < 2 || backoff.delay * 2 ** (attempts - 2) <= MAX_DURATION_MS) return;
  ctx.addIssue({
    code: 'custom',
    path: ['backoff', 'delay'],
    input: backoff.delay,
    message: `expected an exponential backoff that waits at most ${formatDuration(MAX_DURATION_MS)} before an attempt, got ${formatDuration(backoff.delay)} × 2^${attempts - 2} before attempt ${attempts} (lower the delay or the attempts)`,
  });
}

export const fileSchema = z.strictObject(
  {
    team: dnsName('team name', 'payments'),
    schedules: z.array(schedule, { error: expecting('a list of schedules (it may be empty: [])') }),
  },
  { error: expecting('a mapping with the keys team and schedules') },
);

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
