import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/** A readiness check: resolves to the reasons the process is not ready (empty when ready). */
export type ReadinessCheck = () => Promise<string[]>;

/** An answer of an {@link ApiHandler}: a status and a JSON body. */
export interface ApiResponse {
  status: number;
  body: unknown;
}

/** Answers GET requests under `/api/` (path and query), or undefined for a path it does not know (404). */
export type ApiHandler = (path: string, query: URLSearchParams) => Promise<ApiResponse | undefined>;

/**
 * `/healthz` (the process answers), `/readyz` (its dependencies answer: 503
 * with the reasons otherwise), `/metrics` (Prometheus text format), and with an
 * `api`, read-only JSON under `/api/` (GET only).
 */
export function startHttpServer(port: number, registry: Registry, ready: ReadinessCheck, api?: ApiHandler): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    const respond = (status: number, body: string, type = 'text/plain; charset=utf-8') => response.writeHead(status, { 'content-type': type }).end(body);
    const url = new URL(request.url ?? '/', 'http://localhost');
    const path = url.pathname;
    if (api && path.startsWith('/api/')) return answerApi(api, request.method ?? 'GET', path, url.searchParams, respond);
    if (path === '/healthz') respond(200, 'ok\n');
    else if (path === '/readyz')
      ready().then(
        (reasons) => (reasons.length === 0 ? respond(200, 'ready\n') : respond(503, `${reasons.join('\n')}\n`)),
        (error: unknown) => respond(503, `${String(error)}\n`),
      );
    else if (path === '/metrics')
      registry.metrics().then(
        (text) => respond(200, text, registry.contentType),
        (error: unknown) => respond(500, `${String(error)}\n`),
      );
    else respond(404, 'not found\n');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, () => resolve(server));
  });
}

function answerApi(api: ApiHandler, method: string, path: string, query: URLSearchParams, respond: (status: number, body: string, type?: string) => void): void {
  const json = (status: number, body: unknown) => respond(status, `${JSON.stringify(body)}\n`, 'application/json; charset=utf-8');
  if (method !== 'GET') return json(405, { error: 'the API is read-only: GET only' });
  api(path, query).then(
    (answer) => (answer ? json(answer.status, answer.body) : json(404, { error: `no such resource: ${path}` })),
    (error: unknown) => json(503, { error: error instanceof Error ? error.message : String(error) }),
  );
}

/** The port a started server listens on (the one the OS picked for port 0). */
export function boundPort(server: http.Server): number {
  return (server.address() as AddressInfo).port;
}
