import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  formatConfigError,
  loadConfig,
  MAX_ATTEMPTS,
  MAX_FILE_BYTES,
  MAX_HISTORY_KEEP,
  MAX_PAYLOAD_BYTES,
  MAX_SCHEDULES,
  MAX_SCHEDULES_PER_FILE,
  validateConfigText,
  validateConfigTexts,
  type ConfigText,
} from '../src/index.ts';
import { configOf, errorsOf, tempDir, yaml } from './support.ts';

const FILE = 'teams/payments.yaml';
/** A file with one valid schedule (lines 3-5) and the given lines after it (from line 6). */
const withLines = (...lines: string[]): string =>
  yaml(
    'team: payments',
    'schedules:',
    '  - name: x',
    '    cron: "0 2 * * *"',
    '    handler: { kind: module, path: ./x.js }',
    ...lines,
  );
const errors = (text: string): string[] => errorsOf([{ file: FILE, text }]);
const accepts = (text: string): void => void configOf(validateConfigText(text, FILE));
/** A file of team `team` with `count` one-line schedules `s0`, `s1`, ... */
const flatFile = (team: string, count: number): string =>
  yaml(
    `team: ${team}`,
    'schedules:',
    Array.from(
      { length: count },
      (_, i) => `  - { name: s${i}, cron: "@daily", handler: { kind: module, path: ./x.js } }`,
    ).join('\n'),
  );

describe('limits of a configuration', () => {
  it('jitter: at most 1h', () => {
    accepts(withLines('    jitter: 1h'));
    expect(errors(withLines('    jitter: 61m'))).toEqual([
      'teams/payments.yaml:6:13: schedules[0].jitter: expected a duration of at most 1h, got "61m"',
    ]);
    expect(errors(withLines('    jitter: 24d'))).toEqual([
      'teams/payments.yaml:6:13: schedules[0].jitter: expected a duration of at most 1h, got "24d"',
    ]);
  });

  it(`attempts: at most ${MAX_ATTEMPTS}`, () => {
    accepts(withLines(`    attempts: ${MAX_ATTEMPTS}`));
    expect(errors(withLines(`    attempts: ${MAX_ATTEMPTS + 1}`))).toEqual([
      `teams/payments.yaml:6:15: schedules[0].attempts: expected an integer of at most 100, got the number 101`,
    ]);
    expect(errors(withLines(`    attempts: ${Number.MAX_SAFE_INTEGER}`))).toEqual([
      `teams/payments.yaml:6:15: schedules[0].attempts: expected an integer of at most 100, got the number ${Number.MAX_SAFE_INTEGER}`,
    ]);
  });

  it(`history: keep at most ${MAX_HISTORY_KEEP} entries, for 1m to 90d`, () => {
    accepts(withLines(`    history: { keep: ${MAX_HISTORY_KEEP}, maxAge: 90d }`));
    expect(errors(withLines(`    history: { keep: ${MAX_HISTORY_KEEP + 1} }`))).toEqual([
      `teams/payments.yaml:6:22: schedules[0].history.keep: expected an integer from 1 to 1000, got the number 1001`,
    ]);
    expect(errors(withLines('    history: { keep: 0 }'))).toEqual([
      `teams/payments.yaml:6:22: schedules[0].history.keep: expected an integer from 1 to 1000, got the number 0`,
    ]);
    expect(errors(withLines('    history: { maxAge: 91d }'))).toEqual([
      'teams/payments.yaml:6:24: schedules[0].history.maxAge: expected a duration of at most 90d, got "91d"',
    ]);
    expect(errors(withLines('    history: { maxAge: 30s }'))).toEqual([
      'teams/payments.yaml:6:24: schedules[0].history.maxAge: expected a duration of at least 1m, got "30s"',
    ]);
  });

  it('backoff delay: at most 1h', () => {
    accepts(withLines('    attempts: 100', '    backoff: { type: fixed, delay: 1h }'));
    expect(errors(withLines('    backoff: { type: fixed, delay: 2h }'))).toEqual([
      'teams/payments.yaml:6:36: schedules[0].backoff.delay: expected a duration of at most 1h, got "2h"',
    ]);
  });

  it('exponential backoff: the wait before the last attempt is at most 24d', () => {
    // 1h × 2^9 = 512h fits in 24d (576h); 1h × 2^10 does not.
    accepts(withLines('    attempts: 11', '    backoff: { type: exponential, delay: 1h }'));
    expect(errors(withLines('    attempts: 12', '    backoff: { type: exponential, delay: 1h }'))).toEqual([
      'teams/payments.yaml:7:42: schedules[0].backoff.delay: expected an exponential backoff that waits at most 24d before an attempt, got 1h × 2^10 before attempt 12 (lower the delay or the attempts)',
    ]);
  });

  it(`payload: at most ${MAX_PAYLOAD_BYTES} bytes as JSON, counted as JSON.stringify writes it`, () => {
    const payload = (filler: number) => ({
      list: [1, 'é', null, true, { 'a "key"': -2.5 }],
      filler: 'x'.repeat(filler),
    });
    const fits = MAX_PAYLOAD_BYTES - Buffer.byteLength(JSON.stringify(payload(0)));
    accepts(withLines(`    payload: ${JSON.stringify(payload(fits))}`));
    expect(errors(withLines(`    payload: ${JSON.stringify(payload(fits + 1))}`))).toEqual([
      `teams/payments.yaml:6:14: schedules[0].payload: expected a payload of at most 64 KiB as JSON, got ${MAX_PAYLOAD_BYTES + 1} bytes`,
    ]);
  });

  it('payload: a value repeated through YAML aliases counts each time', () => {
    const big = 'x'.repeat(2000);
    const text = withLines(
      `    payload: { a: &big "${big}", b: [${Array.from({ length: 40 }, () => '*big').join(', ')}] }`,
    );
    const bytes = Buffer.byteLength(JSON.stringify({ a: big, b: Array.from({ length: 40 }, () => big) }));
    expect(errors(text)).toEqual([
      `teams/payments.yaml:6:14: schedules[0].payload: expected a payload of at most 64 KiB as JSON, got ${bytes} bytes`,
    ]);
  });

  it(`schedules: at most ${MAX_SCHEDULES_PER_FILE} in one file, reported at the list`, () => {
    expect(configOf(validateConfigText(flatFile('bulk', MAX_SCHEDULES_PER_FILE), 'bulk.yaml')).schedules).toHaveLength(
      MAX_SCHEDULES_PER_FILE,
    );
    expect(errorsOf([{ file: 'bulk.yaml', text: flatFile('bulk', MAX_SCHEDULES_PER_FILE + 1) }])).toEqual([
      'bulk.yaml:2:1: schedules: expected at most 10000 schedules in one file, got 10001 (split them over several files)',
    ]);
  });

  it('schedules: a file parsed whole (one flow list) past the limit is rejected with one error, its schedules not checked one by one', () => {
    const items = Array.from(
      { length: 20_000 },
      (_, i) => `{name: s${i}, cron: "@daily", handler: {kind: module, path: x}}`,
    );
    const text = yaml('team: bulk', `schedules: [${items.join(', ')}]`);
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_FILE_BYTES);
    expect(errorsOf([{ file: 'bulk.yaml', text }])).toEqual([
      'bulk.yaml:2:1: schedules: expected at most 10000 schedules in one file, got 20000 (split them over several files)',
    ]);
  });

  it(`schedules: at most ${MAX_SCHEDULES} in all files, reported at the file that goes past it`, () => {
    const files: ConfigText[] = Array.from({ length: MAX_SCHEDULES / MAX_SCHEDULES_PER_FILE }, (_, i) => ({
      file: `team-${i}.yaml`,
      text: flatFile(`team-${i}`, MAX_SCHEDULES_PER_FILE),
    }));
    files.push({
      file: 'z.yaml',
      text: yaml(
        '# one more',
        'team: z',
        'schedules:',
        '  - { name: a, cron: "@daily", handler: { kind: module, path: ./x.js } }',
      ),
    });
    expect(errorsOf(files)).toEqual([
      `z.yaml:3:1: schedules: expected at most 100000 schedules in all files together, got 100001 (this file goes past the limit)`,
    ]);
  });

  it('file size: a file over 4 MiB is rejected before it is parsed', () => {
    const text = withLines(`    payload: "${'x'.repeat(50 * 1024 * 1024)}"`);
    const started = performance.now();
    const result = validateConfigTexts([{ file: FILE, text }]);
    // Parsing this text takes seconds, counting its bytes milliseconds: the bound leaves room for a
    // loaded machine's GC pauses and still tells the two apart.
    expect(performance.now() - started).toBeLessThan(2000);
    expect(result).toEqual({
      ok: false,
      errors: [
        {
          file: FILE,
          line: 1,
          column: 1,
          path: [],
          message: `expected a file of at most 4 MiB, got ${Buffer.byteLength(text)} bytes (split the team's schedules over several files)`,
        },
      ],
    });
    accepts(withLines(`# ${'x'.repeat(MAX_FILE_BYTES - Buffer.byteLength(withLines('# ')))}`));
  });

  it('file size: loadConfig does not read a file over 4 MiB, and reports it with the others', async () => {
    const { dir, remove } = await tempDir();
    try {
      await writeFile(join(dir, 'big.yaml'), withLines(`# ${'x'.repeat(MAX_FILE_BYTES)}`));
      await writeFile(join(dir, 'ok.yaml'), yaml('team: ok', 'schedules: []'));
      const result = await loadConfig(dir);
      expect(result.ok ? [] : result.errors.map(formatConfigError)).toEqual([
        `${join(dir, 'big.yaml')}:1:1: expected a file of at most 4 MiB, got ${MAX_FILE_BYTES + Buffer.byteLength(withLines('# '))} bytes (split the team's schedules over several files)`,
      ]);
    } finally {
      await remove();
    }
  });
});
