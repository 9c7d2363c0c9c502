import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ConfigValue } from '@tickwarden/config';
import { HandlerError } from '../run-context.ts';

/** The `code` of the HandlerError of a Secret value the worker could not read. */
export const SECRET_UNAVAILABLE = 'SECRET_UNAVAILABLE';

/**
 * Header or environment values with the `{ secret, key }` ones read from the Secrets mounted at
 * `secretsDir` (`<secretsDir>/<secret>/<key>`, one trailing newline dropped), at each run, so a
 * rotated Secret is picked up. A value that cannot be read fails the run naming the Secret and
 * key, never a value.
 */
export async function resolveValues(
  values: Readonly<Record<string, ConfigValue>>,
  secretsDir: string,
): Promise<Record<string, string>> {
  const resolved: Record<string, string> = {};
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string') {
      resolved[name] = value;
      continue;
    }
    const file = path.join(secretsDir, value.secret, value.key);
    try {
      resolved[name] = (await readFile(file, 'utf8')).replace(/\n$/, '');
    } catch (error) {
      throw new HandlerError(
        `cannot read ${name} from Secret ${value.secret}, key ${value.key} (${file}): ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`,
        { code: SECRET_UNAVAILABLE, secret: value.secret, key: value.key },
      );
    }
  }
  return resolved;
}
