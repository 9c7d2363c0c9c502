// The console's control token and sessions. The token (a mounted Secret) is posted once, on the
// sign-in form; the browser then holds a session cookie, never the token: its expiry and an HMAC
// of it keyed by the token. Every replica with the same token accepts it (a Service spreads the
// requests over the replicas) without any state shared between them, and a new token ends every
// session.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CONTROL_TOKEN_FILE_VARIABLE, type EnvResult } from '@tickwarden/config';

/** The shortest control token accepted: a guessable one would make the console writable to anyone who reaches the port. */
export const MIN_TOKEN_LENGTH = 16;
/** How long a sign-in lasts, ms. */
export const SESSION_MS = 12 * 3_600_000;
export const SESSION_COOKIE = 'tickwarden-session';

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * The control token from its file, read once at start and trimmed (a Secret's file may end in a
 * newline); undefined without a file, or when the file does not exist (an optional Secret that
 * is not there): the console is read-only. No message quotes the file's content.
 */
export function readControlToken(file: string | undefined): EnvResult<string | undefined> {
  if (file === undefined) return { ok: true, value: undefined };
  const fail = (message: string): EnvResult<string | undefined> => ({
    ok: false,
    errors: [{ variable: CONTROL_TOKEN_FILE_VARIABLE, message }],
  });
  let token: string;
  try {
    token = readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { ok: true, value: undefined };
    return fail(`cannot read ${file}: ${messageOf(error)}`);
  }
  if (token.length < MIN_TOKEN_LENGTH)
    return fail(
      `${file} holds ${token.length} characters: a control token needs at least ${MIN_TOKEN_LENGTH} (e.g. openssl rand -hex 32)`,
    );
  if (/[\s\p{Cc}]/u.test(token))
    return fail(
      `${file} holds white space or control characters inside the token: one line of printable characters expected`,
    );
  return { ok: true, value: token };
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

/** Whether `given` is the token, in a time that does not depend on where they differ (both hashed to one length first). */
export function sameToken(given: string, token: string): boolean {
  return timingSafeEqual(sha256(given), sha256(token));
}

const mac = (token: string, expiresMs: number): string =>
  createHmac('sha256', token).update(`tickwarden console session until ${expiresMs}`).digest('base64url');

/** A session cookie's value, valid until `expiresMs`. */
export function sessionValue(token: string, expiresMs: number): string {
  return `${expiresMs}.${mac(token, expiresMs)}`;
}

/** Whether a session cookie's value was made with this token and has not expired (nor ends further off than a session lasts). */
export function validSession(token: string, value: string | undefined, nowMs: number): boolean {
  const match = /^(\d{1,15})\.([A-Za-z0-9_-]{43})$/.exec(value ?? '');
  if (!match) return false;
  const expiresMs = Number(match[1]);
  if (expiresMs <= nowMs || expiresMs > nowMs + SESSION_MS) return false;
  return timingSafeEqual(Buffer.from(match[2] as string), Buffer.from(mac(token, expiresMs)));
}

/** The cookies of a `Cookie` header, by name (values percent-decoded; a malformed one is left out). */
export function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const pair of (header ?? '').split(';')) {
    const at = pair.indexOf('=');
    const name = pair.slice(0, Math.max(0, at)).trim();
    if (name === '') continue;
    try {
      cookies.set(name, decodeURIComponent(pair.slice(at + 1).trim()));
    } catch {
      // Not percent-encoded as this console writes its cookies: not one of them.
    }
  }
  return cookies;
}

/** A `Set-Cookie` value: kept from scripts (HttpOnly), sent by same-site requests only (SameSite=Strict); `maxAgeS` 0 deletes it. */
export function setCookie(name: string, value: string, maxAgeS: number): string {
  return `${name}=${encodeURIComponent(value)}; Path=/; Max-Age=${maxAgeS}; HttpOnly; SameSite=Strict`;
}
