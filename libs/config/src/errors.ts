import { redactUrl } from './redact.ts';
import type { ConfigError } from './types.ts';

/** A bad environment variable, named, with what is wrong. */
export interface EnvError {
  variable: string;
  message: string;
}

export type EnvResult<T> = { ok: true; value: T } | { ok: false; errors: EnvError[] };

/**
 * One line per error, compiler style:
 * `teams/payments.yaml:7:11: schedules[0].cron: invalid cron expression "61 * * * *": ...`
 * (the path part is left out for file-level errors).
 */
export function formatConfigError(error: ConfigError): string {
  const where = `${error.file}:${error.line}:${error.column}`;
  return error.path.length === 0
    ? `${where}: ${error.message}`
    : `${where}: ${formatPath(error.path)}: ${error.message}`;
}

/** `['schedules', 0, 'handler', 'headers', 'X Team']` -> `schedules[0].handler.headers["X Team"]`. */
export function formatPath(path: readonly (string | number)[]): string {
  let text = '';
  for (const segment of path) {
    if (typeof segment === 'number') text += `[${segment}]`;
    else if (/^[A-Za-z_][\w-]*$/.test(segment)) text += text === '' ? segment : `.${segment}`;
    else text += `[${JSON.stringify(segment)}]`;
  }
  return text;
}

/** How a YAML value is echoed in a message: strings quoted (URL passwords masked), others by kind. */
export function describeValue(value: unknown): string {
  if (value === null) return 'an empty value';
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') {
    const redacted = redactUrl(value); // before truncating, which could cut off the `@`
    return JSON.stringify(redacted.length > 80 ? `${redacted.slice(0, 77)}...` : redacted);
  }
  if (typeof value === 'number') return Number.isFinite(value) ? `the number ${value}` : `the number ${String(value)}`;
  if (typeof value === 'boolean') return `the boolean ${value}`;
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return `a ${typeof value}`;
}

/** Sorts by file (in the given order), then line, then column; keeps the given order otherwise. */
export function sortErrors(errors: ConfigError[], files: readonly string[]): ConfigError[] {
  const rank = (file: string): number => {
    const index = files.indexOf(file);
    return index === -1 ? files.length : index;
  };
  return errors
    .map((error, index) => ({ error, index }))
    .sort(
      (a, b) =>
        rank(a.error.file) - rank(b.error.file) ||
        a.error.line - b.error.line ||
        a.error.column - b.error.column ||
        a.index - b.index,
    )
    .map(({ error }) => error);
}
