import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { REDIS_TLS_VARIABLES, type EnvError, type EnvResult, type RedisTlsFiles } from '@tickwarden/config';

/**
 * The TLS options (ioredis' `tls`) every `rediss://` connection of the process takes, read from
 * the files its environment names; undefined when it names none (Node's default CAs, no client
 * certificate). Read once: a renewed certificate takes a restart. A file that cannot be read is
 * an error naming its variable and path.
 */
export function loadRedisTls(files: RedisTlsFiles): EnvResult<ConnectionOptions | undefined> {
  const errors: EnvError[] = [];
  const read = (field: keyof RedisTlsFiles): string | undefined => {
    const file = files[field];
    if (file === undefined) return undefined;
    try {
      return readFileSync(file, 'utf8');
    } catch (error) {
      errors.push({
        variable: REDIS_TLS_VARIABLES[field],
        message: `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
      });
      return undefined;
    }
  };
  const [ca, cert, key] = [read('ca'), read('cert'), read('key')];
  if (errors.length > 0) return { ok: false, errors };
  if (ca === undefined && cert === undefined) return { ok: true, value: undefined };
  return { ok: true, value: { ...(ca === undefined ? {} : { ca }), ...(cert === undefined ? {} : { cert, key }) } };
}

/** ioredis options for `url`: the TLS options on a `rediss://` URL, none on a `redis://` one. */
export function redisOptionsFor(url: string, tls: ConnectionOptions | undefined): { tls?: ConnectionOptions } {
  return tls !== undefined && url.startsWith('rediss:') ? { tls } : {};
}

/**
 * The delay before a queue Redis connection's next reconnect attempt, ms: at most 500. ioredis'
 * default backs off to 5 s, so a process could find a restarted queue Redis seconds late, and a
 * tick it recovered then could miss its start deadline; two attempts a second cost nothing.
 */
const queueReconnectDelay = (attempt: number): number => Math.min(50 * attempt, 500);

/** ioredis options of a long-lived queue Redis connection: TLS for `url`, reconnects within 500 ms. */
export function queueRedisOptions(
  url: string,
  tls: ConnectionOptions | undefined,
): { tls?: ConnectionOptions; retryStrategy: (attempt: number) => number } {
  return { retryStrategy: queueReconnectDelay, ...redisOptionsFor(url, tls) };
}
