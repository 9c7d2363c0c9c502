const MASK = '***';

/**
 * Masks the password of a URL so it can be logged or put in an error message:
 * `redis://user:secret@host:6379` -> `redis://user:***@host:6379`, `redis://:secret@host` ->
 * `redis://:***@host`. The user name, host, port, path and query stay as they are. A string
 * without a password is returned unchanged.
 *
 * Anything else that contains a `@` is masked conservatively: everything between the first `:`
 * after the scheme and the last `@` is replaced, so `user:secret@host:6379` (no scheme),
 * `redis://user:pa/ss@host` (a password the URL parser reads as a port and a path),
 * `redis://:ab@cd/ef@host` (a `@` after the parser's host) or `redis://user:pass word@host`
 * still hide the secret; the price is over-masking strings that merely contain a `:` before a
 * `@`, such as a port followed by a `@` in the query.
 *
 * A `password` query parameter (ioredis authenticates with it) is masked too.
 */
export function redactUrl(url: string): string {
  return redactAuthority(url).replace(PASSWORD_PARAM, `$1${MASK}`);
}

function redactAuthority(url: string): string {
  const scheme = SCHEME.exec(url)?.[0] ?? '';
  const end = scheme === '' ? -1 : url.slice(scheme.length).search(/[/?#\\]|$/) + scheme.length;
  const at = url.lastIndexOf('@', end);
  const colon = url.indexOf(':', scheme.length);
  const lastAt = url.lastIndexOf('@');
  // Where the URL parser finds a password and no `@` follows its host, mask exactly it (keeping the text as written otherwise).
  if (hasPassword(url) && at > colon && colon !== -1 && lastAt === at)
    return `${url.slice(0, colon + 1)}${MASK}${url.slice(at)}`;
  // Anything else: conservatively, from the first `:` after the scheme to the last `@` of the string.
  if (lastAt === -1 || colon === -1 || colon > lastAt) return url;
  return `${url.slice(0, colon + 1)}${MASK}${url.slice(lastAt)}`;
}

/** `?password=...` or `&password=...` up to the next parameter or fragment. */
const PASSWORD_PARAM = /([?&]password=)[^&#]*/gi;

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;

function hasPassword(text: string): boolean {
  if (!SCHEME.test(text)) return false;
  try {
    return new URL(text).password !== '';
  } catch {
    return false;
  }
}
