import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Registry, Counter } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ConfigWatcher, startHttpServer } from '../src/index.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('ConfigWatcher', () => {
  it('calls back once per content change of a directory, also for a new file', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-watch-'));
    writeFileSync(path.join(dir, 'a.yaml'), 'team: a\n');
    let changes = 0;
    const watcher = new ConfigWatcher(dir, 20, async () => {
      changes++;
    });
    await watcher.start();
    await sleep(80);
    expect(changes).toBe(0);
    writeFileSync(path.join(dir, 'b.yaml'), 'team: b\n');
    await sleep(100);
    expect(changes).toBe(1);
    writeFileSync(path.join(dir, 'a.yaml'), 'team: a2\n');
    writeFileSync(path.join(dir, 'notes.txt'), 'ignored\n');
    await sleep(100);
    expect(changes).toBe(2);
    watcher.stop();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('HTTP probes', () => {
  it('serves /healthz, /readyz with reasons, /metrics and 404', async () => {
    const registry = new Registry();
    new Counter({ name: 'probe_test_total', help: 'test', registers: [registry] }).inc();
    let reasons: string[] = ['lock quorum unreachable'];
    const server = await startHttpServer(0, registry, async () => reasons);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      const notReady = await fetch(`${base}/readyz`);
      expect(notReady.status).toBe(503);
      expect(await notReady.text()).toContain('lock quorum unreachable');
      reasons = [];
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
      expect(await (await fetch(`${base}/metrics`)).text()).toContain('probe_test_total 1');
      expect((await fetch(`${base}/nope`)).status).toBe(404);
    } finally {
      server.close();
    }
  });
});
