import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sortErrors } from '../src/errors.ts';
import { scheduleItems } from '../src/yaml-parts.ts';
import { checkFile } from '../src/validate.ts';
import { yaml } from './support.ts';

/** The text of each item scheduleItems finds. */
function itemTexts(text: string): string[] | undefined {
  const items = scheduleItems(text);
  return items?.starts.map((start, i) => text.slice(start, items.starts[i + 1] ?? items.end));
}

describe('scheduleItems (where a file is cut into parts)', () => {
  it('finds each item of the top-level schedules list, with the lines that belong to it', () => {
    const text = yaml(
      '# payments',
      'team: payments',
      'schedules:  # the list',
      '  # first',
      '  - name: a',
      '    payload: |',
      '      - not an item',
      '    note: "two',
      '      - lines"',
      '# a comment at column 0 inside the list',
      '  - name: b',
      '    handler: { kind: command,',
      '      argv: [x] }',
      '  -',
      '    name: c',
      'other: 1',
    );
    expect(itemTexts(text)).toEqual([
      yaml(
        '  - name: a',
        '    payload: |',
        '      - not an item',
        '    note: "two',
        '      - lines"',
        '# a comment at column 0 inside the list',
      ),
      yaml('  - name: b', '    handler: { kind: command,', '      argv: [x] }'),
      yaml('  -', '    name: c'),
    ]);
  });

  it('reads items at column 0, a team after the list and CRLF line ends', () => {
    const text = 'schedules:\r\n- name: a\r\n  cron: x\r\n- name: b\r\nteam: payments\r\n';
    expect(itemTexts(text)).toEqual(['- name: a\r\n  cron: x\r\n', '- name: b\r\n']);
  });

  it.each([
    ['a flow list', yaml('team: a', 'schedules: [{ name: x }]')],
    ['an anchor on the list', yaml('team: a', 'schedules: &list', '  - name: x')],
    ['several documents', yaml('team: a', 'schedules:', '  - name: a', '---', 'team: b')],
    ['no schedules key', yaml('team: a')],
    ['a quoted key', yaml('team: a', '"schedules":', '  - name: a')],
    ['a list that is not one', yaml('team: a', 'schedules:', '  name: a')],
    ['a tag before the list', yaml('team: !!str a', 'schedules:', '  - name: a')],
  ])('leaves a file whole with %s', (_name, text) => {
    expect(scheduleItems(text)).toBeUndefined();
  });

  // The line scan cuts these where yaml would not; the parts disagree with the items they were cut
  // with (an error, another count), and the file is parsed whole.
  it.each([
    ['an alias of an anchor in another item', yaml('team: a', 'schedules:', '  - &x { name: a }', '  - *x')],
    ['a flow collection over an item line', yaml('team: a', 'schedules:', '  - handler: { kind: command,', '  - x }')],
    ['a quoted scalar over an item line', yaml('team: a', 'schedules:', '  - name: "a', '  - b"', '  - name: c')],
  ])('cuts a file with %s, and it is checked as if whole', (_name, text) => {
    expect(scheduleItems(text)?.starts.length).toBeGreaterThan(1);
    const parts = checkFile(text, 'f.yaml', 1);
    const whole = checkFile(text, 'f.yaml', Number.POSITIVE_INFINITY);
    expect(parts).toEqual(whole);
  });
});

/** Lines of one schedule item (at `indent`), valid or with one of the problems the checks report. */
const item = (indent: string) => {
  const line = (text: string) => `${indent}  ${text}`;
  const name = fc.constantFrom<string | undefined>(
    'name: a',
    'name: b',
    'name: dup',
    'name: dup',
    'name: Bad_Name',
    undefined,
  );
  const cron = fc.constantFrom<string | undefined>(
    'cron: "0 2 * * *"',
    'cron: "*/5 * * * * *"',
    'cron: "61 * * * *"',
    'cron: 5',
    undefined,
  );
  const extra = fc.constantFrom<string[]>(
    [],
    ['timezone: Europe/Berlin'],
    ['timezone: Mars/Olympus'],
    ['timezon: UTC'],
    ['payload: |', '    - not an item', '    text'],
    ['payload: { a: [1,', '  2] }'],
    ['payload: "a', '  b"'],
    ['jitter: 30'],
    ['attempts: 0'],
    ['# a comment'],
    ['cron: "dup key"'],
    ['note: "unclosed'],
    ['note: !!str tagged'],
    ['payload: &p { a: 1 }'],
    ['payload: *p'],
    ['<<: *p'],
    // At the item's own indentation (`^`): lines a scan could take for an item start.
    ['note: "two', '^- lines"'],
    ['payload: [1,', '^- 2]'],
  );
  const handler = fc.constantFrom<string[]>(
    ['handler: { kind: module, path: ./x.js }'],
    ['handler:', '  kind: command', '  argv: [node, x.js]'],
    ['handler: { kind: nope }'],
    [],
  );
  return fc.tuple(name, cron, handler, extra, fc.boolean()).map(([n, c, h, e, blank]) => {
    const body = [n, c, ...h, ...e].filter((text): text is string => text !== undefined);
    const [head = '{}', ...rest] = body;
    const lineOf = (text: string) => (text.startsWith('^') ? `${indent}${text.slice(1)}` : line(text));
    return [`${indent}- ${head}`, ...rest.map(lineOf), ...(blank ? [''] : [])];
  });
};

/** A team file with a list of items, with various lines around the list. */
const teamFile = fc
  .tuple(
    fc.constantFrom(
      ['team: payments'],
      ['# team file', 'team: payments', ''],
      [],
      ['team: Bad_Team'],
      ['team: payments', 'owner: x'],
    ),
    fc.constantFrom('', '  ', '    '),
    fc.constantFrom([], ['team: late'], ['# end'], ['other: 1']),
    fc.constantFrom('\n', '\r\n'),
  )
  .chain(([head, indent, tail, newline]) =>
    fc
      .array(item(indent), { minLength: 0, maxLength: 8 })
      .map((items) => [...head, 'schedules:', ...items.flat(), ...tail].join(newline) + newline),
  );

describe('checkFile in parts', () => {
  it('reports exactly what the whole-file parse reports: errors, positions, schedules and identities', () => {
    let cut = 0;
    fc.assert(
      fc.property(teamFile, (text) => {
        if ((scheduleItems(text)?.starts.length ?? 0) > 1) cut++;
        const parts = checkFile(text, 'f.yaml', 1);
        const whole = checkFile(text, 'f.yaml', Number.POSITIVE_INFINITY);
        expect(sortErrors(parts.errors, ['f.yaml'])).toEqual(sortErrors(whole.errors, ['f.yaml']));
        expect(parts.schedules).toEqual(whole.schedules);
        expect(parts.identities).toEqual(whole.identities);
        expect([parts.scheduleCount, parts.listAt]).toEqual([whole.scheduleCount, whole.listAt]);
      }),
      { numRuns: 400, seed: 20261126 },
    );
    // The property says nothing unless many files were actually cut.
    expect(cut).toBeGreaterThan(200);
  });

  it('reports a big valid file in parts with every source line', () => {
    const text = yaml(
      'team: bulk',
      'schedules:',
      ...Array.from({ length: 300 }, (_, i) => [
        `  - name: s${i}`,
        '    cron: "0 * * * *"',
        '    handler: { kind: module, path: ./x.js }',
      ]).flat(),
    );
    const check = checkFile(text, 'bulk.yaml', 256);
    expect(check.errors).toEqual([]);
    expect(check.schedules.map((schedule) => schedule.source.line)).toEqual(
      Array.from({ length: 300 }, (_, i) => 3 + 3 * i),
    );
    expect(check.schedules.at(-1)?.id).toBe('bulk/s299');
  });
});
