import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { validateConfigTexts, type TickwardenConfig } from '@tickwarden/config';
import { Redlock } from '@tickwarden/redlock';
import { startRedisNodes, waitUntil } from '@tickwarden/testkit';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  boundPort,
  configHash,
  packageVersion,
  ProcessMetrics,
  startHttpServer,
  startLiveConfig,
} from '../src/index.ts';

/** A config as the loader makes it, from team files. */
function config(files: Record<string, string>): TickwardenConfig {
  const result = validateConfigTexts(Object.entries(files).map(([file, text]) => ({ file, text })));
  if (!result.ok) throw new Error(JSON.stringify(result.errors));
  return result.config;
}
const team = (name: string, cron = '@daily') =>
  `team: a\nschedules:\n  - { name: ${name}, cron: "${cron}", handler: { kind: module, path: ./x.js } }\n`;

describe('ProcessMetrics', () => {
  it('config: the hash of the running config, the last reload gauge (1 until a reload is rejected, 0 until one is applied) and its time', async () => {
    const metrics = new ProcessMetrics();
    const first = config({ '/etc/a.yaml': team('first') });
    await metrics.configApplied(first, 1_700_000_000_000);
    let text = await metrics.registry.metrics();
    expect(text).toContain(`tickwarden_config_info{hash="${await configHash(first)}"} 1`);
    expect(text).toMatch(/^tickwarden_config_last_reload_successful 1$/m);
    expect(text).toMatch(/^tickwarden_config_last_reload_success_timestamp_seconds 1700000000$/m);

    metrics.recordConfigReload('invalid');
    text = await metrics.registry.metrics();
    expect(text).toMatch(/^tickwarden_config_last_reload_successful 0$/m);
    expect(text).toContain(`tickwarden_config_info{hash="${await configHash(first)}"} 1`);
    expect(text).toContain('tickwarden_config_reloads_total{result="invalid"} 1');

    const second = config({ '/etc/a.yaml': team('second') });
    await metrics.configApplied(second, 1_700_000_060_000);
    metrics.recordConfigReload('applied');
    text = await metrics.registry.metrics();
    expect(text).toMatch(/^tickwarden_config_last_reload_successful 1$/m);
    expect(text).toMatch(/^tickwarden_config_last_reload_success_timestamp_seconds 1700000060$/m);
    // One series: the config it runs now.
    expect(text.match(/^tickwarden_config_info\{/gm)).toHaveLength(1);
    expect(text).toContain(`tickwarden_config_info{hash="${await configHash(second)}"} 1`);
  });

  it('configHash: the same schedules hash alike wherever and however they are written; any change of a schedule changes it', async () => {
    const hash = await configHash(config({ '/etc/tickwarden/a.yaml': team('first') }));
    expect(hash).toMatch(/^[0-9a-f]{16}$/);
    expect(await configHash(config({ '/elsewhere/team-a.yml': `# a comment\n\n${team('first')}` }))).toBe(hash);
    expect(await configHash(config({ '/etc/tickwarden/a.yaml': team('first', '@hourly') }))).not.toBe(hash);
    expect(await configHash(config({ '/etc/tickwarden/a.yaml': team('other') }))).not.toBe(hash);
    // Key order does not matter (another version of the validator may build its objects in another order).
    const [schedule] = config({ '/etc/a.yaml': team('first') }).schedules;
    if (!schedule) throw new Error('no schedule');
    const reversed = Object.fromEntries(Object.entries(schedule).reverse()) as typeof schedule;
    expect(await configHash({ schedules: [reversed] })).toBe(hash);
  });

  it('build info: the version given and the Node version', async () => {
    const metrics = new ProcessMetrics();
    metrics.setBuild(packageVersion(new URL('../package.json', import.meta.url)));
    expect(await metrics.registry.metrics()).toContain(
      `tickwarden_build_info{version="0.0.0",node="${process.version}"} 1`,
    );
    expect(packageVersion(new URL('./no-such-package.json', import.meta.url))).toBe('unknown');
  });

  it('lock quorum: probed at each scrape against real nodes; exported only once a Redlock is observed', async () => {
    const metrics = new ProcessMetrics();
    expect(await metrics.registry.metrics()).not.toContain('tickwarden_lock_quorum_reachable');
    const nodes = await startRedisNodes({ count: 3, aof: false });
    // Scrapes probe with the node timeout: long enough for a loaded machine's connects and replies (paused nodes never answer).
    const redlock = new Redlock(nodes.urls, { nodeTimeoutMs: 2000 });
    try {
      metrics.observeLockNodes(redlock);
      let text = await metrics.registry.metrics();
      expect(text).toMatch(/^tickwarden_lock_quorum_reachable 1$/m);
      expect(text).toMatch(/^tickwarden_lock_nodes_reachable 3$/m);
      const paused = [nodes.node(0), nodes.node(1)];
      await Promise.all(paused.map((node) => node.pause()));
      try {
        text = await metrics.registry.metrics();
      } finally {
        await Promise.all(paused.map((node) => node.resume()));
      }
      expect(text).toMatch(/^tickwarden_lock_quorum_reachable 0$/m);
      expect(text).toMatch(/^tickwarden_lock_nodes_reachable 1$/m);
      expect(await metrics.registry.metrics()).toMatch(/^tickwarden_lock_quorum_reachable 1$/m);
    } finally {
      await redlock.close();
      await nodes.close();
    }
  });

  it('with startLiveConfig as the apps wire it: a rejected reload sets the gauge to 0 and keeps the hash; the next good one sets both', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-metrics-'));
    writeFileSync(path.join(dir, 'a.yaml'), team('first'));
    const metrics = new ProcessMetrics();
    let reloads = 0;
    const live = await startLiveConfig({
      path: dir,
      logger: pino({ level: 'silent' }),
      pollMs: 20,
      onReload: (reloaded) => metrics.configApplied(reloaded),
      onReloadResult: (result) => {
        metrics.recordConfigReload(result);
        reloads++;
      },
    });
    if (!live) throw new Error('not started');
    await metrics.configApplied(live.config);
    const firstHash = await configHash(live.config);
    try {
      writeFileSync(path.join(dir, 'a.yaml'), 'team: a\nschedules: [ { name: broken } ]\n');
      await waitUntil(() => reloads === 1, 'the rejected reload');
      let text = await metrics.registry.metrics();
      expect(text).toMatch(/^tickwarden_config_last_reload_successful 0$/m);
      expect(text).toContain(`tickwarden_config_info{hash="${firstHash}"} 1`);
      writeFileSync(path.join(dir, 'a.yaml'), team('second'));
      await waitUntil(() => reloads === 2, 'the good reload');
      text = await metrics.registry.metrics();
      expect(text).toMatch(/^tickwarden_config_last_reload_successful 1$/m);
      expect(text).not.toContain(firstHash);
      expect(text).toContain('tickwarden_config_reloads_total{result="applied"} 1');
    } finally {
      live.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('boundPort', () => {
  it('is the port the OS picked for port 0', async () => {
    const metrics = new ProcessMetrics();
    const server = await startHttpServer(0, metrics.registry, async () => []);
    try {
      const port = boundPort(server);
      expect(port).toBeGreaterThan(0);
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    } finally {
      server.close();
    }
  });
});
