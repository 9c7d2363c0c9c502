import { describe, expect, it } from 'vitest';
import { validateConfigText } from '../src/index.ts';
import { SharedParts } from '../src/shared-parts.ts';
import { configOf, yaml } from './support.ts';

const FILE = yaml(
  'team: payments',
  'schedules:',
  '  - name: a',
  '    cron: "0 * * * *"',
  '    timezone: Europe/Berlin',
  '    handler: { kind: command, argv: ["true"] }',
  '  - name: b',
  '    cron: "0 * * * *"',
  '    timezone: Europe/Berlin',
  '    handler: { kind: command, argv: ["true"], env: { MODE: fast } }',
  '  - name: c',
  '    cron: "5 * * * *"',
  '    attempts: 3',
  '    backoff: { type: exponential, delay: 1s }',
  '    history: { keep: 5 }',
  '    handler: { kind: http, url: "https://example.test/" }',
  '  - name: d',
  '    cron: "5 * * * *"',
  '    handler: { kind: http, url: "https://example.test/d" }',
);

/** The file's schedules, each object and string its own copy, as JSON.parse gives them. */
const parsed = () =>
  JSON.parse(JSON.stringify(configOf(validateConfigText(FILE, '/config/payments.yaml')).schedules)) as ReturnType<
    typeof configOf
  >['schedules'];

describe('SharedParts', () => {
  it('leaves every value as it was', () => {
    const parts = new SharedParts();
    expect(parsed().map((schedule) => parts.share(schedule))).toEqual(parsed());
  });

  it('gives equal parts one copy, and keeps different ones apart', () => {
    const parts = new SharedParts();
    const [a, b, c, d] = parsed().map((schedule) => parts.share(schedule));
    if (!a || !b || !c || !d) throw new Error('four schedules expected');
    expect(b.source.file).toBe(a.source.file);
    expect(d.team).toBe(a.team);
    expect(b.timezone).toBe(a.timezone);
    expect(b.cron).toBe(a.cron);
    expect(d.backoff).toBe(a.backoff);
    expect(d.history).toBe(a.history);
    expect(c.backoff).not.toBe(a.backoff);
    expect(c.backoff).toEqual({ type: 'exponential', delayMs: 1000 });
    expect(c.history).not.toBe(a.history);
    // No headers on either http handler, no environment on a: one empty object; b's own stays its own.
    if (a.handler.kind !== 'command' || b.handler.kind !== 'command') throw new Error('command handlers expected');
    if (c.handler.kind !== 'http' || d.handler.kind !== 'http') throw new Error('http handlers expected');
    expect(c.handler.headers).toBe(a.handler.env);
    expect(d.handler.headers).toBe(a.handler.env);
    expect(b.handler.env).toEqual({ MODE: 'fast' });
    expect(Object.isFrozen(b.handler.env)).toBe(false);
  });

  it('freezes what it shares, so a change meant for one schedule throws', () => {
    const parts = new SharedParts();
    const [a, b] = parsed().map((schedule) => parts.share(schedule));
    if (!a || !b) throw new Error('two schedules expected');
    expect(() => {
      (b.backoff as { delayMs: number }).delayMs = 5;
    }).toThrow(TypeError);
    expect(a.backoff.delayMs).toBe(0);
  });
});
