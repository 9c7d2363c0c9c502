import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '@tickwarden/config';
import { Redlock } from '@tickwarden/redlock';
import { startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Scheduler, type TickOutcome } from '../src/index.ts';
import { RedisReplicaStore } from '../src/replica-store.ts';

const BIN = fileURLToPath(new URL('../bin/tickwarden.js', import.meta.url));

const CONFIG = `team: ops
schedules:
  - name: every-second
    cron: "* * * * * *"
    handler: { kind: command, argv: ["true"] }
    overlap: allow
    leaseTtl: 2s
  - name: nightly
    cron: "30 2 * * *"
    timezone: Europe/Berlin
    handler: { kind: http, url: "http://127.0.0.1:1/hook" }
`;

describe('tickwarden CLI', () => {
  let locks: RedisNodes;
  let queue: RedisNodes;
  let dir: string;
  let env: Record<string, string>;

  const cli = (...args: string[]) => cliWith({}, ...args);
  const cliWith = (extraEnv: Record<string, string>, ...args: string[]) => {
    const result = spawnSync(process.execPath, [BIN, ...args], { env: { ...process.env, ...env, ...extraEnv }, encoding: 'utf8' });
    return { code: result.status, out: result.stdout, err: result.stderr };
  };

  beforeAll(async () => {
    [locks, queue] = await Promise.all([startRedisNodes({ count: 3, aof: false }), startRedisNodes({ count: 1, aof: false })]);
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-cli-'));
    writeFileSync(path.join(dir, 'ops.yaml'), CONFIG);
    env = { TICKWARDEN_CONFIG: dir, TICKWARDEN_LOCK_NODES: locks.urls.join(','), TICKWARDEN_QUEUE_REDIS: queue.urls[0] ?? '' };
  });
  afterAll(async () => {
    await Promise.all([locks.close(), queue.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('validate: exit 0 with a summary, exit 1 naming every error', () => {
    expect(cli('validate', dir)).toMatchObject({ code: 0, out: 'ok: 2 schedule(s) in 1 file(s)\n' });
    const bad = mkdtempSync(path.join(tmpdir(), 'tickwarden-cli-bad-'));
    writeFileSync(path.join(bad, 'x.yaml'), 'team: x\nschedules:\n  - name: a\n    cron: "* *"\n    handler: { kind: nope }\n');
    const result = cli('validate', bad);
    rmSync(bad, { recursive: true, force: true });
    expect(result.code).toBe(1);
    expect(result.err).toContain('x.yaml:4:11: schedules[0].cron');
    expect(result.err).toContain('x.yaml:5:22: schedules[0].handler.kind');
  });

  it('validate applies the http destination policy of its environment; a bad policy exits 2 naming the variable', () => {
    const hooks = mkdtempSync(path.join(tmpdir(), 'tickwarden-cli-http-'));
    writeFileSync(path.join(hooks, 'x.yaml'), 'team: x\nschedules:\n  - name: a\n    cron: "0 * * * *"\n    handler: { kind: http, url: "https://hooks.example.org/a" }\n');
    const allowed = cliWith({ TICKWARDEN_HTTP_ALLOW: '*.example.org' }, 'validate', hooks);
    const refused = cliWith({ TICKWARDEN_HTTP_DENY: 'hooks.example.org' }, 'validate', hooks);
    const badPolicy = cliWith({ TICKWARDEN_HTTP_DENY: '10.0.0.0/99' }, 'validate', hooks);
    rmSync(hooks, { recursive: true, force: true });
    expect(allowed).toMatchObject({ code: 0 });
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('x.yaml:3:1: schedules[0].handler.url: destination refused: host hooks.example.org is denied (TICKWARDEN_HTTP_DENY)');
    expect(badPolicy.code).toBe(2);
    expect(badPolicy.err).toContain('TICKWARDEN_HTTP_DENY: entry "10.0.0.0/99"');
  });

  it('next: upcoming ticks in the schedule time zone; bad arguments exit 2 with the usage', () => {
    const result = cli('next', dir, 'ops/nightly', '-n', '2');
    expect(result.code).toBe(0);
    expect(result.out.trim().split('\n')).toHaveLength(2);
    expect(result.out).toMatch(/^\d{4}-\d{2}-\d{2} 02:30:00 GMT\+[12]$/m);
    expect(cli('next', dir, 'ops/nightly', '-n', '0')).toMatchObject({ code: 2 });
    expect(cli('next', dir, 'ops/unknown')).toMatchObject({ code: 2 });
    expect(cli('frobnicate')).toMatchObject({ code: 2 });
    expect(cli('status', '--bogus-flag')).toMatchObject({ code: 2 });
  });

  it('status, pause and resume with the queue Redis unreachable: exit 1 at once with one line naming the variable, the URL without its password and the cause', () => {
    const from = performance.now();
    for (const command of [['status'], ['pause', 'ops/every-second'], ['resume', 'ops/every-second']]) {
      const { code, err } = cliWith({ TICKWARDEN_QUEUE_REDIS: 'redis://:s3cret@127.0.0.1:1' }, ...command);
      expect(code).toBe(1);
      expect(err).toBe('tickwarden: cannot reach the queue Redis (TICKWARDEN_QUEUE_REDIS, redis://:***@127.0.0.1:1): connect ECONNREFUSED 127.0.0.1:1\n');
    }
    expect(performance.now() - from).toBeLessThan(10_000);
  });

  it('pause stops every replica from firing, resume restarts it; trigger enqueues a run; status shows it all', async () => {
    const loaded = await loadConfig(dir);
    if (!loaded.ok) throw new Error('config');
    const outcomes: { outcome: TickOutcome; tickMs: number }[] = [];
    const redlock = new Redlock(locks.urls);
    const connection = new Redis(queue.urls[0] ?? '', { maxRetriesPerRequest: null });
    const scheduler = new Scheduler({ replicaId: 'cli-test', redlock, queueConnection: connection, logger: pino({ level: 'silent' }), onOutcome: ({ outcome, scheduleId, tickMs }) => scheduleId === 'ops/every-second' && outcomes.push({ outcome, tickMs }) });
    scheduler.setSchedules(loaded.config.schedules);
    scheduler.start();
    try {
      await waitUntil(() => outcomes.some((o) => o.outcome === 'enqueued'), 'a first enqueued tick', { timeoutMs: 5000 });
      expect(cli('pause', 'ops/every-second', '--note', 'maintenance')).toMatchObject({ code: 0, out: 'paused ops/every-second\n' });
      // Ticks contested before the pause (up to the contest lead, a third of the 2 s lease TTL, ahead) still run.
      const pausedAt = Date.now() + 1000;
      await waitUntil(() => outcomes.filter((o) => o.tickMs > pausedAt && o.outcome === 'skipped-paused').length >= 2, 'paused ticks', { timeoutMs: 5000 });
      expect(outcomes.filter((o) => o.tickMs > pausedAt && o.outcome === 'enqueued')).toEqual([]);
      expect(cli('status', 'ops/every-second').out).toContain('maintenance');
      expect(cli('resume', 'ops/every-second')).toMatchObject({ code: 0, out: 'resumed ops/every-second\n' });
      const resumedAt = Date.now() + 1000;
      await waitUntil(() => outcomes.some((o) => o.tickMs > resumedAt && o.outcome === 'enqueued'), 'ticks after resume', { timeoutMs: 5000 });

      const triggered = cli('trigger', 'ops/nightly');
      expect(triggered.code).toBe(0);
      const jobId = /job (\S+),/.exec(triggered.out)?.[1] ?? '';
      expect(jobId).toMatch(/^ops\/nightly@manual-\d+$/);
      const q = new Queue('tickwarden-default', { connection });
      expect((await q.getJob(jobId))?.data.schedule).toBe('ops/nightly');
      await q.close();

      // A gap a starting replica found (tick-marks.test.ts records real ones): one line.
      const gap = { firstTickMs: Date.UTC(2026, 10, 26, 3, 0, 1), count: 4, atLeast: false };
      await new RedisReplicaStore(connection).record([{ scheduleId: 'ops/nightly', keepMs: 86_400_000, record: { tickMs: gap.firstTickMs + 3000, outcome: 'missed', reason: 'no-replica', lagMs: 9000, fence: undefined, jobId: undefined, replica: 'b0', gap } }]);
      const status = cli('status').out;
      expect(status).toContain('  2026-11-26T03:00:01.000Z .. 2026-11-26T03:00:04.000Z  missed  4 ticks while no replica ran  found by b0');
      expect(status).toContain('ops/nightly  30 2 * * * (Europe/Berlin)  active');
      expect(status).toMatch(/ops\/nightly[\s\S]*triggered {2}job (waiting|delayed)[\s\S]*fence \d+ {2}by cli/);
      // Newest tick first, not recording order: the gap (03:00) was recorded after the trigger (now).
      expect(status.indexOf('triggered  job')).toBeLessThan(status.indexOf('missed  4 ticks'));
      expect(status).toMatch(/ops\/every-second[\s\S]*enqueued {2}job (waiting|delayed) {2}(lag \d+ ms|\d+ ms ahead) {2}fence \d+ {2}by cli-test/);

      // --json: the tick records only, one object per line, newest tick first, -n of them.
      const json = cli('status', 'ops/every-second', '--json', '-n', '3');
      expect(json.code).toBe(0);
      const records = json.out.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(records).toHaveLength(3);
      expect(records.every((r) => r['schedule'] === 'ops/every-second' && r['tick'] === new Date(Number(r['tickMs'])).toISOString())).toBe(true);
      expect(records.map((r) => Number(r['tickMs']))).toEqual(records.map((r) => Number(r['tickMs'])).sort((a, b) => b - a));
      expect(new Set(records.map((r) => r['outcome']))).toEqual(new Set(outcomes.filter((o) => records.some((r) => r['tickMs'] === o.tickMs)).map((o) => o.outcome)));
      expect(cli('status', '--json', '-n', '10001')).toMatchObject({ code: 2 });
    } finally {
      await scheduler.stop();
      await redlock.close();
      connection.disconnect();
    }
  });
});
