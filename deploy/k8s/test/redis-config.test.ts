import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, ManagedProcess, ping, waitUntil } from '@tickwarden/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { expandReferences, resolveEnv } from './support/env.ts';
import { component, mainContainer } from './support/objects.ts';
import { overlayDir } from './support/paths.ts';
import { ENV_SOURCES } from './support/policies.ts';
import { render } from './support/render.ts';

const prod = render(overlayDir('prod'));

/**
 * The Redis command lines of the manifests, run by a real redis-server (the one on PATH, on a
 * free loopback port and a temporary data directory instead of 6379 and the volume): a typo in
 * a flag would stop the pod from starting, and the settings the policies read must be the ones
 * Redis applies.
 */
describe('the Redis pods\' command lines, run by redis-server', () => {
  const started: { server: ManagedProcess; dir: string }[] = [];
  afterEach(async () => {
    for (const { server, dir } of started.splice(0)) {
      await server.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  async function startAsRendered(componentName: string): Promise<{ port: number; password: string; dir: string }> {
    const [workload] = component(prod, componentName);
    if (!workload) throw new Error(`no ${componentName} in the prod render`);
    const container = mainContainer(workload);
    const { env } = resolveEnv(container, prod, ENV_SOURCES);
    const argv = [...(container.command ?? []), ...(container.args ?? [])].map((arg) => expandReferences(arg, env).value);
    const port = await freePort();
    const dir = mkdtempSync(path.join(tmpdir(), `tickwarden-${componentName}-`));
    argv[argv.indexOf('--port') + 1] = String(port);
    argv[argv.indexOf('--dir') + 1] = dir;
    const [command = '', ...args] = argv;
    const server = ManagedProcess.start({ name: componentName, command, args: [...args, '--bind', '127.0.0.1'] });
    started.push({ server, dir });
    await waitUntil(() => ping(port), `${componentName} redis-server on port ${port}`);
    return { port, password: env['REDIS_PASSWORD'] ?? '', dir };
  }

  const cli = (port: number, password: string | undefined, ...command: string[]): string =>
    spawnSync('redis-cli', ['-p', String(port), ...command], { encoding: 'utf8', env: { ...process.env, REDISCLI_AUTH: password } }).stdout.trim();

  it.each(['lock-node', 'queue'])('%s: password required, AOF fsynced always into --dir, no eviction', async (componentName) => {
    const { port, password, dir } = await startAsRendered(componentName);
    expect(password).toMatch(/^[0-9a-f]{32}$/);
    expect(cli(port, undefined, 'PING')).toMatch(/^NOAUTH/);
    expect(cli(port, password, 'CONFIG', 'GET', 'append*').split('\n')).toEqual(expect.arrayContaining(['appendonly', 'yes', 'appendfsync', 'always']));
    expect(cli(port, password, 'CONFIG', 'GET', 'maxmemory-policy').split('\n')).toEqual(['maxmemory-policy', 'noeviction']);
    expect(cli(port, password, 'SET', 'lease', 'held')).toBe('OK');
    expect(existsSync(path.join(dir, 'appendonlydir'))).toBe(true);
  });
});
