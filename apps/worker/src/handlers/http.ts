import { redactUrl, type HandlerConfig } from '@tickwarden/config';
import { HandlerError, tickIso, type RunContext, type RunDetails } from './types.ts';

export type HttpHandlerConfig = Extract<HandlerConfig, { kind: 'http' }>;

/** At most this much of a failed response's body goes into the error. */
export const HTTP_ERROR_BODY_LIMIT = 1024;

/**
 * Calls the schedule's URL once: the payload as a JSON body (none for GET),
 * `Idempotency-Key: <jobId>` (the same for every attempt of a tick) and the
 * tick's schedule, time and fencing token as headers. 2xx is success; any
 * other status fails with the status and at most 1 KiB of the body. Aborting
 * `context.signal` cancels the request (the connection is closed).
 */
export async function runHttp(config: HttpHandlerConfig, context: RunContext): Promise<RunDetails> {
  const timeout = AbortSignal.timeout(config.timeoutMs);
  const signal = AbortSignal.any([context.signal, timeout]);
  const headers = new Headers(config.headers);
  // fetch refuses URLs with credentials: send them as Basic auth (as curl does), and never echo them.
  const url = new URL(config.url);
  if (url.username !== '' || url.password !== '') {
    if (!headers.has('authorization')) headers.set('authorization', `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`);
    url.username = '';
    url.password = '';
  }
  headers.set('content-type', 'application/json');
  headers.set('Idempotency-Key', context.jobId);
  headers.set('X-Tickwarden-Schedule', context.schedule);
  headers.set('X-Tickwarden-Tick', tickIso(context));
  headers.set('X-Tickwarden-Fence', String(context.fence));
  const body = config.method === 'GET' ? undefined : JSON.stringify(context.payload ?? null);
  const started = performance.now();
  const failure = (error: unknown): never => {
    if (context.signal.aborted) throw context.signal.reason;
    if (timeout.aborted) throw new HandlerError(`http request timed out after ${config.timeoutMs} ms`, { timeoutMs: config.timeoutMs });
    const cause = error instanceof Error ? ((error.cause instanceof Error ? error.cause.message : undefined) ?? error.message) : String(error);
    throw new HandlerError(`http request failed: ${redactUrl(cause)}`);
  };
  let response: Response;
  try {
    response = await fetch(url, { method: config.method, headers, body, signal });
  } catch (error) {
    return failure(error);
  }
  const status = response.status;
  if (status >= 200 && status < 300) {
    await response.body?.cancel().catch(() => undefined);
    return { status, responseMs: Math.round(performance.now() - started) };
  }
  let text: string;
  try {
    text = await readLimited(response, HTTP_ERROR_BODY_LIMIT);
  } catch (error) {
    return failure(error);
  }
  throw new HandlerError(`http ${status}${response.statusText ? ` ${response.statusText}` : ''}: ${text}`, { status, body: text });
}

/** Reads at most `limit` bytes of the body (then cancels the rest), as UTF-8. */
async function readLimited(response: Response, limit: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < limit) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  const bytes = Buffer.concat(chunks).subarray(0, limit);
  return new TextDecoder().decode(bytes) + (size > limit ? '…' : '');
}
