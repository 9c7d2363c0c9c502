import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  freePort,
  ProcessRedisNode,
  sleep,
  startAppProcess,
  waitUntil,
  type AppProcessRole,
  type ManagedProcess,
} from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './support/paths.ts';

const RENDER = path.join(REPO_ROOT, 'deploy/k8s/acl/render.sh');
const MAKE_SECRETS = path.join(REPO_ROOT, 'deploy/k8s/acl/make-secrets.sh');
const SCHEDULER_MAIN = path.join(REPO_ROOT, 'apps/scheduler/src/main.ts');
const WORKER_MAIN = path.join(REPO_ROOT, 'apps/worker/src/main.ts');
const CLI = path.join(REPO_ROOT, 'apps/scheduler/src/cli.ts');
const LOCK_ROLES = ['scheduler', 'worker', 'control', 'probe'] as const;
const QUEUE_ROLES = [...LOCK_ROLES, 'status'] as const;
/** The harness's own user, appended to the rendered files here only: it reads each server's ACL LOG. */
const HARNESS = { user: 'harness', password: randomBytes(16).toString('hex') };
const TEAM = `team: acl
schedules:
  - name: every-second
    cron: "* * * * * *"
    overlap: allow
    leaseTtl: 2s
    handler: { kind: command, argv: ["true"] }
  - name: cancelling
    cron: "*/2 * * * * *"
    overlap: cancel-previous
    leaseTtl: 2s
    handler: { kind: command, argv: ["true"] }
`;

type Role = (typeof QUEUE_ROLES)[number];

/**
 * The shipped ACL templates, made into passwords and ACL files by make-secrets.sh as the README's
 * "Apply" does, and loaded by real redis-servers (3 lock nodes, each with its own passwords, and
 * the queue Redis): the scheduler, the worker and the CLI
 * do their jobs as their own users without a single denial in any server's ACL LOG, and each user
 * is refused what it must not do.
 */
describe('Redis ACL users (deploy/k8s/acl): each role does its job and nothing more', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-acl-'));
  const secrets = path.join(dir, 'secrets');
  const made = spawnSync('bash', [MAKE_SECRETS, secrets, '3'], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`make-secrets.sh: ${made.stderr}`);
  const secret = (name: string): string => readFileSync(path.join(secrets, name), 'utf8');
  const lockPasswords = [0, 1, 2].map(
    (node) =>
      Object.fromEntries(
        LOCK_ROLES.map((role) => [role, secret(role === 'probe' ? 'probe-password' : `${role}-lock-${node}-password`)]),
      ) as Record<(typeof LOCK_ROLES)[number], string>,
  );
  const queuePasswords = Object.fromEntries(
    QUEUE_ROLES.map((role) => [role, secret(role === 'probe' ? 'probe-password' : `${role}-queue-password`)]),
  ) as Record<Role, string>;
  const servers: ProcessRedisNode[] = [];
  const apps: ManagedProcess[] = [];
  let locks: ProcessRedisNode[] = [];
  let queue: ProcessRedisNode;
  const configDir = path.join(dir, 'config');

  const url = (node: ProcessRedisNode, role: string, secret: string): string =>
    `redis://tickwarden-${role}:${encodeURIComponent(secret)}@127.0.0.1:${node.port}`;
  const lockUrls = (role: (typeof LOCK_ROLES)[number]): string =>
    locks.map((node, i) => url(node, role, lockPasswords[i]?.[role] ?? '')).join(',');
  const queueUrl = (role: Role): string => url(queue, role, queuePasswords[role]);
  /** redis-cli as `user` (password through REDISCLI_AUTH, never argv); stdout and stderr. */
  const cli = (node: ProcessRedisNode, user: string, secret: string, ...command: string[]): string => {
    const result = spawnSync('redis-cli', ['-p', String(node.port), '--user', user, ...command], {
      encoding: 'utf8',
      env: { ...process.env, REDISCLI_AUTH: secret },
    });
    return `${result.stdout}${result.stderr}`.trim();
  };
  const asRole = (node: ProcessRedisNode, role: Role, secret: string, ...command: string[]): string =>
    cli(node, `tickwarden-${role}`, secret, ...command);
  const aclLog = (node: ProcessRedisNode): string => cli(node, HARNESS.user, HARNESS.password, 'ACL', 'LOG', '20');

  async function startServer(file: string): Promise<ProcessRedisNode> {
    const node = await ProcessRedisNode.start({
      aof: false,
      password: undefined,
      tls: false,
      extraArgs: ['--aclfile', file],
    });
    servers.push(node);
    return node;
  }

  beforeAll(async () => {
    const harnessLine = `user ${HARNESS.user} on >${HARNESS.password} ~* &* +@all\n`;
    const files = [0, 1, 2].map((i) => path.join(secrets, `tickwarden-lock-${i}.acl`));
    const queueFile = path.join(secrets, 'queue-redis.acl');
    for (const file of [...files, queueFile]) appendFileSync(file, harnessLine);
    [queue, ...locks] = await Promise.all([startServer(queueFile), ...files.map((file) => startServer(file))]);
    mkdirSync(configDir);
    writeFileSync(path.join(configDir, 'acl.yaml'), TEAM);
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.stop('SIGKILL')));
    await Promise.all(servers.map((server) => server.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("make-secrets.sh: 64 hex characters per password, owner-only files; a render without a role's password fails naming the variable", () => {
    expect(queuePasswords.status).toMatch(/^[0-9a-f]{64}$/);
    expect(
      new Set([...Object.values(queuePasswords), ...lockPasswords.flatMap((passwords) => Object.values(passwords))])
        .size,
    ).toBe(1 + 4 + 3 * 3);
    expect(statSync(path.join(secrets, 'worker-queue-password')).mode & 0o077).toBe(0);
    const result = spawnSync('bash', [RENDER, 'queue-redis'], {
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '', TICKWARDEN_ACL_SCHEDULER: 'x' },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/TICKWARDEN_ACL_\w+ is not set/);
    expect(spawnSync('bash', [RENDER, 'nope'], { encoding: 'utf8' }).stderr).toContain('no template');
  });

  it('the scheduler and the worker run ticks, the CLI pauses, resumes, triggers and reads status: no denial anywhere', async () => {
    const start = async (role: AppProcessRole, main: string, replicaId?: string): Promise<ManagedProcess> => {
      const app = startAppProcess({
        role,
        name: role,
        main,
        configDir,
        lockNodes: lockUrls(role),
        queueRedis: queueUrl(role),
        httpPort: await freePort(),
        replicaId,
        logLevel: 'info',
      });
      apps.push(app);
      return app;
    };
    await start('scheduler', SCHEDULER_MAIN, 'acl-scheduler');
    const worker = await start('worker', WORKER_MAIN);
    const succeeded = (): number => worker.records.filter((record) => record['outcome'] === 'succeeded').length;
    await waitUntil(() => succeeded() >= 3, 'three runs as the worker user', { timeoutMs: 20_000 });

    const run = async (role: Role, ...args: string[]): Promise<{ code: number; output: string }> => {
      const env = {
        ...process.env,
        TICKWARDEN_CONFIG: configDir,
        TICKWARDEN_QUEUE_REDIS: queueUrl(role),
        TICKWARDEN_LOCK_NODES: lockUrls('control'),
      };
      const result = await promisify(execFile)(process.execPath, ['--conditions=@tickwarden/source', CLI, ...args], {
        env,
        timeout: 30_000,
      }).then(
        (done) => ({ code: 0, output: `${done.stdout}${done.stderr}` }),
        (error: { code?: number; stdout?: string; stderr?: string }) => ({
          code: error.code ?? -1,
          output: `${error.stdout ?? ''}${error.stderr ?? ''}`,
        }),
      );
      return result;
    };
    const pausedAt = new Date().toISOString();
    expect(await run('control', 'pause', 'acl/every-second')).toMatchObject({ code: 0 });
    await sleep(2500);
    expect(await run('control', 'resume', 'acl/every-second')).toMatchObject({ code: 0 });
    expect(await run('control', 'trigger', 'acl/every-second')).toMatchObject({ code: 0 });
    // Backfill reads the run history and starts claims on the lock nodes.
    const backfill = await run(
      'control',
      'backfill',
      'acl/every-second',
      '--from',
      pausedAt,
      '--to',
      new Date(Date.now() - 1000).toISOString(),
    );
    expect(backfill.code, backfill.output).toBe(0);
    expect(backfill.output).toMatch(/acl\/every-second: [1-9]\d* fired/);
    const status = await run('status', 'status', 'acl/every-second');
    expect(status.code, status.output).toBe(0);
    expect(status.output).toContain('enqueued');
    // The read-only user cannot pause.
    const refused = await run('status', 'pause', 'acl/every-second');
    expect(refused.code).not.toBe(0);
    expect(refused.output).toMatch(/NOPERM/);

    const denials = [queue, ...locks].map((node) => aclLog(node));
    // Only the status user's refused pause is logged.
    expect(
      denials[0]?.split('\n').filter((line) => line.startsWith('tickwarden-') && line !== 'tickwarden-status'),
    ).toEqual([]);
    expect(denials.slice(1)).toEqual(['', '', '']);
  });

  it("each user is refused dangerous commands, other roles' keys and other nodes' passwords", () => {
    for (const role of QUEUE_ROLES) {
      const secret = queuePasswords[role];
      expect(asRole(queue, role, secret, 'PING')).toBe('PONG');
      for (const command of [['FLUSHALL'], ['CONFIG', 'GET', 'requirepass'], ['KEYS', '*'], ['ACL', 'LIST']])
        expect(asRole(queue, role, secret, ...command), `${role} ${command[0]}`).toMatch(/NOPERM/);
    }
    expect(asRole(queue, 'worker', queuePasswords.worker, 'SET', 'tickwarden:control:paused', 'x')).toMatch(/NOPERM/);
    // The run history is the workers' to write, and the status user's to read.
    expect(asRole(queue, 'worker', queuePasswords.worker, 'ZADD', 'tickwarden:runs:{acl/x}', '1', 'r')).toBe('1');
    expect(asRole(queue, 'status', queuePasswords.status, 'ZCARD', 'tickwarden:runs:{acl/x}')).toBe('1');
    expect(asRole(queue, 'status', queuePasswords.status, 'ZADD', 'tickwarden:runs:{acl/x}', '2', 's')).toMatch(
      /NOPERM/,
    );
    expect(asRole(queue, 'scheduler', queuePasswords.scheduler, 'ZCARD', 'tickwarden:runs:{acl/x}')).toBe('1');
    expect(asRole(queue, 'scheduler', queuePasswords.scheduler, 'ZADD', 'tickwarden:runs:{acl/x}', '2', 's')).toMatch(
      /NOPERM/,
    );
    expect(asRole(queue, 'status', queuePasswords.status, 'SET', 'bull:x', 'x')).toMatch(/NOPERM/);
    // Scripts run with their caller's permissions: the status user's cannot write either.
    expect(
      asRole(queue, 'status', queuePasswords.status, 'EVAL', "return redis.call('SET', KEYS[1], 'x')", '1', 'bull:x'),
    ).toMatch(/can't run this command/);
    expect(asRole(queue, 'control', queuePasswords.control, 'SET', 'other:key', 'x')).toMatch(/NOPERM/);
    expect(asRole(queue, 'probe', queuePasswords.probe, 'GET', 'bull:x')).toMatch(/NOPERM/);
    const [first, second] = locks as [ProcessRedisNode, ProcessRedisNode];
    const scheduler0 = lockPasswords[0]?.scheduler ?? '';
    expect(asRole(first, 'scheduler', scheduler0, 'SET', 'other:key', 'x')).toMatch(/NOPERM/);
    expect(asRole(first, 'scheduler', scheduler0, 'FLUSHALL')).toMatch(/NOPERM/);
    // Release notifications (libs/redlock): the lease scripts publish, and waiters subscribe, on "tickwarden:*" only.
    const worker0 = lockPasswords[0]?.worker ?? '';
    const publish = "return redis.call('PUBLISH', ARGV[1], 'v')";
    expect(asRole(first, 'worker', worker0, 'EVAL', publish, '0', 'tickwarden:{acl/x}:released')).toBe('0');
    expect(asRole(first, 'worker', worker0, 'EVAL', publish, '0', 'other:channel')).toMatch(/NOPERM|can't publish/);
    expect(asRole(first, 'scheduler', scheduler0, 'PUBLISH', 'other:channel', 'v')).toMatch(/NOPERM/);
    expect(asRole(second, 'scheduler', scheduler0, 'PING')).toMatch(/WRONGPASS/);
    expect(cli(first, 'default', '', 'PING')).toMatch(/WRONGPASS|NOAUTH|disabled/i);
  });
});
