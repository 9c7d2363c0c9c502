import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  freePort,
  makeTestCertificates,
  ManagedProcess,
  ping,
  waitUntil,
  type TestCertificates,
} from '@tickwarden/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { expandReferences, resolveEnv } from './support/env.ts';
import { component, mainContainer } from './support/objects.ts';
import { COMPONENTS_DIR, overlayDir, REPO_ROOT } from './support/paths.ts';
import { ENV_SOURCES, POLICIES, RESTART_DELAY_VARIABLE } from './support/policies.ts';
import { render, renderComposition } from './support/render.ts';

const prod = render(overlayDir('prod'));
const prodTls = renderComposition({
  namespace: 'tickwarden',
  resources: [overlayDir('prod')],
  components: [path.join(COMPONENTS_DIR, 'redis-tls')],
});
/** Where components/redis-tls mounts the Secret tickwarden-redis-tls in the Redis pods. */
const REDIS_TLS_DIR = '/etc/redis-tls';

const RENDER = path.join(REPO_ROOT, 'deploy/k8s/acl/render.sh');
/** Passwords the test renders the ACL files with; `admin` is the harness's own user, appended here only. */
const PASSWORDS = {
  scheduler: 'scheduler-pw',
  worker: 'worker-pw',
  control: 'control-pw',
  status: 'status-pw',
  probe: ENV_SOURCES.externalSecrets['tickwarden-redis-acl/probe-password'] ?? '',
};
const ADMIN = { user: 'harness', password: 'harness-pw' };

/**
 * The Redis command lines of the manifests, run by a real redis-server (the one on PATH, on a
 * free loopback port and a temporary data directory instead of 6379 and the volume, and the
 * ACL file render.sh makes from deploy/k8s/acl instead of the Secret's): a typo in a flag would
 * stop the pod from starting, and the settings the policies read must be the ones Redis applies.
 */
describe("the Redis pods' command lines, run by redis-server", () => {
  const started: { server: ManagedProcess; dir: string }[] = [];
  afterEach(async () => {
    for (const { server, dir } of started.splice(0)) {
      await server.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** Starts a Redis pod's command line; with `tls`, its TLS files are those certificates (and its TLS port is the free one). */
  async function startAsRendered(
    componentName: string,
    objects = prod,
    tls?: TestCertificates,
  ): Promise<{ port: number; probePassword: string; aclFile: string; dir: string; argv: string[] }> {
    const [workload] = component(objects, componentName);
    if (!workload) throw new Error(`no ${componentName} in the render`);
    const container = mainContainer(workload);
    const { env } = resolveEnv(container, prod, ENV_SOURCES);
    const argv = [...(container.command ?? []), ...(container.args ?? [])].map(
      (arg) => expandReferences(arg, env).value,
    );
    const port = await freePort();
    const dir = mkdtempSync(path.join(tmpdir(), `tickwarden-${componentName}-`));
    const template = componentName === 'queue' ? 'queue-redis' : 'lock-node';
    const rendered = spawnSync('bash', [RENDER, template], {
      encoding: 'utf8',
      env: {
        ...process.env,
        ...Object.fromEntries(
          Object.entries(PASSWORDS).map(([role, value]) => [`TICKWARDEN_ACL_${role.toUpperCase()}`, value]),
        ),
      },
    });
    const aclFile = argv[argv.indexOf('--aclfile') + 1] ?? '';
    writeFileSync(
      path.join(dir, 'users.acl'),
      `${rendered.stdout}user ${ADMIN.user} on >${ADMIN.password} ~* &* +@all\n`,
    );
    const asRendered = [...argv];
    if (tls) {
      const files: Record<string, string> = {
        'server.crt': tls.server.cert,
        'server.key': tls.server.key,
        'ca.crt': tls.ca,
      };
      for (const [index, arg] of argv.entries())
        if (arg.startsWith(`${REDIS_TLS_DIR}/`)) argv[index] = files[arg.slice(REDIS_TLS_DIR.length + 1)] ?? arg;
      argv[argv.indexOf('--tls-port') + 1] = String(port);
    } else argv[argv.indexOf('--port') + 1] = String(port);
    argv[argv.indexOf('--dir') + 1] = dir;
    argv[argv.indexOf('--aclfile') + 1] = path.join(dir, 'users.acl');
    const [command = '', ...args] = argv;
    const server = ManagedProcess.start({ name: componentName, command, args: [...args, '--bind', '127.0.0.1'] });
    started.push({ server, dir });
    const tlsArgs = tls ? ['--tls', '--cacert', tls.ca, '--cert', tls.client.cert, '--key', tls.client.key] : [];
    await waitUntil(
      () =>
        spawnSync('redis-cli', [...tlsArgs, '-p', String(port), 'PING'], { encoding: 'utf8' }).stdout.includes(
          'NOAUTH',
        ) ||
        (!tls && ping(port)),
      `${componentName} redis-server on port ${port}`,
    );
    return { port, probePassword: env['REDISCLI_AUTH'] ?? '', aclFile, dir, argv: asRendered };
  }

  const cli = (port: number, user: string | undefined, password: string | undefined, ...command: string[]): string =>
    spawnSync('redis-cli', ['-p', String(port), ...(user ? ['--user', user] : []), ...command], {
      encoding: 'utf8',
      env: { ...process.env, REDISCLI_AUTH: password },
    }).stdout.trim();

  it.each(['lock-node', 'queue'])(
    '%s: users from the ACL file only (default off), the probe user pings, AOF fsynced always into --dir, no eviction',
    async (componentName) => {
      const { port, probePassword, aclFile, dir } = await startAsRendered(componentName);
      expect(aclFile).toMatch(
        componentName === 'queue'
          ? /^\/etc\/redis-acl\/queue-redis\.acl$/
          : /^\/etc\/redis-acl\/tickwarden-scheduler-[^/]+\.acl$/,
      );
      expect(cli(port, undefined, undefined, 'PING')).toMatch(/^NOAUTH/);
      expect(probePassword).toBe(PASSWORDS.probe);
      expect(cli(port, 'tickwarden-probe', probePassword, 'PING')).toBe('PONG');
      expect(cli(port, ADMIN.user, ADMIN.password, 'CONFIG', 'GET', 'append*').split('\n')).toEqual(
        expect.arrayContaining(['appendonly', 'yes', 'appendfsync', 'always']),
      );
      expect(cli(port, ADMIN.user, ADMIN.password, 'CONFIG', 'GET', 'maxmemory-policy').split('\n')).toEqual([
        'maxmemory-policy',
        'noeviction',
      ]);
      const key = componentName === 'queue' ? 'bull:q:x' : 'tickwarden:{lease}:lock';
      expect(cli(port, 'tickwarden-scheduler', PASSWORDS.scheduler, 'SET', key, 'held')).toBe('OK');
      expect(existsSync(path.join(dir, 'appendonlydir'))).toBe(true);
    },
  );

  it.each(['lock-node', 'queue'])(
    'components/redis-tls, %s: TLS only (no plain port), a client certificate required, the probe as the pod runs it',
    async (componentName) => {
      const tls = makeTestCertificates(mkdtempSync(path.join(tmpdir(), 'tickwarden-tls-certs-')));
      const { port, probePassword, argv } = await startAsRendered(componentName, prodTls, tls);
      expect(argv[argv.indexOf('--port') + 1]).toBe('0');
      expect(argv[argv.indexOf('--tls-auth-clients') + 1]).toBe('yes');
      const [workload] = component(prodTls, componentName);
      const container = workload ? mainContainer(workload) : undefined;
      expect(container?.volumeMounts?.find((mount) => mount.mountPath === REDIS_TLS_DIR)?.name).toBe('tls');
      // The readiness probe's own command, with the test's files where the pod has the Secret's.
      const probe = (container?.readinessProbe?.exec?.command?.[2] ?? '')
        .replaceAll(`${REDIS_TLS_DIR}/ca.crt`, tls.ca)
        .replaceAll(`${REDIS_TLS_DIR}/client.crt`, tls.client.cert)
        .replaceAll(`${REDIS_TLS_DIR}/client.key`, tls.client.key)
        .replace('redis-cli', `redis-cli -p ${port}`);
      expect(spawnSync('sh', ['-c', probe], { env: { ...process.env, REDISCLI_AUTH: probePassword } }).status).toBe(0);
      const withoutClientCert = spawnSync(
        'redis-cli',
        ['--tls', '--cacert', tls.ca, '--user', 'tickwarden-probe', '-p', String(port), 'PING'],
        { encoding: 'utf8', env: { ...process.env, REDISCLI_AUTH: probePassword } },
      );
      expect(`${withoutClientCert.stdout}${withoutClientCert.stderr}`).not.toContain('PONG');
      expect(cli(port, 'tickwarden-probe', probePassword, 'PING')).not.toBe('PONG');
    },
  );

  it('components/redis-tls: every policy still holds; the apps use rediss:// and the TLS files of their mount', () => {
    for (const [name, policy] of Object.entries(POLICIES)) expect(policy(prodTls), name).toEqual([]);
    for (const app of ['scheduler', 'worker']) {
      const [workload] = component(prodTls, app);
      const container = workload ? mainContainer(workload) : undefined;
      const { env } = resolveEnv(container ?? { name: app }, prodTls, ENV_SOURCES);
      expect(env['TICKWARDEN_LOCK_NODES']?.split(',').every((url) => url.startsWith('rediss://'))).toBe(true);
      expect(env['TICKWARDEN_QUEUE_REDIS']).toMatch(/^rediss:\/\//);
      const mount = container?.volumeMounts?.find((candidate) => candidate.name === 'redis-tls')?.mountPath ?? '';
      for (const variable of ['TICKWARDEN_REDIS_TLS_CA', 'TICKWARDEN_REDIS_TLS_CERT', 'TICKWARDEN_REDIS_TLS_KEY'])
        expect(path.dirname(env[variable] ?? ''), `${app} ${variable}`).toBe(mount);
    }
  });

  it('lock-node: the restart-delay init container waits on an empty data directory only (an AOF or an RDB lets the node start at once)', async () => {
    const [workload] = component(prod, 'lock-node');
    const init = workload?.pod.initContainers?.find((candidate) =>
      candidate.env?.some((variable) => variable.name === RESTART_DELAY_VARIABLE),
    );
    const argv = [...(init?.command ?? []), ...(init?.args ?? [])];
    expect(argv[0]).toBe('sh');
    // The pod's own command line, with a test directory as its data directory and a 1 s delay.
    const runInit = (dir: string): { status: number | null; stdout: string; ms: number } => {
      const started = performance.now();
      const result = spawnSync(argv[0] ?? '', [...argv.slice(1, -1), dir], {
        encoding: 'utf8',
        env: { PATH: process.env['PATH'], [RESTART_DELAY_VARIABLE]: '1' },
      });
      return { status: result.status, stdout: result.stdout, ms: performance.now() - started };
    };
    const empty = mkdtempSync(path.join(tmpdir(), 'tickwarden-lock-empty-'));
    // What an ext4 volume has before Redis ever wrote to it.
    mkdirSync(path.join(empty, 'lost+found'));
    const rdbOnly = mkdtempSync(path.join(tmpdir(), 'tickwarden-lock-rdb-'));
    writeFileSync(path.join(rdbOnly, 'dump.rdb'), '');
    try {
      const waited = runInit(empty);
      expect(waited.status).toBe(0);
      expect(waited.ms).toBeGreaterThanOrEqual(1000);
      expect(waited.stdout).toContain('lost its data');
      // A directory the lock-node command line wrote its AOF into, as a restarted node finds it.
      const { dir } = await startAsRendered('lock-node');
      expect(existsSync(path.join(dir, 'appendonlydir'))).toBe(true);
      for (const kept of [dir, rdbOnly]) {
        const started = runInit(kept);
        expect(started.status).toBe(0);
        expect(started.ms).toBeLessThan(1000);
        expect(started.stdout).toBe('');
      }
    } finally {
      for (const dir of [empty, rdbOnly]) rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the dev Secret holds an ACL file for every Redis pod, at the path its command line names', () => {
    const dev = render(overlayDir('dev'));
    const secret = dev.find(
      (object) => object.kind === 'Secret' && object.metadata.name.startsWith('tickwarden-redis-acl-'),
    );
    const keys = Object.keys((secret?.['data'] ?? {}) as Record<string, string>).sort();
    const lockPods = component(dev, 'lock-node').flatMap((set) =>
      Array.from({ length: set.replicas ?? 1 }, (_, i) => `${set.name}-${i}.acl`),
    );
    expect(keys).toEqual([...lockPods, 'probe-password', 'queue-redis.acl'].sort());
  });
});
