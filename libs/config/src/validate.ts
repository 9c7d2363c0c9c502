import { isNode, isSeq, parseDocument, visit, type Document, type LineCounter } from 'yaml';
import type * as z from 'zod';
import { cronProblem, isTimeZone } from './cron.ts';
import { sortErrors } from './errors.ts';
import { MAX_FILE_BYTES, MAX_SCHEDULES, MAX_SCHEDULES_PER_FILE, formatBytes } from './limits.ts';
import { Locator, countLines, linePosition, type Position } from './locate.ts';
import { ALLOWED_KEYS, NAME_PATTERN, fileSchema, type ParsedFile, type ParsedSchedule } from './schema.ts';
import { fileParts, scheduleItems, wholeFile, type FilePart, type ScheduleItems } from './yaml-parts.ts';
import { simpleItem, type SimpleItem } from './yaml-simple.ts';
import type { ConfigError, ConfigResult, HandlerConfig, ScheduleConfig } from './types.ts';

type Path = (string | number)[];

/** One file's text, for validating without touching the disk. */
export interface ConfigText {
  file: string;
  text: string;
}

/** Where a schedule identity is defined, for the duplicate checks. */
export interface Identity {
  id: string;
  file: string;
  line: number;
  column: number;
  path: Path;
}

export interface FileCheck {
  errors: ConfigError[];
  /** Empty unless the file has no errors. */
  schedules: ScheduleConfig[];
  /** Every `team/name` the file defines with a valid team and name, even when it has other errors. */
  identities: Identity[];
  /** How many schedules the file lists, valid or not. */
  scheduleCount: number;
  /** Where the `schedules` key stands (1:1 when there is none). */
  listAt: Position;
}

/**
 * Validates one file's content (for a reload that must not touch the disk). Reports the same errors
 * as `loadConfig` for that file, except duplicates across files, which need the other files: use
 * `validateConfigTexts` for a set of files.
 */
export function validateConfigText(text: string, file: string): ConfigResult {
  return validateConfigTexts([{ file, text }]);
}

/**
 * Validates a set of files as one configuration, exactly as `loadConfig` does once it has read
 * them: every error of every file, plus `team/name` identities defined in more than one file.
 */
export function validateConfigTexts(inputs: readonly ConfigText[]): ConfigResult {
  const config = new ConfigAssembler();
  for (const input of inputs) config.add(input.file, checkFile(input.text, input.file));
  return config.result(inputs.map((input) => input.file));
}

/**
 * Puts the checks of a configuration's files together, in file order: their errors and schedules,
 * `team/name` identities defined in more than one file, and the total against MAX_SCHEDULES.
 */
export class ConfigAssembler {
  readonly #errors: ConfigError[] = [];
  readonly #schedules: ScheduleConfig[] = [];
  readonly #firstById = new Map<string, Identity>();
  readonly #total = new ScheduleTotal();

  add(file: string, check: FileCheck): void {
    // Loops, not push(...spread): a spread of a long array overflows the call stack.
    for (const error of check.errors) this.#errors.push(error);
    for (const schedule of check.schedules) this.#schedules.push(schedule);
    this.#total.add(check, file);
    for (const identity of check.identities) {
      const first = this.#firstById.get(identity.id);
      if (first === undefined) this.#firstById.set(identity.id, identity);
      else if (first.file !== identity.file) {
        // (duplicates inside one file are reported by checkFile)
        this.#errors.push({
          file: identity.file,
          line: identity.line,
          column: identity.column,
          path: identity.path,
          message: `duplicate schedule "${identity.id}": defined in ${first.file}:${first.line} and in ${identity.file}:${identity.line}; team/name must be unique across all files`,
        });
      }
    }
  }

  /** The configuration of `files` (the order errors are sorted in), or every error found. */
  result(files: string[]): ConfigResult {
    const errors = [...this.#errors];
    const totalError = this.#total.error();
    if (totalError !== undefined) errors.push(totalError);
    if (errors.length > 0) return { ok: false, errors: sortErrors(errors, files) };
    return { ok: true, config: { schedules: this.#schedules, files } };
  }
}

/** Counts the schedules of every file against MAX_SCHEDULES; the error stands at the file that goes past it. */
class ScheduleTotal {
  #count = 0;
  #past: Omit<ConfigError, 'message'> | undefined;

  add(check: FileCheck, file: string): void {
    this.#count += check.scheduleCount;
    if (this.#count > MAX_SCHEDULES && this.#past === undefined)
      this.#past = { file, ...check.listAt, path: ['schedules'] };
  }

  error(): ConfigError | undefined {
    if (this.#past === undefined) return undefined;
    return {
      ...this.#past,
      message: `expected at most ${MAX_SCHEDULES} schedules in all files together, got ${this.#count} (this file goes past the limit)`,
    };
  }
}

/** The error for a file larger than MAX_FILE_BYTES, which is not parsed (nor read, by `loadConfig`). */
export function fileTooLarge(file: string, bytes: number): ConfigError {
  return {
    file,
    line: 1,
    column: 1,
    path: [],
    message: `expected a file of at most ${formatBytes(MAX_FILE_BYTES)}, got ${bytes} bytes (split the team's schedules over several files)`,
  };
}

/** Loose view of a YAML mapping, for the checks that run on data the schema may have rejected. */
type Loose = Record<string, unknown>;

const isLoose = (value: unknown): value is Loose =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Schedules are parsed in parts of about this many bytes of YAML (see yaml-parts.ts); a smaller file is parsed whole. */
const PART_BYTES = 4096;

/** How every team file is parsed (yaml-simple.test.ts checks the fast reader against these). */
export const YAML_OPTIONS = {
  prettyErrors: false, // positions come from the locator; messages stay one line
  merge: true, // `<<: *defaults` to share settings between schedules
  stringKeys: true,
  resolveKnownTags: false, // no !!binary, !!timestamp, !!set: JSON-like values only
  uniqueKeys: true,
  logLevel: 'error',
} as const;

/**
 * Checks one file. A big one is parsed in parts (yaml-parts.ts) to bound the parser's garbage; if a
 * part has a YAML syntax error or warning, the file is parsed whole instead, so the error is
 * reported as it stands in the file (a cut through a broken file would misplace it).
 */
export function checkFile(text: string, file: string, partBytes = PART_BYTES): FileCheck {
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_FILE_BYTES)
    return {
      errors: [fileTooLarge(file, bytes)],
      schedules: [],
      identities: [],
      scheduleCount: 0,
      listAt: { line: 1, column: 1 },
    };
  const lines = countLines(text);
  const items = text.length > partBytes ? scheduleItems(text) : undefined;
  if (items !== undefined) {
    const check = new FileChecker(file, lines);
    let clean = true;
    for (const part of fileParts(text, items, partBytes)) {
      clean = check.simplePart(text, items, part) || check.part(part, 'retry-whole');
      if (!clean) break;
    }
    if (clean) return check.result();
  }
  const check = new FileChecker(file, lines);
  check.part(wholeFile(text), 'report');
  return check.result();
}

/** What a part does with YAML syntax errors and warnings: report them, or give up so the whole file is parsed. */
type YamlProblems = 'report' | 'retry-whole';

/** The checks of one file, part after part; names are checked for duplicates across its parts. */
class FileChecker {
  readonly #file: string;
  readonly #lines: LineCounter;
  readonly #errors: ConfigError[] = [];
  readonly #schedules: ScheduleConfig[] = [];
  readonly #identities: Identity[] = [];
  readonly #firstByName = new Map<string, Identity>();
  readonly #crons = new CronChecks();
  #scheduleCount = 0;
  #listAt: Position = { line: 1, column: 1 };
  /** The first part's data: what is around the list is the same in every part. */
  #around: Loose | undefined;

  constructor(file: string, lines: LineCounter) {
    this.#file = file;
    this.#lines = lines;
  }

  result(): FileCheck {
    if (this.#scheduleCount > MAX_SCHEDULES_PER_FILE) {
      const message = `expected at most ${MAX_SCHEDULES_PER_FILE} schedules in one file, got ${this.#scheduleCount} (split them over several files)`;
      this.#errors.push({ file: this.#file, ...this.#listAt, path: ['schedules'], message });
    }
    const valid = this.#errors.length === 0;
    return {
      errors: this.#errors,
      schedules: valid ? this.#schedules : [],
      identities: this.#identities,
      scheduleCount: this.#scheduleCount,
      listAt: this.#listAt,
    };
  }

  /** Checks one part; false when it had YAML problems and `yamlProblems` is `retry-whole`. */
  part(part: FilePart, yamlProblems: YamlProblems): boolean {
    const doc = parseDocument(part.text, YAML_OPTIONS);
    if (yamlProblems === 'retry-whole' && (doc.errors.length > 0 || doc.warnings.length > 0 || !hasItems(doc, part)))
      return false;
    const locator = new Locator(doc, this.#lines, part.sourceOffset);
    const at: At = (path, position, message) => {
      const inFile = fileLevelPath(path, part);
      if (inFile !== undefined)
        this.#errors.push({ file: this.#file, line: position.line, column: position.column, path: inFile, message });
    };
    const data = parsedData(doc, locator, at, yamlProblems);
    if (data === CUT_ALIAS) return false;
    if (data === undefined) return true;
    if (part.reportsTopLevel && isLoose(data)) this.#around = data;
    // Past the limit the file is rejected whole: checking each schedule would only cost time.
    if (!this.#count(data, locator)) return true;

    const parsed = fileSchema.safeParse(data, { reportInput: true });
    if (!parsed.success) for (const issue of parsed.error.issues) mapIssue(issue, data, locator, at);
    for (const identity of checkSchedules(data, this.#file, part, this.#firstByName, this.#crons, locator, at))
      this.#identities.push(identity);
    if (this.#errors.length === 0 && parsed.success)
      for (const schedule of buildSchedules(parsed.data, this.#file, locator)) this.#schedules.push(schedule);
    return true;
  }

  /**
   * Checks a part whose items yaml-simple.ts reads, without the `yaml` package: the common case of a
   * big file. False, having changed nothing, when an item has another shape or the part has anything
   * to report: `part` then checks it and locates what it reports.
   */
  simplePart(text: string, items: ScheduleItems, part: FilePart): boolean {
    const count = part.items ?? 0;
    if (this.#around === undefined || part.reportsTopLevel || this.#scheduleCount + count > MAX_SCHEDULES_PER_FILE)
      return false;
    const read: SimpleItem[] = [];
    for (let index = part.firstIndex; index < part.firstIndex + count; index++) {
      const start = items.starts[index] as number;
      const item = simpleItem(text, start, items.starts[index + 1] ?? items.end, items.indent);
      if (item?.nameAt === undefined) return false;
      read.push(item);
    }
    const parsed = fileSchema.safeParse({ ...this.#around, schedules: read.map((item) => item.value) });
    if (!parsed.success || !this.#allFine(parsed.data.schedules)) return false;
    this.#scheduleCount += count;
    for (const [index, schedule] of parsed.data.schedules.entries()) {
      const at = linePosition(this.#lines, (read[index] as SimpleItem).nameAt as number);
      const identity: Identity = {
        id: `${parsed.data.team}/${schedule.name}`,
        file: this.#file,
        ...at,
        path: ['schedules', part.firstIndex + index, 'name'],
      };
      this.#firstByName.set(schedule.name, identity);
      this.#identities.push(identity);
      if (this.#errors.length > 0) continue;
      // the item's mapping starts after its `- `, on the item's first line
      const { line } = linePosition(this.#lines, (items.starts[part.firstIndex + index] as number) + items.indent + 2);
      this.#schedules.push(buildSchedule(parsed.data.team, schedule, { file: this.#file, line }));
    }
    return true;
  }

  /** Whether the checks after the schema (`checkSchedules`) find nothing in valid schedules. */
  #allFine(schedules: readonly ParsedSchedule[]): boolean {
    const names = new Set<string>();
    for (const { name, cron, timezone } of schedules) {
      if (this.#firstByName.has(name) || names.has(name) || this.#crons.problem(cron, timezone) !== undefined)
        return false;
      names.add(name);
    }
    return true;
  }

  /** Counts the part's schedules and notes where the list stands; false once the file has more than MAX_SCHEDULES_PER_FILE. */
  #count(data: unknown, locator: Locator): boolean {
    const list = isLoose(data) ? data['schedules'] : undefined;
    if (!Array.isArray(list)) return true;
    if (this.#scheduleCount === 0) this.#listAt = locator.position(locator.locate(['schedules']).key);
    this.#scheduleCount += list.length;
    return this.#scheduleCount <= MAX_SCHEDULES_PER_FILE;
  }
}

/** Whether a part's `schedules` list has the items it was cut with. */
function hasItems(doc: Document, part: FilePart): boolean {
  if (part.items === undefined) return true;
  const list = doc.get('schedules', true);
  return isSeq(list) && list.items.length === part.items;
}

/**
 * A part's path as a path of the file: `schedules[i]` counted from the file's first schedule;
 * undefined for an error outside the schedules that another part reports.
 */
function fileLevelPath(path: Path, part: FilePart): Path | undefined {
  const [first, index, ...rest] = path;
  if (first === 'schedules' && typeof index === 'number') return [first, part.firstIndex + index, ...rest];
  return part.reportsTopLevel ? path : undefined;
}

/** The document as plain data, or undefined after reporting why there is none (YAML errors, a bad alias, an empty file). */
/** parsedData's answer when an alias of a part names no anchor in it (it may be in another part): the file is parsed whole. */
const CUT_ALIAS = Symbol('cut alias');

function parsedData(doc: Document, locator: Locator, at: At, yamlProblems: YamlProblems): unknown {
  for (const error of doc.errors) {
    const unclosed = error.code === 'MISSING_CHAR' ? unclosedQuote(doc, error.pos[0]) : undefined;
    if (unclosed === undefined) at([], locator.offsetPosition(error.pos[0]), `YAML syntax error: ${error.message}`);
    // reported where the string starts, not at the end of the file where the parser gave up
    else
      at(
        [],
        locator.offsetPosition(unclosed.start),
        `YAML syntax error: missing closing ${unclosed.quote} for the string that starts here`,
      );
  }
  // A warning is an unknown tag (`!foo`, `!!binary`): the value would silently become a string.
  for (const warning of doc.warnings) at([], locator.offsetPosition(warning.pos[0]), `YAML: ${warning.message}`);
  // After a syntax error the tree is a guess: schema errors on it would mostly be noise.
  if (doc.errors.length > 0) return undefined;

  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (error) {
    if (yamlProblems === 'retry-whole') return CUT_ALIAS;
    aliasErrors(doc, locator, error, at);
    return undefined;
  }
  if (data === null || data === undefined) {
    at([], locator.position(undefined), 'the file is empty: expected a mapping with the keys team and schedules');
    return undefined;
  }
  return data;
}

/** Where the quoted scalar that runs into `offset` (an unclosed quote) starts, and its quote. */
function unclosedQuote(doc: Document, offset: number): { start: number; quote: string } | undefined {
  let found: { start: number; quote: string } | undefined;
  visit(doc, {
    Scalar(_key, node) {
      const quote = node.type === 'QUOTE_DOUBLE' ? '"' : node.type === 'QUOTE_SINGLE' ? "'" : undefined;
      if (quote !== undefined && node.range !== undefined && node.range !== null && node.range[1] === offset)
        found = { start: node.range[0], quote };
    },
  });
  return found;
}

type At = (path: Path, position: { line: number; column: number }, message: string) => void;

/** `toJS` failed: an alias without an anchor, or too many aliases (a resource exhaustion attempt). */
function aliasErrors(doc: Document, locator: Locator, error: unknown, at: At): void {
  let found = false;
  visit(doc, {
    Alias(_key, node) {
      if (node.resolve(doc) === undefined) {
        found = true;
        at([], locator.position(node), `YAML alias *${node.source} has no anchor &${node.source} before it`);
      }
    },
  });
  if (!found) at([], locator.position(undefined), `YAML: ${error instanceof Error ? error.message : String(error)}`);
}

/** Turns one zod issue into errors located at the offending node. */
function mapIssue(issue: z.core.$ZodIssue, data: unknown, locator: Locator, at: At): void {
  const path = issue.path.filter((segment): segment is string | number => typeof segment !== 'symbol');

  if (issue.code === 'unrecognized_keys') {
    const allowed = allowedKeys(path, data);
    for (const key of issue.keys) {
      const located = locator.locate([...path, key]);
      at([...path, key], locator.position(located.key ?? located.node), unknownKeyMessage(key, allowed));
    }
    return;
  }

  const located = locator.locate(path);
  if (issue.code === 'invalid_key') {
    // a record key (a header or environment variable name): point at the key
    at(path, locator.position(located.key ?? located.node), issue.issues[0]?.message ?? issue.message);
    return;
  }

  const last = path.at(-1);
  const parent = getIn(data, path.slice(0, -1));
  if (typeof last === 'string' && isLoose(parent) && !Object.hasOwn(parent, last)) {
    // a missing required key: point at the mapping that lacks it
    at(path, locator.position(located.node), `missing required key "${last}": ${issue.message}`);
    return;
  }
  at(path, locator.position(located.node), issue.message);
}

function getIn(data: unknown, path: readonly (string | number)[]): unknown {
  let value = data;
  for (const segment of path) {
    if (Array.isArray(value) && typeof segment === 'number') value = value[segment];
    else if (isLoose(value) && typeof segment === 'string' && Object.hasOwn(value, segment)) value = value[segment];
    else return undefined;
  }
  return value;
}

/** The keys the mapping at `path` allows, and how to call that mapping in a message. */
function allowedKeys(
  path: readonly (string | number)[],
  data: unknown,
): { keys: readonly string[]; where: string } | undefined {
  if (path.length === 0) return { keys: ALLOWED_KEYS.file, where: 'at the top level' };
  if (path.length === 2 && path[0] === 'schedules') return { keys: ALLOWED_KEYS.schedule, where: 'in a schedule' };
  if (path.length === 3 && path[0] === 'schedules' && path[2] === 'backoff')
    return { keys: ALLOWED_KEYS.backoff, where: 'in backoff' };
  if (path.length === 3 && path[0] === 'schedules' && path[2] === 'handler') {
    const kind = getIn(data, [...path, 'kind']);
    if (kind === 'http' || kind === 'command' || kind === 'module')
      return { keys: ALLOWED_KEYS.handler[kind], where: `in ${kind === 'http' ? 'an' : 'a'} ${kind} handler` };
  }
  return undefined;
}

function unknownKeyMessage(key: string, allowed: { keys: readonly string[]; where: string } | undefined): string {
  if (allowed === undefined) return `unknown key "${key}"`;
  const suggestion = closest(key, allowed.keys);
  if (suggestion !== undefined) return `unknown key "${key}" ${allowed.where}; did you mean "${suggestion}"?`;
  return `unknown key "${key}" ${allowed.where}; expected one of ${allowed.keys.join(', ')}`;
}

/** The allowed key a typo most likely meant: same letters ignoring case and `-`/`_`, or at most 2 edits away. */
function closest(key: string, candidates: readonly string[]): string | undefined {
  const normal = (text: string): string => text.toLowerCase().replace(/[-_]/g, '');
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = normal(key) === normal(candidate) ? 0 : editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance <= Math.min(2, Math.floor(candidate.length / 3)) && (best === undefined || distance < best.distance))
      best = { candidate, distance };
  }
  return best?.candidate;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (current[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/**
 * The checks the schema cannot make, run on the loose data so they report even when other parts of
 * the file are invalid: the cron expression in its time zone, and names unique within the file
 * (`firstByName` holds the names of the parts checked before). Returns the identities the part
 * defines, with paths of the file, for the duplicate check across files.
 */
function checkSchedules(
  data: unknown,
  file: string,
  part: FilePart,
  firstByName: Map<string, Identity>,
  crons: CronChecks,
  locator: Locator,
  at: At,
): Identity[] {
  if (!isLoose(data) || !Array.isArray(data['schedules'])) return [];
  const team = typeof data['team'] === 'string' && NAME_PATTERN.test(data['team']) ? data['team'] : undefined;
  const identities: Identity[] = [];
  for (const [index, schedule] of (data['schedules'] as unknown[]).entries()) {
    if (!isLoose(schedule)) continue;
    const { cron, timezone, name } = schedule;
    if (typeof cron === 'string') {
      // An invalid time zone is reported by the schema; the expression itself is still checked (in UTC).
      const zone = typeof timezone === 'string' && isTimeZone(timezone) ? timezone : 'UTC';
      const problem = crons.problem(cron, zone);
      const path = ['schedules', index, 'cron'];
      if (problem !== undefined)
        at(
          path,
          locator.position(locator.locate(path).node),
          `invalid cron expression ${JSON.stringify(cron)}: ${problem}`,
        );
    }
    if (typeof name !== 'string' || !NAME_PATTERN.test(name)) continue;
    const path = ['schedules', index, 'name'];
    const { line, column } = locator.position(locator.locate(path).node);
    const identity: Identity = {
      id: `${team ?? '?'}/${name}`,
      file,
      line,
      column,
      path: ['schedules', part.firstIndex + index, 'name'],
    };
    const first = firstByName.get(name);
    if (first !== undefined) {
      at(
        path,
        { line, column },
        `duplicate schedule name "${name}": already defined at line ${first.line} of this file; names must be unique within a team`,
      );
      continue;
    }
    firstByName.set(name, identity);
    if (team !== undefined) identities.push(identity);
  }
  return identities;
}

/**
 * `cronProblem` once per expression and time zone: schedules share a few patterns, and each check
 * builds a croner `Cron` with an 80 KB year table, garbage that would make the heap grow.
 */
class CronChecks {
  readonly #problems = new Map<string, string | undefined>();

  problem(cron: string, zone: string): string | undefined {
    const key = `${zone} ${cron}`;
    if (!this.#problems.has(key)) this.#problems.set(key, cronProblem(cron, zone));
    return this.#problems.get(key);
  }
}

function buildSchedules(parsed: ParsedFile, file: string, locator: Locator): ScheduleConfig[] {
  const list = locator.locate(['schedules']).node;
  return parsed.schedules.map((schedule, index) => {
    // the list item as written (an alias `- *base` counts where it stands, not where its anchor is)
    const item: unknown = isSeq(list) ? list.items[index] : undefined;
    const line = locator.position(isNode(item) ? item : undefined).line;
    return buildSchedule(parsed.team, schedule, { file, line });
  });
}

function buildSchedule(team: string, schedule: ParsedSchedule, source: { file: string; line: number }): ScheduleConfig {
  return {
    id: `${team}/${schedule.name}`,
    team,
    name: schedule.name,
    cron: schedule.cron,
    timezone: schedule.timezone,
    handler: buildHandler(schedule.handler),
    payload: schedule.payload,
    overlap: schedule.overlap,
    leaseTtlMs: schedule.leaseTtl,
    maxRuntimeMs: schedule.maxRuntime,
    startDeadlineMs: schedule.startDeadline,
    catchUpMs: schedule.catchUp,
    jitterMs: schedule.jitter,
    attempts: schedule.attempts,
    backoff: { type: schedule.backoff.type, delayMs: schedule.backoff.delay },
    paused: schedule.paused,
    history: { keep: schedule.history.keep, maxAgeMs: schedule.history.maxAge },
    queue: schedule.queue,
    source,
  };
}

function buildHandler(handler: ParsedSchedule['handler']): HandlerConfig {
  switch (handler.kind) {
    case 'http':
      return {
        kind: 'http',
        url: handler.url,
        method: handler.method,
        headers: handler.headers,
        timeoutMs: handler.timeout,
        redirects: handler.redirects,
      };
    case 'command':
      return {
        kind: 'command',
        argv: handler.argv,
        cwd: handler.cwd,
        env: handler.env,
        killGraceMs: handler.killGrace,
      };
    case 'module':
      return { kind: 'module', path: handler.path, exportName: handler.export, killGraceMs: handler.killGrace };
  }
}
