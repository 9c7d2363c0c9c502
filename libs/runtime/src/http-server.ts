import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/** A readiness check: resolves to the reasons the process is not ready (empty when ready). */
export type ReadinessCheck = () => Promise<string[]>;

/**
 * `/healthz` (the process answers), `/readyz` (its dependencies answer: 503
 * with the reasons otherwise) and `/metrics` (Prometheus text format).
 */
export function startHttpServer(port: number, registry: Registry, ready: ReadinessCheck): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    const respond = (status: number, body: string, type = 'text/plain; charset=utf-8') => response.writeHead(status, { 'content-type': type }).end(body);
    const path = request.url?.split('?')[0];
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

/** The port a started server listens on (the one the OS picked for port 0). */
export function boundPort(server: http.Server): number {
  return (server.address() as AddressInfo).port;
}
