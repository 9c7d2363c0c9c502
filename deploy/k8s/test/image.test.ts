import { chmodSync, copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, reaper, startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { dockerEngineAnswers, mustRun, runCommand } from './support/commands.ts';
import { BASE_DIR, DOCKERFILE, REPO_ROOT } from './support/paths.ts';

const REQUIRED = process.env['TICKWARDEN_REQUIRE_DOCKER'] === '1';
const DOCKER = await dockerEngineAnswers();
if (!DOCKER && !REQUIRED) {
  const lines = [
    'NO DOCKER ENGINE: the image check (build deploy/docker/Dockerfile, run the scheduler',
    'read-only against local Redis, docker stop) is SKIPPED. Start dockerd to run it; CI sets',
    'TICKWARDEN_REQUIRE_DOCKER=1 once its engine is up, which turns this skip into a failure.',
  ];
  const rule = '!'.repeat(96);
  console.warn(['', rule, ...lines.map((line) => `!!! ${line.padEnd(88)} !!!`), rule, ''].join('\n'));
}

const IMAGE_USER = '10001:10001';
/** The launcher container's user (deploy/k8s/base/worker.yaml): not the worker's, so its programs cannot read the worker's /proc. */
const LAUNCHER_USER = '10002:10002';
/** One team with one command schedule (never due on its own: the test triggers it). */
const COMMAND_TEAM = [
  'team: image-check',
  'schedules:',
  '  - name: command',
  '    cron: "0 0 1 1 *"',
  '    leaseTtl: 10s',
  '    handler:',
  '      kind: command',
  '      argv: [node, -e, "console.log(\'command ran as uid \' + process.getuid())"]',
  '',
].join('\n');
const CONFIG_MOUNT = '/etc/tickwarden/schedules';

describe('the image build context (no Docker needed)', () => {
  const allowed = readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('!'))
    .map((line) => line.slice(1));
  const workspaces = ['apps', 'libs', 'deploy'].flatMap((parent) =>
    readdirSync(path.join(REPO_ROOT, parent), { withFileTypes: true })
      .filter(
        (entry) =>
          entry.isDirectory() && readdirSync(path.join(REPO_ROOT, parent, entry.name)).includes('package.json'),
      )
      .map((entry) => {
        const dir = `${parent}/${entry.name}`;
        const manifest = JSON.parse(readFileSync(path.join(REPO_ROOT, dir, 'package.json'), 'utf8')) as {
          name: string;
          dependencies?: Record<string, string>;
        };
        return { dir, name: manifest.name, dependencies: Object.keys(manifest.dependencies ?? {}) };
      }),
  );

  it("lets in every workspace's package.json (npm ci checks the lockfile against all of them)", () => {
    expect(workspaces.length).toBeGreaterThan(5);
    for (const { dir } of workspaces) expect(allowed).toContain(`${dir}/package.json`);
  });

  it('lets in the sources of the apps and of every workspace package they depend on, at run time', () => {
    const byName = new Map(workspaces.map((workspace) => [workspace.name, workspace]));
    const needed = new Set<string>();
    const visit = (name: string): void => {
      const workspace = byName.get(name);
      if (!workspace || needed.has(workspace.dir)) return;
      needed.add(workspace.dir);
      workspace.dependencies.forEach(visit);
    };
    ['@tickwarden/scheduler', '@tickwarden/worker'].forEach(visit);
    expect([...needed].sort()).toEqual([
      'apps/scheduler',
      'apps/worker',
      'libs/config',
      'libs/contracts',
      'libs/redlock',
      'libs/runtime',
    ]);
    for (const dir of needed) expect(allowed).toContain(`${dir}/src`);
  });

  it('lets in the TypeScript config and sources of every project the build stage compiles (tsc --build follows references)', () => {
    const reached = new Set<string>();
    const visit = (config: string): void => {
      if (reached.has(config)) return;
      reached.add(config);
      const { references = [] } = JSON.parse(readFileSync(path.join(REPO_ROOT, config), 'utf8')) as {
        references?: { path: string }[];
      };
      for (const reference of references)
        visit(path.posix.normalize(path.posix.join(path.posix.dirname(config), reference.path)));
    };
    ['apps/scheduler/tsconfig.lib.json', 'apps/worker/tsconfig.lib.json'].forEach(visit);
    expect(reached.size).toBeGreaterThan(5);
    expect(allowed).toContain('tsconfig.base.json');
    for (const config of reached) {
      expect(allowed).toContain(config);
      expect(allowed).toContain(`${path.posix.dirname(config)}/src`);
    }
  });

  it('defaults to the official Node 24 slim image, runs the compiled apps, and runs as a numeric non-root user', () => {
    const dockerfile = readFileSync(DOCKERFILE, 'utf8');
    expect(dockerfile).toMatch(/^ARG NODE_IMAGE=node:24-slim$/m);
    // No source condition: workspace imports must resolve to the libs' dist/, not to their TypeScript.
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node"\]$/m);
    expect(dockerfile).toMatch(new RegExp(`^USER ${IMAGE_USER}$`, 'm'));
  });
});

describe('the image, built and run (Docker)', () => {
  const tag = `tickwarden-deploy-check:${process.pid}`;
  const name = `tickwarden-deploy-check-${process.pid}`;
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
  });

  it.skipIf(!DOCKER && !REQUIRED)(
    'builds on a Node 24 base; the compiled scheduler and worker run read-only as 10001, get ready, log JSON, run a triggered command job (through the launcher, as 10002), and drain on docker stop',
    async () => {
      if (!DOCKER) throw new Error('TICKWARDEN_REQUIRE_DOCKER=1, but no Docker engine answers `docker info`');
      await buildImage(tag, cleanups);
      const [locks, queue] = await startRedis(cleanups);
      const configDir = copySchedules(cleanups);
      // A command schedule besides the base's (all http): the worker runs it below, through the
      // gate (/bin/sh, which the image must have) and the command guard, as user 10001.
      writeFileSync(path.join(configDir, 'image-check.yaml'), COMMAND_TEAM, { mode: 0o644 });
      const port = await freePort();
      const env = {
        TICKWARDEN_CONFIG: CONFIG_MOUNT,
        TICKWARDEN_LOCK_NODES: locks.urls.join(','),
        TICKWARDEN_QUEUE_REDIS: queue.urls[0] ?? '',
        TICKWARDEN_HTTP_PORT: String(port),
        TICKWARDEN_REPLICA_ID: 'image-check',
      };
      const run = [
        '--network',
        'host',
        '--read-only',
        '--tmpfs',
        '/tmp',
        '--user',
        IMAGE_USER,
        '--cap-drop',
        'ALL',
        '--security-opt',
        'no-new-privileges',
        '-v',
        `${configDir}:${CONFIG_MOUNT}:ro`,
      ];
      const envArgs = Object.entries(env).flatMap(([key, value]) => ['-e', `${key}=${value}`]);

      const id = (await mustRun('docker', ['run', '-d', '--name', name, ...run, ...envArgs, tag])).trim();
      reaper.watchContainer(id);
      cleanups.push(() => mustRun('docker', ['rm', '-f', name]));
      await waitReady(name, port);
      expect(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).toContain(
        '# TYPE tickwarden_ticks_total counter',
      );

      // The CLI of the README's `kubectl exec` commands, in the same image and sandbox.
      const cli = (...args: string[]): Promise<string> =>
        mustRun('docker', ['run', '--rm', ...run, ...envArgs, '--entrypoint', 'tickwarden', tag, ...args]);
      expect(await cli('validate', CONFIG_MOUNT)).toContain('ok: 5 schedule(s) in 3 file(s)');
      expect(await cli('status', 'payments/nightly-settlement')).toMatch(/payments\/nightly-settlement .*active/);

      await mustRun('docker', ['stop', '-t', '30', name], { timeoutMs: 60_000 });
      const state = JSON.parse(await mustRun('docker', ['inspect', '--format', '{{json .State}}', name])) as {
        ExitCode: number;
        OOMKilled: boolean;
      };
      const { stdout, stderr } = await runCommand('docker', ['logs', name]);
      const records = jsonLines(stdout, stderr);
      const messages = records.map((record) => record['msg']);
      expect(records.find((record) => record['msg'] === 'scheduler started')).toMatchObject({
        replica: 'image-check',
        schedules: 5,
        quorum: 3,
      });
      // SIGTERM reached node (PID 1): it drained and exited 0, well before docker's SIGKILL at 30 s (exit 137).
      expect(messages).toEqual(
        expect.arrayContaining(['stopping: no new ticks; finishing in-flight enqueues', 'stopped']),
      );
      expect(state).toMatchObject({ ExitCode: 0, OOMKilled: false });

      // The worker, as its Deployment runs it: compiled, its programs started by the launcher
      // container (another user, no credentials; its command guard a child process started from
      // the guard's own compiled file) through a socket in a shared directory.
      const socketDir = mkdtempSync(path.join(tmpdir(), 'tickwarden-image-launcher-'));
      chmodSync(socketDir, 0o777);
      cleanups.push(async () => rmSync(socketDir, { recursive: true, force: true }));
      const socket = [
        '-v',
        `${socketDir}:/run/tickwarden-launcher`,
        '-e',
        'TICKWARDEN_LAUNCHER_SOCKET=/run/tickwarden-launcher/launcher.sock',
      ];
      const launcherName = `${name}-launcher`;
      const launcherRun = run.map((arg) => (arg === IMAGE_USER ? LAUNCHER_USER : arg));
      const launcherId = (
        await mustRun('docker', [
          'run',
          '-d',
          '--name',
          launcherName,
          ...launcherRun,
          ...socket,
          tag,
          'apps/worker/dist/launcher-main.js',
        ])
      ).trim();
      reaper.watchContainer(launcherId);
      cleanups.push(() => mustRun('docker', ['rm', '-f', launcherName]));
      await waitUntil(
        async () =>
          (await runCommand('docker', ['exec', launcherName, 'node', 'apps/worker/dist/launcher-main.js', '--check']))
            .code === 0,
        'the launcher to answer its --check probe',
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      const workerName = `${name}-worker`;
      const workerPort = await freePort();
      const workerEnv = envArgs.map((arg) =>
        arg === `TICKWARDEN_HTTP_PORT=${port}` ? `TICKWARDEN_HTTP_PORT=${workerPort}` : arg,
      );
      const workerId = (
        await mustRun('docker', [
          'run',
          '-d',
          '--name',
          workerName,
          ...run,
          ...socket,
          ...workerEnv,
          tag,
          'apps/worker/dist/main.js',
        ])
      ).trim();
      reaper.watchContainer(workerId);
      cleanups.push(() => mustRun('docker', ['rm', '-f', workerName]));
      await waitReady(workerName, workerPort);
      expect(await cli('trigger', 'image-check/command')).toMatch(/^triggered image-check\/command: job /m);
      const succeeded = async (): Promise<boolean> => {
        const { stdout } = await runCommand('docker', ['logs', workerName]);
        return stdout.includes('"msg":"run succeeded"');
      };
      await waitUntil(succeeded, 'the worker in the image to run the triggered command', {
        timeoutMs: 30_000,
        intervalMs: 250,
      });
      await mustRun('docker', ['stop', '-t', '30', workerName], { timeoutMs: 60_000 });
      const workerLogs = await runCommand('docker', ['logs', workerName]);
      const workerRecords = jsonLines(workerLogs.stdout, workerLogs.stderr);
      expect(workerRecords.find((record) => record['stream'] === 'stdout')).toMatchObject({
        schedule: 'image-check/command',
        msg: 'command ran as uid 10002',
      });
      expect(workerRecords.find((record) => record['msg'] === 'run succeeded')).toMatchObject({
        schedule: 'image-check/command',
        exitCode: 0,
      });
      expect(JSON.parse(await mustRun('docker', ['inspect', '--format', '{{json .State}}', workerName]))).toMatchObject(
        { ExitCode: 0, OOMKilled: false },
      );
      await mustRun('docker', ['stop', '-t', '30', launcherName], { timeoutMs: 60_000 });
      const launcherLogs = await runCommand('docker', ['logs', launcherName]);
      expect(jsonLines(launcherLogs.stdout, launcherLogs.stderr).map((record) => record['msg'])).toEqual(
        expect.arrayContaining(['command guard started', 'launcher listening', 'stopped']),
      );
      expect(
        JSON.parse(await mustRun('docker', ['inspect', '--format', '{{json .State}}', launcherName])),
      ).toMatchObject({ ExitCode: 0, OOMKilled: false });
    },
    300_000,
  );
});

/** Builds the image on the local Node base (CI's, or one made now), both stages tagged so that both are removed. */
async function buildImage(tag: string, cleanups: (() => Promise<unknown>)[]): Promise<void> {
  const base = process.env['TICKWARDEN_NODE_BASE_IMAGE'] || (await buildBaseImage());
  const build = [
    'build',
    '--network',
    'host',
    '--force-rm',
    '--quiet',
    '--build-arg',
    `NODE_IMAGE=${base}`,
    '--file',
    DOCKERFILE,
  ];
  cleanups.push(() => runCommand('docker', ['rmi', '--force', tag, `${tag}-deps`]));
  await mustRun('docker', [...build, '--target', 'deps', '--tag', `${tag}-deps`, REPO_ROOT], { timeoutMs: 240_000 });
  await mustRun('docker', [...build, '--tag', tag, REPO_ROOT], { timeoutMs: 240_000 });
}

/** scripts/build-node-base-image.sh with this Node 24 first on PATH (it packs the `node` on PATH). */
async function buildBaseImage(): Promise<string> {
  const env = {
    ...process.env,
    PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env['PATH'] ?? ''}`,
  };
  return (await mustRun('bash', [path.join(REPO_ROOT, 'scripts/build-node-base-image.sh')], { env })).trim();
}

/** Five lock nodes and a queue Redis on loopback, with passwords, as in the cluster. */
async function startRedis(cleanups: (() => Promise<unknown>)[]): Promise<[RedisNodes, RedisNodes]> {
  const nodes = await Promise.all([
    startRedisNodes({ count: 5, aof: false, password: 'lock-pw' }),
    startRedisNodes({ count: 1, aof: false, password: 'queue-pw' }),
  ]);
  cleanups.push(() => Promise.all(nodes.map((set) => set.close())));
  return nodes;
}

/** The team files of the base, readable by the image's user, as the ConfigMap volume would be. */
function copySchedules(cleanups: (() => Promise<unknown>)[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-image-schedules-'));
  reaper.watchDir(dir);
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  for (const file of readdirSync(path.join(BASE_DIR, 'schedules'))) {
    copyFileSync(path.join(BASE_DIR, 'schedules', file), path.join(dir, file));
    chmodSync(path.join(dir, file), 0o644);
  }
  chmodSync(dir, 0o755);
  return dir;
}

/** Waits for /readyz 200; fails at once, with the logs, if the container stops. */
async function waitReady(name: string, port: number): Promise<void> {
  await waitUntil(
    async () => {
      const running = (await runCommand('docker', ['inspect', '--format', '{{.State.Running}}', name])).stdout.trim();
      if (running !== 'true') {
        const logs = await runCommand('docker', ['logs', name]);
        throw new Error(`the container ${name} stopped before it was ready:\n${logs.stdout}\n${logs.stderr}`);
      }
      return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200;
    },
    `the container ${name} to answer /readyz with 200`,
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

/** Every stdout line as a pino record; a line that is not one fails the test, naming it. */
function jsonLines(stdout: string, stderr: string): Record<string, unknown>[] {
  const lines = stdout.split('\n').filter((line) => line.trim() !== '');
  expect(lines.length, `no stdout; stderr: ${stderr}`).toBeGreaterThan(2);
  return lines.map((line) => {
    const record = JSON.parse(line) as Record<string, unknown>;
    expect(record, line).toMatchObject({
      level: expect.any(Number),
      time: expect.any(Number),
      msg: expect.any(String),
    });
    return record;
  });
}
