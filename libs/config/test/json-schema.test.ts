import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { parseAllDocuments, parseDocument } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  TEAM_SCHEMA_COMMAND,
  TEAM_SCHEMA_FILE,
  teamFileJsonSchema,
  teamFileJsonSchemaText,
} from '../src/json-schema.ts';
import { formatConfigError, validateConfigText } from '../src/index.ts';
import { minimalSchedule, yaml } from './support.ts';

const LIB = path.join(import.meta.dirname, '..');
const ROOT = path.join(LIB, '..', '..');
const SCHEMA_PATH = path.join(LIB, TEAM_SCHEMA_FILE);
/** Where team files live in this repository: the local stack's, and the ones the Kubernetes base mounts. */
const TEAM_FILE_DIRS = ['examples', 'deploy'];

/** Every *.yaml/*.yml under the directory, skipping node_modules and dist. */
function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return ['node_modules', 'dist'].includes(entry.name) ? [] : yamlFiles(full);
    return /\.ya?ml$/.test(entry.name) ? [full] : [];
  });
}

/** The files whose (only) document is a mapping with the keys team and schedules: the repository's team files. */
function teamFiles(): string[] {
  return TEAM_FILE_DIRS.flatMap((dir) => yamlFiles(path.join(ROOT, dir))).filter((file) => {
    const docs = parseAllDocuments(readFileSync(file, 'utf8'));
    if (!Array.isArray(docs) || docs.length !== 1) return false;
    const data: unknown = docs[0]?.toJS();
    return typeof data === 'object' && data !== null && 'team' in data && 'schedules' in data;
  });
}

/** The file as the loader reads it (YAML 1.2, merge keys), as data for the JSON Schema. */
const dataOf = (text: string): unknown => parseDocument(text, { merge: true }).toJS({ maxAliasCount: 100 });

let validate: ValidateFunction;

beforeAll(() => {
  // strict: unknown keywords, formats and types that do not fit their keywords are errors, so the schema is clean draft-07.
  const ajv = new Ajv({ strict: true, allErrors: true });
  ajv.addKeyword({ keyword: 'patternErrorMessage', schemaType: 'string' }); // VS Code's extension keyword: an annotation
  validate = ajv.compile(JSON.parse(readFileSync(SCHEMA_PATH, 'utf8')) as object);
});

/** The schema's errors for a file, as `instancePath keyword`, or [] when it validates. */
function schemaErrors(text: string): string[] {
  if (validate(dataOf(text))) return [];
  return (validate.errors ?? []).map((error: ErrorObject) => `${error.instancePath} ${error.keyword}`);
}

describe('the checked-in JSON Schema', () => {
  it(`is what the generator produces now (else: ${TEAM_SCHEMA_COMMAND})`, () => {
    const onDisk = readFileSync(SCHEMA_PATH, 'utf8');
    expect(
      onDisk,
      `libs/config/${TEAM_SCHEMA_FILE} is stale: run \`${TEAM_SCHEMA_COMMAND}\` from the repository root and commit the file`,
    ).toBe(teamFileJsonSchemaText());
  });

  it('is draft-07 and describes the input: durations as strings with a pattern and their defaults as written, handlers by kind', () => {
    const schema = teamFileJsonSchema() as {
      $schema: string;
      properties: { schedules: { items: { properties: Record<string, Record<string, unknown>> } } };
    };
    expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    const { leaseTtl, handler, history } = schema.properties.schedules.items.properties;
    expect(leaseTtl).toMatchObject({
      type: 'string',
      default: '30s',
      pattern: expect.any(String),
      description: expect.stringContaining('from 1s to 24d'),
    });
    expect(history).toMatchObject({ default: { keep: 20, maxAge: '7d' } });
    const kinds = (handler?.['oneOf'] as { properties: { kind: { const: string } } }[]).map(
      (option) => option.properties.kind.const,
    );
    expect(kinds).toEqual(['http', 'command', 'module']);
  });

  it('gives every property a description', () => {
    const missing: string[] = [];
    const visit = (node: unknown, at: string): void => {
      if (typeof node !== 'object' || node === null) return;
      const properties = (node as { properties?: Record<string, unknown> }).properties;
      for (const [key, child] of Object.entries(properties ?? {})) {
        if (typeof (child as { description?: unknown }).description !== 'string') missing.push(`${at}/${key}`);
      }
      for (const [key, child] of Object.entries(node)) visit(child, `${at}/${key}`);
    };
    visit(teamFileJsonSchema(), '#');
    expect(missing).toEqual([]);
  });
});

describe('team files against the JSON Schema', () => {
  const files = teamFiles();

  it('finds the repository team files (examples/, deploy/k8s/base/schedules/)', () => {
    const relative = files.map((file) => path.relative(ROOT, file));
    expect(relative).toEqual(
      expect.arrayContaining([
        'examples/teams/demo.yaml',
        'deploy/k8s/base/schedules/payments.yaml',
        'deploy/k8s/base/schedules/reporting.yaml',
      ]),
    );
  });

  it.each(files.map((file) => [path.relative(ROOT, file), file]))(
    '%s: valid for tickwarden validate and for the schema',
    (relative, file) => {
      const text = readFileSync(file, 'utf8');
      const result = validateConfigText(text, relative);
      expect(result.ok ? [] : result.errors.map(formatConfigError)).toEqual([]);
      expect(schemaErrors(text)).toEqual([]);
    },
  );

  it('every example in examples/ names the schema in a yaml-language-server modeline on its first line', () => {
    const examples = files.filter((file) => file.startsWith(path.join(ROOT, 'examples') + path.sep));
    expect(examples.length).toBeGreaterThan(0);
    for (const file of examples) {
      const [first = ''] = readFileSync(file, 'utf8').split('\n');
      const match = /^# yaml-language-server: \$schema=(\S+)$/.exec(first);
      expect(match?.[1], `${path.relative(ROOT, file)}: first line`).toBeDefined();
      expect(path.resolve(path.dirname(file), match?.[1] ?? '')).toBe(SCHEMA_PATH);
    }
  });
});

describe('the schema accepts what the validator accepts', () => {
  // Values at the edges of what the validator accepts: an editor must never flag a file the scheduler runs.
  const field = (...lines: string[]): string =>
    yaml('team: payments', 'schedules:', ...minimalSchedule('a'), ...lines.map((line) => `    ${line}`));
  const handler = (...lines: string[]): string =>
    yaml(
      'team: payments',
      'schedules:',
      '  - name: a',
      '    cron: "@daily"',
      '    handler:',
      ...lines.map((line) => `      ${line}`),
    );
  const valid: [string, string][] = [
    [
      'durations with fractions and several units',
      field('leaseTtl: 1.5s', 'maxRuntime: 1h30m', 'startDeadline: 0.25m', 'catchUp: 1d', 'jitter: 500ms'),
    ],
    [
      'a duration of 0s where 0 is allowed',
      field('catchUp: 0s', 'jitter: 0s', 'backoff: { type: exponential, delay: 0s }'),
    ],
    ['every unit at once', field('maxRuntime: 1d2h3m4s5ms')],
    ['an upper-case URL scheme', handler('kind: http', 'url: "HTTPS://example.com/hook"')],
    ['a URL without slashes after the scheme', handler('kind: http', 'url: "http:example.com"')],
    ['a URL that URL parses after leading blanks', handler('kind: http', 'url: " http://example.com/"')],
    [
      'headers from a Secret',
      handler(
        'kind: http',
        'url: https://example.com',
        'headers: { X-Token: { secret: api.tokens, key: token_1 }, X-Retry: "3" }',
      ),
    ],
    [
      'a command with env and cwd',
      handler(
        'kind: command',
        'argv: [sh, -c, "echo"]',
        'cwd: /srv',
        'env: { A_B: x, K: { secret: s, key: k } }',
        'killGrace: 0s',
      ),
    ],
    ['a module with a $ export', handler('kind: module', 'path: ./jobs/x.js', 'export: $run', 'killGrace: 2s')],
    [
      'every other field',
      field(
        'timezone: Etc/GMT+1',
        'payload: [1, "two", { three: null }]',
        'overlap: cancel-previous',
        'attempts: 100',
        'paused: true',
        'history: { keep: 1000, maxAge: 90d }',
        'queue: q-1',
      ),
    ],
    [
      'merge keys',
      yaml(
        'team: payments',
        'schedules:',
        '  - &base',
        '    name: a',
        '    cron: "@daily"',
        '    handler: { kind: module, path: ./x.js }',
        '  - <<: *base',
        '    name: b',
      ),
    ],
    ['no schedules', yaml('team: payments', 'schedules: []')],
  ];

  it.each(valid)('%s', (_what, text) => {
    const result = validateConfigText(text, 'teams/payments.yaml');
    expect(result.ok ? [] : result.errors.map(formatConfigError)).toEqual([]);
    expect(schemaErrors(text)).toEqual([]);
  });
});

describe('the schema rejects invalid files, as the validator does', () => {
  const schedule = (...lines: string[]): string =>
    yaml('team: payments', 'schedules:', ...minimalSchedule('a'), ...lines.map((line) => `    ${line}`));
  const invalid: [string, string, string[]][] = [
    ['an unknown key in a schedule', schedule('timezon: UTC'), ['/schedules/0 additionalProperties']],
    ['an unknown key at the top level', yaml('team: payments', 'teams: x', 'schedules: []'), [' additionalProperties']],
    [
      'a key of another handler kind',
      yaml('team: payments', 'schedules:', ...minimalSchedule('a'), '      argv: [x]'),
      ['/schedules/0/handler additionalProperties', '/schedules/0/handler oneOf'],
    ],
    [
      'a wrong handler kind',
      yaml(
        'team: payments',
        'schedules:',
        '  - name: a',
        '    cron: "@daily"',
        '    handler: { kind: grpc, url: "https://x" }',
      ),
      ['/schedules/0/handler/kind const', '/schedules/0/handler oneOf'],
    ],
    ['a number for a duration', schedule('jitter: 30'), ['/schedules/0/jitter type']],
    ['a duration without a unit in a string', schedule('leaseTtl: "30"'), ['/schedules/0/leaseTtl pattern']],
    ['a duration with a space', schedule('leaseTtl: 30 s'), ['/schedules/0/leaseTtl pattern']],
    ['an empty duration', schedule('leaseTtl: ""'), ['/schedules/0/leaseTtl minLength']],
    ['a duration in the wrong unit order', schedule('maxRuntime: 30m1h'), ['/schedules/0/maxRuntime pattern']],
    [
      'a missing cron',
      yaml('team: payments', 'schedules:', '  - name: a', '    handler: { kind: module, path: ./x.js }'),
      ['/schedules/0 required'],
    ],
    ['an upper-case name', yaml('team: Payments', 'schedules: []'), ['/team pattern']],
    [
      'a URL of another scheme',
      yaml(
        'team: payments',
        'schedules:',
        '  - name: a',
        '    cron: "@daily"',
        '    handler: { kind: http, url: "ftp://x" }',
      ),
      ['/schedules/0/handler/url pattern', '/schedules/0/handler oneOf'],
    ],
    ['an unknown overlap', schedule('overlap: queue'), ['/schedules/0/overlap enum']],
    ['attempts out of range', schedule('attempts: 0'), ['/schedules/0/attempts minimum']],
    [
      'a number for a header value',
      yaml(
        'team: payments',
        'schedules:',
        '  - name: a',
        '    cron: "@daily"',
        '    handler: { kind: http, url: "https://x", headers: { X-Retry: 3 } }',
      ),
      ['/schedules/0/handler/headers/X-Retry type'],
    ],
  ];

  it.each(invalid)('%s', (_what, text, expected) => {
    expect(validateConfigText(text, 'teams/payments.yaml').ok).toBe(false);
    expect(schemaErrors(text)).toEqual(expect.arrayContaining(expected));
  });
});
