import { Redis } from 'ioredis';

/** A client that fails fast instead of retrying, so a fault shows as an error within `timeoutMs`. */
export function strictClient(url: string, timeoutMs = 300): Redis {
  const client = new Redis(url, {
    lazyConnect: true,
    enableReadyCheck: false,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  });
  client.on('error', () => undefined);
  return client;
}

/** Resolves to the reply, or to the error's code/message, so tests can assert either. */
export async function outcome(promise: Promise<unknown>): Promise<unknown> {
  try {
    return await promise;
  } catch (error) {
    return error instanceof Error ? `error: ${error.message}` : `error: ${String(error)}`;
  }
}
