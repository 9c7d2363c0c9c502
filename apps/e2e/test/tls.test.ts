import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  freePort,
  makeTestCertificates,
  ManagedProcess,
  startAppProcess,
  waitUntil,
  type AppProcessRole,
  type TestCertificates,
} from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from '../src/index.ts';

const SCHEDULER_MAIN = fileURLToPath(new URL('../../scheduler/src/main.ts', import.meta.url));
const WORKER_MAIN = fileURLToPath(new URL('../../worker/src/main.ts', import.meta.url));
const CLI = fileURLToPath(new URL('../../scheduler/src/cli.ts', import.meta.url));
const TEAM = `team: tls
schedules:
  - name: every-second
    cron: "* * * * * *"
    overlap: allow
    leaseTtl: 2s
    handler: { kind: command, argv: ["true"] }
`;

/**
 * The scheduler, the worker and the CLI against TLS-only redis-servers (no plain port) that
 * require a client certificate, all signed by a CA made at test time: `rediss://` URLs and the
 * TICKWARDEN_REDIS_TLS_* files, for the lock nodes and the queue alike.
 */
describe('TLS end to end: rediss:// with a private CA and a client certificate', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-tls-'));
  const processes: ManagedProcess[] = [];
  let tls: TestCertificates;
  let ports: number[] = [];
  const configDir = path.join(dir, 'config');
  const urls = (): { locks: string; queue: string } => ({
    locks: ports
      .slice(1)
      .map((port) => `rediss://127.0.0.1:${port}`)
      .join(','),
    queue: `rediss://127.0.0.1:${ports[0]}`,
  });
  const tlsEnv = (): Record<string, string> => ({
    TICKWARDEN_REDIS_TLS_CA: tls.ca,
    TICKWARDEN_REDIS_TLS_CERT: tls.client.cert,
    TICKWARDEN_REDIS_TLS_KEY: tls.client.key,
  });
  const appEnv = (extra: Record<string, string> = tlsEnv()): Record<string, string> => ({
    TICKWARDEN_CONFIG: configDir,
    TICKWARDEN_LOCK_NODES: urls().locks,
    TICKWARDEN_QUEUE_REDIS: urls().queue,
    LOG_LEVEL: 'info',
    ...extra,
  });
  const cli = async (env: Record<string, string>, ...args: string[]): Promise<{ code: number; output: string }> =>
    promisify(execFile)(process.execPath, ['--conditions=@tickwarden/source', CLI, ...args], {
      env: { PATH: process.env['PATH'] ?? '', ...env },
      timeout: 30_000,
    }).then(
      (done) => ({ code: 0, output: `${done.stdout}${done.stderr}` }),
      (error: { code?: number; stdout?: string; stderr?: string }) => ({
        code: error.code ?? -1,
        output: `${error.stdout ?? ''}${error.stderr ?? ''}`,
      }),
    );

  beforeAll(async () => {
    tls = makeTestCertificates(dir);
    mkdirSync(configDir);
    writeFileSync(path.join(configDir, 'tls.yaml'), TEAM);
    ports = await Promise.all([0, 1, 2, 3].map(() => freePort()));
    for (const [i, port] of ports.entries()) {
      const data = path.join(dir, `redis-${i}`);
      mkdirSync(data);
      const args = [
        '--port',
        '0',
        '--tls-port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        data,
        '--save',
        '',
        '--appendonly',
        'no',
      ];
      args.push(
        '--tls-cert-file',
        tls.server.cert,
        '--tls-key-file',
        tls.server.key,
        '--tls-ca-cert-file',
        tls.ca,
        '--tls-auth-clients',
        'yes',
      );
      processes.push(ManagedProcess.start({ name: `redis-tls-${i}`, command: 'redis-server', args }));
    }
    const ping = (port: number): boolean =>
      spawnSync(
        'redis-cli',
        ['--tls', '--cacert', tls.ca, '--cert', tls.client.cert, '--key', tls.client.key, '-p', String(port), 'PING'],
        { encoding: 'utf8' },
      ).stdout.trim() === 'PONG';
    for (const port of ports) await waitUntil(() => ping(port), `TLS redis-server on ${port}`);
  });
  afterAll(async () => {
    await Promise.all(processes.map((child) => child.stop('SIGKILL')));
    rmSync(dir, { recursive: true, force: true });
  });

  it('the scheduler and the worker run ticks over TLS only; the CLI triggers and reads status', async () => {
    const start = async (role: AppProcessRole, main: string, replicaId?: string): Promise<ManagedProcess> => {
      const app = startAppProcess({
        role,
        name: role,
        main,
        configDir,
        lockNodes: urls().locks,
        queueRedis: urls().queue,
        httpPort: await freePort(),
        replicaId,
        logLevel: 'info',
        env: tlsEnv(),
      });
      processes.push(app);
      return app;
    };
    await start('scheduler', SCHEDULER_MAIN, 'tls-scheduler');
    const worker = await start('worker', WORKER_MAIN);
    await waitUntil(
      () => worker.records.filter((record) => record['outcome'] === 'succeeded').length >= 3,
      'three runs over TLS',
      { timeoutMs: 20_000 },
    );
    expect(await cli(appEnv(), 'trigger', 'tls/every-second')).toMatchObject({ code: 0 });
    const status = await cli(appEnv(), 'status', 'tls/every-second');
    expect(status).toMatchObject({ code: 0 });
    expect(status.output).toContain('enqueued');
  });

  it('without the client certificate, or without the CA, a connection is refused', async () => {
    const noCert = await cli(appEnv({ TICKWARDEN_REDIS_TLS_CA: tls.ca }), 'status', 'tls/every-second');
    expect(noCert.code).not.toBe(0);
    const noCa = await cli(
      appEnv({ TICKWARDEN_REDIS_TLS_CERT: tls.client.cert, TICKWARDEN_REDIS_TLS_KEY: tls.client.key }),
      'status',
      'tls/every-second',
    );
    expect(noCa.code).not.toBe(0);
    expect(noCa.output).toMatch(/self[- ]signed|unable to (get|verify)/i);
  });

  it('a certificate without its key, or a file that cannot be read: exit 2 naming the variable', async () => {
    const halfPair = await cli(appEnv({ TICKWARDEN_REDIS_TLS_CERT: tls.client.cert }), 'status');
    expect(halfPair.code).toBe(2);
    expect(halfPair.output).toContain('TICKWARDEN_REDIS_TLS_KEY: is required when TICKWARDEN_REDIS_TLS_CERT is set');
    const missing = path.join(dir, 'missing.crt');
    const scheduler = spawnSync(process.execPath, ['--conditions=@tickwarden/source', SCHEDULER_MAIN], {
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '', ...appEnv({ TICKWARDEN_REDIS_TLS_CA: missing }) },
      timeout: 30_000,
    });
    expect(scheduler.status).toBe(2);
    expect(scheduler.stderr).toContain(`TICKWARDEN_REDIS_TLS_CA: cannot read ${missing} (ENOENT)`);
  });
});

/** What `npm start -- --tls` runs: the Cluster's servers with certificates, every process through its proxies over rediss://. */
describe('the local stack with --tls (Cluster with certificates)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-tls-cluster-'));
  let cluster: Cluster | undefined;
  afterAll(async () => {
    await cluster?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the scheduler and the worker run ticks over rediss:// with a client certificate; the CLI reads the history', async () => {
    const configDir = path.join(dir, 'config');
    mkdirSync(configDir);
    writeFileSync(path.join(configDir, 'tls.yaml'), TEAM);
    cluster = await Cluster.start({
      configDir,
      lockNodes: 3,
      aof: false,
      logLevel: 'info',
      tls: makeTestCertificates(dir),
    });
    expect([cluster.queueUrl, ...cluster.locks.urls].every((url) => url.startsWith('rediss://'))).toBe(true);
    const [, worker] = await Promise.all([
      cluster.startApp('scheduler', 'scheduler-1'),
      cluster.startApp('worker', 'worker-1'),
    ]);
    expect(worker.link.urls.every((url) => url.startsWith('rediss://'))).toBe(true);
    await waitUntil(
      () => worker.process.records.filter((record) => record['outcome'] === 'succeeded').length >= 3,
      'three runs over TLS',
      { timeoutMs: 20_000 },
    );
    expect((await cluster.history(10)).some((record) => record['outcome'] === 'enqueued')).toBe(true);
  });
});
