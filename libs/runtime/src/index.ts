export { ConfigWatcher } from './config-watcher.ts';
export { startHttpServer, type ReadinessCheck } from './http-server.ts';
