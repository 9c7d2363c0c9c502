import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { sleep } from '@tickwarden/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { Cluster } from '../src/index.ts';

const CLI = fileURLToPath(new URL('../../scheduler/src/cli.ts', import.meta.url));

// Passwords with the characters that break naive URL handling: each must appear nowhere.
const LOCK_PASSWORD = 'lock/p@ss:w0rd#1';
const QUEUE_PASSWORD = 'queue%p@ss/w0rd?2';

const TEAM = `team: sec
schedules:
  - name: env-dump
    cron: "* * * * * *"
    overlap: allow
    leaseTtl: 2s
    handler: { kind: command, argv: [sh, -c, 'env; echo done'] }
  - name: module-env
    cron: "* * * * * *"
    overlap: allow
    leaseTtl: 2s
    handler: { kind: module, path: ./jobs/env.mjs, export: run }
  - name: http-refused
    cron: "* * * * * *"
    overlap: allow
    leaseTtl: 2s
    handler: { kind: http, url: "http://deploy:hook-secret@127.0.0.1:1/hook", timeout: 1s }
  - name: failing
    cron: "* * * * * *"
    overlap: allow
    leaseTtl: 2s
    handler: { kind: command, argv: [sh, -c, 'echo failing >&2; exit 3'] }
`;

describe('credentials never leave the platform: logs, errors, metrics, probes, status, job processes', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-secrets-'));
  let cluster: Cluster | undefined;
  afterAll(async () => {
    await cluster?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('scheduler, worker and CLI with passwords in every credential slot, through ticks, failures, a rejected reload and a lock node down: no password anywhere', async () => {
    const configDir = path.join(dir, 'config');
    mkdirSync(path.join(configDir, 'jobs'), { recursive: true });
    writeFileSync(
      path.join(configDir, 'jobs', 'env.mjs'),
      'export async function run(ctx) { ctx.logger.info("module env", { env: process.env }); }\n',
    );
    writeFileSync(path.join(configDir, 'sec.yaml'), TEAM);
    // As the prod Deployment does: the passwords in variables of their own too, beside the URLs built from them.
    const env = { LOCK_REDIS_PASSWORD: LOCK_PASSWORD, QUEUE_REDIS_PASSWORD: QUEUE_PASSWORD };
    cluster = await Cluster.start({
      configDir,
      lockNodes: 3,
      aof: false,
      logLevel: 'debug',
      env,
      passwords: { locks: LOCK_PASSWORD, queue: QUEUE_PASSWORD },
    });
    const apps = await Promise.all([
      cluster.startApp('scheduler', 'scheduler-1'),
      cluster.startApp('worker', 'worker-1'),
    ]);
    await sleep(4000);
    writeFileSync(
      path.join(configDir, 'broken.yaml'),
      'team: broken\nschedules:\n  - name: x\n    cron: "61 * * * *"\n    handler: { kind: nope }\n',
    );
    await sleep(2500);
    await cluster.locks.node(0).kill();
    await sleep(3000);
    rmSync(path.join(configDir, 'broken.yaml')); // the CLI refuses a config directory with errors
    const probes = await Promise.all(
      apps.flatMap((app) =>
        ['metrics', 'readyz', 'healthz'].map(async (route) =>
          (await fetch(`http://127.0.0.1:${app.httpPort}/${route}`)).text(),
        ),
      ),
    );
    const cliEnv = {
      ...process.env,
      TICKWARDEN_CONFIG: configDir,
      TICKWARDEN_QUEUE_REDIS: cluster.queueUrl,
      TICKWARDEN_LOCK_NODES: cluster.locks.urls.join(','),
    };
    const cli = async (...args: string[]): Promise<string> => {
      const result = await promisify(execFile)(process.execPath, ['--conditions=@tickwarden/source', CLI, ...args], {
        env: cliEnv,
        timeout: 30_000,
      }).catch((error: { stdout?: string; stderr?: string }) => error);
      return `${result.stdout ?? ''}${result.stderr ?? ''}`;
    };
    const status = await cli('status');
    const cliOutputs = [
      status,
      await cli('status', '--json', '-n', '50'),
      await cli('pause', 'sec/unknown'),
      await cli('trigger', 'sec/failing'),
    ];
    // What the chaos harness reads the history with.
    const history = await cluster.history(50);
    expect(history.some((record) => record['schedule'] === 'sec/env-dump' && record['outcome'] === 'enqueued')).toBe(
      true,
    );
    cliOutputs.push(JSON.stringify(history));

    // The run went as the test means: ticks ran and failed, the reload was rejected, the lock node loss was seen.
    const lines = apps.flatMap((app) => app.process.lines);
    const text = lines.join('\n');
    expect(text).toContain('"outcome":"succeeded"');
    expect(text).toContain('"outcome":"failed"');
    expect(text).toContain('config reload rejected');
    expect(text).toContain('"stream":"stdout","msg":"done"');
    expect(text).toContain('module env');
    expect(status).toContain('sec/env-dump');
    // Jobs saw their run variables (env printed by the command), never the worker's.
    expect(text).toContain('TICKWARDEN_FENCE=');
    expect(text).not.toContain('TICKWARDEN_QUEUE_REDIS=');
    expect(text).not.toContain('LOCK_REDIS_PASSWORD');

    const everything = [...lines, ...probes, ...cliOutputs].join('\n');
    for (const secret of [LOCK_PASSWORD, QUEUE_PASSWORD, 'hook-secret']) {
      for (const form of new Set([secret, encodeURIComponent(secret)]))
        expect(everything.includes(form), `"${form}" found`).toBe(false);
    }
  });
});
