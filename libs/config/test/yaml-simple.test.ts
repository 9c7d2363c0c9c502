import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseDocument, type Scalar } from 'yaml';
import { YAML_OPTIONS } from '../src/validate.ts';
import { simpleItem } from '../src/yaml-simple.ts';
import { yaml } from './support.ts';

const HEAD = 'team: t\nschedules:\n';

/** simpleItem on a file of one item at `indent`. */
const read = (indent: number, ...lines: string[]) => {
  const text = HEAD + yaml(...lines);
  return simpleItem(text, HEAD.length, text.length, indent);
};

describe('simpleItem', () => {
  it('reads block mappings, block sequences and one-line flow collections', () => {
    const item = read(
      2,
      '  - name: s1',
      '    cron: 0 * * * *',
      '    # a comment',
      '# another one, at column 0',
      '',
      '    handler:',
      '      kind: command',
      '      argv:',
      '        - "true"',
      "        - 'a b'",
      '    payload: { n: 12, ok: true, none: null, list: [x, "y", {}] }',
      '    url: https://x.test/a',
    );
    expect(item?.value).toEqual({
      name: 's1',
      cron: '0 * * * *',
      handler: { kind: 'command', argv: ['true', 'a b'] },
      payload: { n: 12, ok: true, none: null, list: ['x', 'y', {}] },
      url: 'https://x.test/a',
    });
    expect(item?.nameAt).toBe(HEAD.length + '  - name: '.length);
  });

  it.each([
    ['an anchor', '  - name: &a s1'],
    ['a tag', '  - name: !!str s1'],
    ['a comment after a value', '  - name: s1 # first'],
    ['an escape', '  - name: "s\\u0031"'],
    ['a number it does not read', '  - attempts: 1e1'],
    ['a negative number', '  - attempts: -1'],
    ['a duplicate key', '  - name: a\n    name: b'],
    ['a merge key', '  - <<: { name: a }'],
    ['a multi-line scalar', '  - name: a\n      b'],
    ['a flow collection over two lines', '  - payload: [1,\n      2]'],
    ['a colon in a flow scalar', '  - payload: { url: https://x.test/a }'],
    ['an empty value', '  - name:'],
    ['a tab', '  - name:\ta'],
    ['a carriage return', '  - name: a\r'],
  ])('leaves an item with %s to yaml', (_what, text) => {
    expect(read(2, text)).toBeUndefined();
  });

  const scalar = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom('a', 'a b', '0 * * * *', '"q"', "'s q'", '30s', '12', 'true', '[x, "y"]') },
    fc.constantFrom(
      ...['"it\'s"', '0', '007', '1e3', '0x1F', '1.5', '-3', 'False', 'NULL', '~', 'yes', '12:30', 'a: b', 'x:'],
      ...['a,b', '{a: 1}', '{ a: [b, "c"] }', '[]', '{}', '[a,]', '[a, , b]', "'a''b'", '"a" b', '*x', '|', '- a'],
      ...['.inf', '1_000', '{a:1}', '@daily', 'a #b', 'a#b', '"#"', 'https://x.test/a?b=c'],
    ),
  );
  const key = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom('name', 'cron', 'payload', 'x-y') },
    fc.constantFrom('true', 'null', '__proto__', '<<', 'a b', '# c'),
  );
  const entry = (indent: string, depth: number): fc.Arbitrary<string[]> =>
    fc.oneof(
      fc.tuple(key, fc.constantFrom(' ', ' ', '  ', ''), scalar).map(([k, space, v]) => [`${indent}${k}:${space}${v}`]),
      fc
        .tuple(key, fc.constantFrom('', '  ', '   '), fc.array(scalar, { minLength: 1, maxLength: 3 }))
        .map(([k, more, items]) => [`${indent}${k}:`, ...items.map((v) => `${indent}${more}- ${v}`)]),
      ...(depth > 0
        ? [
            fc
              .tuple(key, fc.constantFrom('  ', ' ', ''))
              .chain(([k, more]) =>
                mapping(`${indent}${more}`, depth - 1).map((lines) => [`${indent}${k}:`, ...lines]),
              ),
          ]
        : []),
    );
  const mapping = (indent: string, depth: number): fc.Arbitrary<string[]> =>
    fc
      .tuple(fc.array(entry(indent, depth), { minLength: 1, maxLength: 4 }), fc.constantFrom([], ['', '  # note']))
      .map(([entries, between]) => [...entries.flat(), ...between]);

  it('reads an item only as yaml does, its name where yaml has it', () => {
    let simple = 0;
    fc.assert(
      fc.property(mapping('    ', 2), (lines) => {
        const text = HEAD + yaml(`  - ${(lines[0] as string).trimStart()}`, ...lines.slice(1));
        const item = simpleItem(text, HEAD.length, text.length, 2);
        if (item === undefined) return;
        simple++;
        const doc = parseDocument(text, YAML_OPTIONS);
        expect([doc.errors, doc.warnings]).toEqual([[], []]);
        expect(doc.toJS()).toEqual({ team: 't', schedules: [item.value] });
        if (item.nameAt !== undefined)
          expect(item.nameAt).toBe((doc.getIn(['schedules', 0, 'name'], true) as Scalar | undefined)?.range?.[0]);
      }),
      { numRuns: 3000, seed: 20261128 },
    );
    // The property says nothing unless many items were read.
    expect(simple).toBeGreaterThan(200);
  });
});
