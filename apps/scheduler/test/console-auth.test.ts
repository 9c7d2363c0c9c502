import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  MIN_TOKEN_LENGTH,
  parseCookies,
  readControlToken,
  sameToken,
  SESSION_MS,
  sessionValue,
  setCookie,
  validSession,
} from '../src/console-auth.ts';
import { backfillFrom, FormError, MAX_NOTE_CHARS, saidFrom, utcInstant } from '../src/console-forms.ts';

const TOKEN = '0123456789abcdef0123456789abcdef';
const NOW = Date.parse('2026-03-28T12:00:00Z');

describe('the control token file', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-token-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, content: string): string => {
    const at = path.join(dir, name);
    writeFileSync(at, content);
    return at;
  };

  it('none configured: read-only, no error', () => {
    expect(readControlToken(undefined)).toEqual({ ok: true, value: undefined });
  });

  it('read trimmed (a Secret file may end in a newline)', () => {
    expect(readControlToken(file('ok', ` ${TOKEN}\n`))).toEqual({ ok: true, value: TOKEN });
  });

  it('no file there (an optional Secret not created): read-only, no error', () => {
    expect(readControlToken(path.join(dir, 'missing'))).toEqual({ ok: true, value: undefined });
  });

  it('too short, unreadable, or more than one line: an error naming the variable, never quoting the content', () => {
    const short = file('short', 'hunter2hunter2\n');
    expect(readControlToken(short)).toEqual({
      ok: false,
      errors: [
        {
          variable: 'TICKWARDEN_CONTROL_TOKEN_FILE',
          message: `${short} holds 14 characters: a control token needs at least ${MIN_TOKEN_LENGTH} (e.g. openssl rand -hex 32)`,
        },
      ],
    });
    const result = readControlToken(dir);
    expect(
      result.ok
        ? []
        : result.errors.map((error) => [error.variable, error.message.startsWith(`cannot read ${dir}: EISDIR`)]),
    ).toEqual([['TICKWARDEN_CONTROL_TOKEN_FILE', true]]);
    const twoLines = readControlToken(file('two', `${TOKEN}\nsecond-line-secret-value\n`));
    expect(twoLines.ok).toBe(false);
    expect(JSON.stringify(twoLines)).not.toContain('second-line-secret-value');
  });
});

describe('sessions', () => {
  it('the token compares equal only to itself', () => {
    expect(sameToken(TOKEN, TOKEN)).toBe(true);
    expect(sameToken(`${TOKEN}x`, TOKEN)).toBe(false);
    expect(sameToken('', TOKEN)).toBe(false);
    expect(sameToken(TOKEN.replace(/.$/, '0'), TOKEN)).toBe(false);
  });

  it('a session made with the token is valid until it expires, on any replica with that token, and holds no token', () => {
    const value = sessionValue(TOKEN, NOW + SESSION_MS);
    expect(value).not.toContain(TOKEN);
    expect(validSession(TOKEN, value, NOW)).toBe(true);
    expect(validSession(TOKEN, value, NOW + SESSION_MS)).toBe(false);
    expect(validSession(`${TOKEN}-rotated`, value, NOW)).toBe(false);
  });

  it('a forged, altered or too long session is refused', () => {
    const value = sessionValue(TOKEN, NOW + 1000);
    const [expires, mac] = value.split('.') as [string, string];
    expect(validSession(TOKEN, `${Number(expires) + 1}.${mac}`, NOW)).toBe(false);
    expect(validSession(TOKEN, `${expires}.${mac.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`, NOW)).toBe(false);
    expect(validSession(TOKEN, sessionValue(TOKEN, NOW + SESSION_MS + 1), NOW)).toBe(false);
    expect(validSession(TOKEN, undefined, NOW)).toBe(false);
    expect(validSession(TOKEN, 'garbage', NOW)).toBe(false);
  });

  it('cookies: parsed by name, written HttpOnly and SameSite=Strict for the whole port', () => {
    expect(parseCookies('a=1; tickwarden-by=al%20ice;bad=%E0%A4%A; =x')).toEqual(
      new Map([
        ['a', '1'],
        ['tickwarden-by', 'al ice'],
      ]),
    );
    expect(parseCookies(undefined)).toEqual(new Map());
    expect(setCookie('tickwarden-by', 'al;ice', 60)).toBe(
      'tickwarden-by=al%3Bice; Path=/; Max-Age=60; HttpOnly; SameSite=Strict',
    );
  });
});

describe('form fields', () => {
  const form = (fields: Record<string, string>) => new URLSearchParams(fields);
  const refusal = (run: () => unknown): string => {
    try {
      run();
    } catch (error) {
      if (error instanceof FormError) return error.message;
      throw error;
    }
    throw new Error('accepted');
  };

  it('by is required, both are bounded single lines', () => {
    expect(saidFrom(form({ by: ' alice ', note: ' INC-42 ' }))).toEqual({ by: 'alice', note: 'INC-42' });
    expect(saidFrom(form({ by: 'alice' }))).toEqual({ by: 'alice', note: '' });
    expect(refusal(() => saidFrom(form({ note: 'x' })))).toBe(
      'by: required: who does this (a name or an e-mail address), for the audit trail',
    );
    expect(refusal(() => saidFrom(form({ by: 'a', note: 'x'.repeat(MAX_NOTE_CHARS + 1) })))).toBe(
      `note: at most ${MAX_NOTE_CHARS} characters, got ${MAX_NOTE_CHARS + 1}`,
    );
    expect(refusal(() => saidFrom(form({ by: 'a\u0007b' })))).toBe(
      'by and note: one line of text, without control characters',
    );
  });

  it('backfill times: datetime-local values are UTC, ISO 8601 with a zone as written', () => {
    expect(utcInstant('from', '2026-03-29T02:00')).toBe(Date.parse('2026-03-29T02:00:00Z'));
    expect(utcInstant('from', '2026-03-29T02:00:30')).toBe(Date.parse('2026-03-29T02:00:30Z'));
    expect(utcInstant('to', '2026-03-29T04:00:00+02:00')).toBe(Date.parse('2026-03-29T02:00:00Z'));
    expect(refusal(() => utcInstant('to', 'yesterday'))).toBe(
      'to: expected a time in UTC such as 2026-03-29T02:00 (or ISO 8601 with a zone), got "yesterday"',
    );
    expect(refusal(() => utcInstant('from', null))).toBe(
      'from: expected a time in UTC such as 2026-03-29T02:00 (or ISO 8601 with a zone), got ""',
    );
  });

  it("backfill: max defaults to the CLI's and is bounded; dry run is the checkbox", () => {
    const range = { from: '2026-03-29T00:00', to: '2026-03-29T06:00' };
    expect(backfillFrom(form(range))).toEqual({
      fromMs: Date.parse('2026-03-29T00:00Z'),
      toMs: Date.parse('2026-03-29T06:00Z'),
      max: 100,
      dryRun: false,
    });
    expect(backfillFrom(form({ ...range, max: '7', dryRun: 'on' }))).toMatchObject({ max: 7, dryRun: true });
    expect(refusal(() => backfillFrom(form({ ...range, max: '10001' })))).toBe(
      'max: expected a whole number from 1 to 10000, got "10001"',
    );
    expect(refusal(() => backfillFrom(form({ ...range, max: '1e3' })))).toBe(
      'max: expected a whole number from 1 to 10000, got "1e3"',
    );
  });
});
