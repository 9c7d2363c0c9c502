import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TickwardenConfig } from '@tickwarden/config';
import { pino } from 'pino';
import { sleep, waitUntil } from '@tickwarden/testkit';
import { Registry, Counter } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ConfigWatcher, MAX_BODY_BYTES, startHttpServer, startLiveConfig, type PageRequest } from '../src/index.ts';

describe('ConfigWatcher', () => {
  it('calls back once per content change of a directory, also for a new file', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-watch-'));
    writeFileSync(path.join(dir, 'a.yaml'), 'team: a\n');
    let changes = 0;
    const watcher = new ConfigWatcher(
      dir,
      20,
      async () => {
        changes++;
      },
      (error) => expect.unreachable(String(error)),
    );
    await watcher.start();
    await sleep(80);
    expect(changes).toBe(0);
    // Each change is awaited (a loaded machine may poll late), then a few more polls must add nothing.
    writeFileSync(path.join(dir, 'b.yaml'), 'team: b\n');
    await waitUntil(() => changes > 0, 'the new file seen');
    await sleep(100);
    expect(changes).toBe(1);
    writeFileSync(path.join(dir, 'a.yaml'), 'team: a2\n');
    writeFileSync(path.join(dir, 'notes.txt'), 'ignored\n');
    await waitUntil(() => changes > 1, 'the changed file seen');
    await sleep(100);
    expect(changes).toBe(2);
    watcher.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('hands a change it fails on to onError (no unhandled rejection) and still sees later changes', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-watch-'));
    writeFileSync(path.join(dir, 'a.yaml'), 'team: a\n');
    let changes = 0;
    const errors: unknown[] = [];
    const watcher = new ConfigWatcher(
      dir,
      20,
      async () => {
        if (++changes === 1) throw new Error('reload blew up');
      },
      (error) => errors.push(error),
    );
    await watcher.start();
    writeFileSync(path.join(dir, 'a.yaml'), 'team: a2\n');
    // Awaited (a loaded machine may poll late), then a few more polls must add nothing.
    await waitUntil(() => errors.length > 0, 'the failed change handed to onError');
    await sleep(100);
    expect(errors).toEqual([new Error('reload blew up')]);
    writeFileSync(path.join(dir, 'a.yaml'), 'team: a3\n');
    await waitUntil(() => changes > 1, 'the second change seen');
    await sleep(100);
    expect([changes, errors.length]).toEqual([2, 1]);
    watcher.stop();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('startLiveConfig', () => {
  it('a reload that throws is logged with the config path and counted invalid; the last good config stays', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-live-'));
    const team = (name: string) =>
      `team: a\nschedules:\n  - { name: ${name}, cron: "@daily", handler: { kind: module, path: ./x.js } }\n`;
    writeFileSync(path.join(dir, 'a.yaml'), team('first'));
    const logs: { level: number; msg: string; path?: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => logs.push(JSON.parse(line)) });
    const results: string[] = [];
    const applied: string[] = [];
    const live = await startLiveConfig({
      path: dir,
      logger,
      pollMs: 20,
      onReload: (config) => {
        const name = config.schedules[0]?.name ?? '';
        if (name === 'second') throw new Error('cannot apply');
        applied.push(name);
      },
      onReloadResult: (result) => results.push(result),
    });
    try {
      expect(live?.config.schedules.map((schedule) => schedule.name)).toEqual(['first']);
      writeFileSync(path.join(dir, 'a.yaml'), team('second'));
      await waitUntil(() => results.length === 1, 'the first reload');
      expect(results).toEqual(['invalid']);
      expect(logs.filter((log) => log.level >= 50)).toMatchObject([
        { level: 50, path: dir, msg: `config reload of ${dir} failed: keeping the last good config` },
      ]);
      writeFileSync(path.join(dir, 'a.yaml'), team('third'));
      await waitUntil(() => results.length === 2, 'the second reload');
      expect([results, applied]).toEqual([['invalid', 'applied'], ['third']]);
    } finally {
      live?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('startLiveConfig reloads', () => {
  it('keep the schedules of the files that did not change: the objects of the config in force', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-live-'));
    const team = (team: string, name: string) =>
      `team: ${team}\nschedules:\n  - { name: ${name}, cron: "@daily", handler: { kind: module, path: ./x.js } }\n`;
    writeFileSync(path.join(dir, 'a.yaml'), team('a', 'kept'));
    writeFileSync(path.join(dir, 'b.yaml'), team('b', 'first'));
    const configs: TickwardenConfig[] = [];
    const live = await startLiveConfig({
      path: dir,
      logger: pino({ level: 'silent' }),
      pollMs: 20,
      onReload: (config) => void configs.push(config),
    });
    try {
      const initial = live?.config.schedules ?? [];
      writeFileSync(path.join(dir, 'b.yaml'), team('b', 'second'));
      await waitUntil(() => configs.length === 1, 'the first reload');
      writeFileSync(path.join(dir, 'b.yaml'), team('b', 'third'));
      await waitUntil(() => configs.length === 2, 'the second reload');
      const [second, third] = configs.map((config) => config.schedules);
      expect(second?.map((schedule) => schedule.id)).toEqual(['a/kept', 'b/second']);
      expect(third?.map((schedule) => schedule.id)).toEqual(['a/kept', 'b/third']);
      expect(second?.[0]).toBe(initial[0]);
      expect(third?.[0]).toBe(initial[0]);
    } finally {
      live?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
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

  it('/metrics from a source in chunks: written one after the other, whole', async () => {
    const chunks = Array.from({ length: 50 }, (_, i) => `series_${i} ${i}\n`.repeat(1000));
    const source = {
      contentType: 'text/plain; version=0.0.4; charset=utf-8',
      metrics: () => Promise.reject(new Error('chunks are served instead')),
      chunks: () => Promise.resolve(chunks),
    };
    const server = await startHttpServer(0, source, async () => []);
    try {
      const answer = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toBe(source.contentType);
      expect(await answer.text()).toBe(chunks.join(''));
    } finally {
      server.close();
    }
  });

  it("pages: any other path and method, a POST's body read whole up to MAX_BODY_BYTES (413 beyond, unseen); probes and the GET-only API as before", async () => {
    const seen: PageRequest[] = [];
    const server = await startHttpServer(0, new Registry(), async () => [], {
      api: async (path) => (path === '/api/x' ? { status: 200, body: { x: 1 } } : undefined),
      pages: async (request) => {
        seen.push(request);
        if (request.path === '/boom') throw new Error('page failed');
        return request.path === '/page'
          ? {
              status: 201,
              headers: { 'content-type': 'text/html; charset=utf-8', 'x-page': 'yes' },
              body: `${request.method} ${request.query.get('q')} ${request.body.length}`,
            }
          : undefined;
      },
    });
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const post = (body: RequestInit['body'], init: RequestInit = {}) =>
      fetch(`${base}/page?q=1`, { method: 'POST', body, ...init });
    try {
      const got = await fetch(`${base}/page?q=1`);
      expect([got.status, got.headers.get('x-page'), await got.text()]).toEqual([201, 'yes', 'GET 1 0']);
      expect(await (await post('a=1')).text()).toBe('POST 1 3');
      expect(await (await post('x'.repeat(MAX_BODY_BYTES))).text()).toBe(`POST 1 ${MAX_BODY_BYTES}`);
      const before = seen.length;
      const tooLarge = await post('x'.repeat(MAX_BODY_BYTES + 1));
      expect([tooLarge.status, await tooLarge.text()]).toEqual([413, `request body over ${MAX_BODY_BYTES} bytes\n`]);
      // Chunked, without a content-length: counted as it arrives.
      const chunks = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 5; i++) controller.enqueue(new Uint8Array(MAX_BODY_BYTES / 4));
          controller.close();
        },
      });
      expect((await post(chunks, { duplex: 'half' } as RequestInit)).status).toBe(413);
      expect(seen.length).toBe(before);
      expect([(await fetch(`${base}/elsewhere`)).status, (await fetch(`${base}/boom`)).status]).toEqual([404, 500]);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect([
        (await fetch(`${base}/api/x`)).status,
        (await fetch(`${base}/api/x`, { method: 'POST' })).status,
        (await fetch(`${base}/api/y`)).status,
      ]).toEqual([200, 405, 404]);
      expect(seen.map((request) => request.path)).not.toContain('/healthz');
    } finally {
      server.close();
    }
  });
});
