import { lookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';
import {
  addressRefusal,
  DEFAULT_HTTP_DESTINATIONS,
  DEFAULT_SECRETS_DIR,
  hostRefusal,
  redactUrl,
  type HandlerConfig,
  type HttpDestinations,
} from '@tickwarden/config';
import { Agent, fetch, Headers, type Response } from 'undici';
import { resolveValues } from './secrets.ts';
import { HandlerError, tickIso, type RunContext, type RunDetails } from '../run-context.ts';

export type HttpHandlerConfig = Extract<HandlerConfig, { kind: 'http' }>;

/** At most this much of a failed response's body goes into the error. */
export const HTTP_ERROR_BODY_LIMIT = 1024;

/** The most redirects a `redirects: same-origin` handler follows. */
export const MAX_REDIRECTS = 5;

/** The `code` of a run refused by the deployment's destination policy. */
export const HTTP_DESTINATION_REFUSED = 'HTTP_DESTINATION_REFUSED';

class DestinationRefusedError extends Error {}

/**
 * A resolver that hands the connection only the addresses the policy allows, and fails when none
 * is: checked where the connection is made, so a name cannot point elsewhere after a check.
 */
function checkedLookup(policy: HttpDestinations): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true } satisfies LookupAllOptions, (error, addresses: LookupAddress[]) => {
      const refusals = error ? [] : addresses.map((entry) => addressRefusal(policy, hostname, entry.address));
      const allowed = error ? [] : addresses.filter((_, i) => refusals[i] === undefined);
      const failure =
        error ??
        (allowed.length === 0
          ? new DestinationRefusedError(refusals[0] ?? `${hostname} resolves to no address`)
          : null);
      if (failure || options.all)
        return (callback as (error: Error | null, addresses: LookupAddress[]) => void)(failure, allowed);
      const [first] = allowed;
      callback(null, first?.address ?? '', first?.family ?? 4);
    });
  };
}

const agents = new WeakMap<HttpDestinations, Agent>();

/** One connection pool per policy (the worker has one): keep-alive across runs, every new connection's addresses checked. */
function agentFor(policy: HttpDestinations): Agent {
  let agent = agents.get(policy);
  if (agent === undefined) {
    agent = new Agent({ connect: { lookup: checkedLookup(policy) } });
    agents.set(policy, agent);
  }
  return agent;
}

function refused(refusal: string, url: URL): HandlerError {
  return new HandlerError(`http destination refused: ${refusal}`, {
    code: HTTP_DESTINATION_REFUSED,
    url: redactUrl(url.href),
  });
}

/**
 * Calls the schedule's URL once: the payload as a JSON body (none for GET),
 * `Idempotency-Key: <jobId>` (the same for every attempt of a tick) and the
 * tick's schedule, time and fencing token as headers. 2xx is success; any
 * other status fails with the status and at most 1 KiB of the body. A redirect
 * fails the run too, unless the schedule allows `same-origin` ones and it is
 * one: the body and headers never go to another origin. Requests go only
 * where `httpDestinations` allows: the URL's host before the run starts, and
 * each address a name resolves to on every new connection. Aborting `context.signal`
 * cancels the request (the connection is closed).
 */
export async function runHttp(
  config: HttpHandlerConfig,
  context: RunContext,
  options: { secretsDir?: string | undefined; httpDestinations?: HttpDestinations | undefined } = {},
): Promise<RunDetails> {
  const { secretsDir = DEFAULT_SECRETS_DIR, httpDestinations = DEFAULT_HTTP_DESTINATIONS } = options;
  const timeout = AbortSignal.timeout(config.timeoutMs);
  const signal = AbortSignal.any([context.signal, timeout]);
  const headers = new Headers(await resolveValues(config.headers, secretsDir));
  // fetch refuses URLs with credentials: send them as Basic auth (as curl does), and never echo them.
  const origin = new URL(config.url);
  if (origin.username !== '' || origin.password !== '') {
    if (!headers.has('authorization'))
      headers.set(
        'authorization',
        `Basic ${Buffer.from(`${decodeURIComponent(origin.username)}:${decodeURIComponent(origin.password)}`).toString('base64')}`,
      );
    origin.username = '';
    origin.password = '';
  }
  headers.set('content-type', 'application/json');
  headers.set('Idempotency-Key', context.jobId);
  headers.set('X-Tickwarden-Schedule', context.schedule);
  headers.set('X-Tickwarden-Tick', tickIso(context));
  headers.set('X-Tickwarden-Fence', String(context.fence));
  let request = {
    url: origin,
    method: config.method as string,
    body: config.method === 'GET' ? undefined : JSON.stringify(context.payload ?? null),
  };
  const started = performance.now();
  const failure = (error: unknown): never => {
    if (context.signal.aborted) throw context.signal.reason;
    if (timeout.aborted)
      throw new HandlerError(`http request timed out after ${config.timeoutMs} ms`, { timeoutMs: config.timeoutMs });
    if (error instanceof Error && error.cause instanceof DestinationRefusedError)
      throw refused(error.cause.message, request.url);
    const cause =
      error instanceof Error
        ? ((error.cause instanceof Error ? error.cause.message : undefined) ?? error.message)
        : String(error);
    throw new HandlerError(`http request failed: ${redactUrl(cause)}`);
  };
  context.signal.throwIfAborted();
  const firstRefusal = hostRefusal(httpDestinations, origin.hostname);
  if (firstRefusal !== undefined) throw refused(firstRefusal, origin);
  await context.started();
  for (let redirects = 0; ; redirects++) {
    let response: Response;
    try {
      response = await fetch(request.url, {
        method: request.method,
        headers,
        body: request.body,
        signal,
        redirect: 'manual',
        dispatcher: agentFor(httpDestinations),
      });
    } catch (error) {
      return failure(error);
    }
    const { status } = response;
    const location = status >= 300 && status < 400 ? response.headers.get('location') : null;
    if (location !== null) {
      await response.body?.cancel().catch(() => undefined);
      const next = new URL(location, request.url);
      const refusal =
        config.redirects === 'none'
          ? 'redirects: none'
          : next.origin !== origin.origin
            ? `not ${origin.origin}`
            : redirects >= MAX_REDIRECTS
              ? `more than ${MAX_REDIRECTS} redirects`
              : undefined;
      if (refusal)
        throw new HandlerError(`http ${status}: redirect to ${redactUrl(next.href)} not followed (${refusal})`, {
          status,
          location: redactUrl(next.href),
        });
      // As fetch follows them: 303, and 301/302 after a POST, become a GET without a body.
      const toGet = status === 303 || ((status === 301 || status === 302) && request.method === 'POST');
      request = { url: next, method: toGet ? 'GET' : request.method, body: toGet ? undefined : request.body };
      continue;
    }
    if (status >= 200 && status < 300) {
      await response.body?.cancel().catch(() => undefined);
      return { status, responseMs: Math.round(performance.now() - started), ...(redirects > 0 ? { redirects } : {}) };
    }
    let text: string;
    try {
      text = await readLimited(response, HTTP_ERROR_BODY_LIMIT);
    } catch (error) {
      return failure(error);
    }
    throw new HandlerError(`http ${status}${response.statusText ? ` ${response.statusText}` : ''}: ${text}`, {
      status,
      body: text,
    });
  }
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
