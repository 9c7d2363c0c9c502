import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A readiness check: resolves to the reasons the process is not ready (empty when ready). */
export type ReadinessCheck = () => Promise<string[]>;

/** An answer of an {@link ApiHandler}: a status and a JSON body. */
export interface ApiResponse {
  status: number;
  body: unknown;
}

/** Answers GET requests under `/api/` (path and query), or undefined for a path it does not know (404). */
export type ApiHandler = (path: string, query: URLSearchParams) => Promise<ApiResponse | undefined>;

/** A request outside the server's own paths, as a {@link PageHandler} gets it: a POST's body read whole. */
export interface PageRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  /** The body of a POST as UTF-8; empty for other methods. */
  body: string;
}

/** An answer of a {@link PageHandler}. */
export interface PageResponse {
  status: number;
  headers: http.OutgoingHttpHeaders;
  body: string;
}

/** Answers requests outside `/healthz`, `/readyz`, `/metrics` and `/api/` (any method), or undefined for a path it does not know (404). */
export type PageHandler = (request: PageRequest) => Promise<PageResponse | undefined>;

/** What the server answers besides its probes and metrics. */
export interface HttpRoutes {
  api?: ApiHandler;
  pages?: PageHandler;
}

/** The largest POST body a page handler gets (a form of a few fields); a larger one is answered 413. */
export const MAX_BODY_BYTES = 16 * 1024;

type Respond = (status: number, body: string, type?: string) => void;

/**
 * What `/metrics` serves: a prom-client Registry, or anything with its `metrics` and
 * `contentType`; with `chunks`, the text in pieces that are written one per turn of the event
 * loop (a big exposition written whole holds the loop while it is encoded).
 */
export interface MetricsSource {
  contentType: string;
  metrics(): Promise<string>;
  chunks?(): Promise<readonly string[]>;
}

/**
 * `/healthz` (the process answers), `/readyz` (its dependencies answer: 503
 * with the reasons otherwise), `/metrics` (Prometheus text format), and with
 * `routes`, read-only JSON under `/api/` (GET only) and pages at any other path.
 */
export function startHttpServer(
  port: number,
  registry: MetricsSource,
  ready: ReadinessCheck,
  routes: HttpRoutes = {},
): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    const respond: Respond = (status, body, type = 'text/plain; charset=utf-8') =>
      response.writeHead(status, { 'content-type': type }).end(body);
    const url = new URL(request.url ?? '/', 'http://localhost');
    const path = url.pathname;
    if (routes.api && path.startsWith('/api/'))
      return answerApi(routes.api, request.method ?? 'GET', path, url.searchParams, respond);
    if (path === '/healthz') respond(200, 'ok\n');
    else if (path === '/readyz')
      ready().then(
        (reasons) => (reasons.length === 0 ? respond(200, 'ready\n') : respond(503, `${reasons.join('\n')}\n`)),
        (error: unknown) => respond(503, `${String(error)}\n`),
      );
    else if (path === '/metrics')
      (registry.chunks ? registry.chunks() : registry.metrics().then((text) => [text])).then(
        (chunks) => void writeChunks(response.writeHead(200, { 'content-type': registry.contentType }), chunks),
        (error: unknown) => respond(500, `${String(error)}\n`),
      );
    else if (routes.pages) answerPage(routes.pages, request, url, response, respond);
    else respond(404, 'not found\n');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => resolve(server));
  });
}

/** Writes the chunks one per turn of the event loop, then ends the response. */
async function writeChunks(response: http.ServerResponse, chunks: readonly string[]): Promise<void> {
  for (const chunk of chunks) {
    if (response.destroyed) return;
    response.write(chunk);
    await new Promise((resolve) => setImmediate(resolve));
  }
  response.end();
}

function answerApi(api: ApiHandler, method: string, path: string, query: URLSearchParams, respond: Respond): void {
  const json = (status: number, body: unknown) =>
    respond(status, `${JSON.stringify(body)}\n`, 'application/json; charset=utf-8');
  if (method !== 'GET') return json(405, { error: 'the API is read-only: GET only' });
  api(path, query).then(
    (answer) => (answer ? json(answer.status, answer.body) : json(404, { error: `no such resource: ${path}` })),
    (error: unknown) => json(503, { error: error instanceof Error ? error.message : String(error) }),
  );
}

function answerPage(
  pages: PageHandler,
  request: http.IncomingMessage,
  url: URL,
  response: http.ServerResponse,
  respond: Respond,
): void {
  const answer = async (): Promise<void> => {
    const body = await readBody(request);
    if (body === undefined) {
      // The rest of the body is not read: the connection closes after this answer.
      response
        .writeHead(413, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' })
        .end(`request body over ${MAX_BODY_BYTES} bytes\n`);
      return;
    }
    const page = await pages({
      method: request.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: request.headers,
      body,
    });
    if (page) response.writeHead(page.status, page.headers).end(page.body);
    else respond(404, 'not found\n');
  };
  answer().catch((error: unknown) => respond(500, `${error instanceof Error ? error.message : String(error)}\n`));
}

/** A POST's body, or undefined past MAX_BODY_BYTES; empty for other methods. */
function readBody(request: http.IncomingMessage): Promise<string | undefined> {
  if (request.method !== 'POST') return Promise.resolve('');
  if (Number(request.headers['content-length'] ?? 0) > MAX_BODY_BYTES) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else {
        request.off('data', onData).resume();
        resolve(undefined);
      }
    };
    request.on('data', onData);
    request.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.once('error', reject);
  });
}

/** The port a started server listens on (the one the OS picked for port 0). */
export function boundPort(server: http.Server): number {
  return (server.address() as AddressInfo).port;
}
