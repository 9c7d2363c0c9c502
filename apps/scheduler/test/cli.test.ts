import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '@tickwarden/config';
import type { TickJobData } from '@tickwarden/contracts';
import { RunHistory } from '@tickwarden/runtime';
import { Redlock } from '@tickwarden/redlock';
import { skewedClockEnv, startRedisNodes, waitUntil, type RedisNodes } from '@tickwarden/testkit';
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
    const result = spawnSync(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env, ...extraEnv },
      encoding: 'utf8',
    });
    return { code: result.status, out: result.stdout, err: result.stderr };
  };
  /**
   * Runs `run` on each item in turn: each CLI's time is then its own start and timeout, not its
   * share of two cores under six CLIs starting from their sources at once.
   */
  async function oneAtATime<T, R>(items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
    const results: R[] = [];
    for (const item of items) results.push(await run(item));
    return results;
  }
  /** The same, not blocking, with the wall time; killed after 20 s. */
  const cliAsync = (extraEnv: Record<string, string>, ...args: string[]) =>
    new Promise<{ code: number | null; out: string; err: string; ms: number }>((resolve) => {
      const from = performance.now();
      execFile(
        process.execPath,
        [BIN, ...args],
        { env: { ...process.env, ...env, ...extraEnv }, encoding: 'utf8', timeout: 20_000 },
        (error, out, err) =>
          resolve({
            code: error ? (typeof error.code === 'number' ? error.code : null) : 0,
            out,
            err,
            ms: performance.now() - from,
          }),
      );
    });

  beforeAll(async () => {
    [locks, queue] = await Promise.all([
      startRedisNodes({ count: 3, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-cli-'));
    writeFileSync(path.join(dir, 'ops.yaml'), CONFIG);
    env = {
      TICKWARDEN_CONFIG: dir,
      TICKWARDEN_LOCK_NODES: locks.urls.join(','),
      TICKWARDEN_QUEUE_REDIS: queue.urls[0] ?? '',
    };
  });
  afterAll(async () => {
    await Promise.all([locks.close(), queue.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('validate: exit 0 with a summary, exit 1 naming every error', () => {
    expect(cli('validate', dir)).toMatchObject({ code: 0, out: 'ok: 2 schedule(s) in 1 file(s)\n' });
    const bad = mkdtempSync(path.join(tmpdir(), 'tickwarden-cli-bad-'));
    writeFileSync(
      path.join(bad, 'x.yaml'),
      'team: x\nschedules:\n  - name: a\n    cron: "* *"\n    handler: { kind: nope }\n',
    );
    const result = cli('validate', bad);
    rmSync(bad, { recursive: true, force: true });
    expect(result.code).toBe(1);
    expect(result.err).toContain('x.yaml:4:11: schedules[0].cron');
    expect(result.err).toContain('x.yaml:5:22: schedules[0].handler.kind');
  });

  it('a reader that closes the pipe early (`| head`): exit 0, no stack trace', async () => {
    const child = spawn(process.execPath, [BIN, 'validate', dir], { env: { ...process.env, ...env } });
    // Closed before the CLI writes: its first line meets a closed pipe (EPIPE).
    child.stdout.destroy();
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect({ code, err }).toEqual({ code: 0, err: '' });
  });

  it('validate applies the http destination policy of its environment; a bad policy exits 2 naming the variable', () => {
    const hooks = mkdtempSync(path.join(tmpdir(), 'tickwarden-cli-http-'));
    writeFileSync(
      path.join(hooks, 'x.yaml'),
      'team: x\nschedules:\n  - name: a\n    cron: "0 * * * *"\n    handler: { kind: http, url: "https://hooks.example.org/a" }\n',
    );
    const allowed = cliWith({ TICKWARDEN_HTTP_ALLOW: '*.example.org' }, 'validate', hooks);
    const refused = cliWith({ TICKWARDEN_HTTP_DENY: 'hooks.example.org' }, 'validate', hooks);
    const badPolicy = cliWith({ TICKWARDEN_HTTP_DENY: '10.0.0.0/99' }, 'validate', hooks);
    rmSync(hooks, { recursive: true, force: true });
    expect(allowed).toMatchObject({ code: 0 });
    expect(refused.code).toBe(1);
    expect(refused.err).toContain(
      'x.yaml:3:1: schedules[0].handler.url: destination refused: host hooks.example.org is denied (TICKWARDEN_HTTP_DENY)',
    );
    expect(badPolicy.code).toBe(2);
    expect(badPolicy.err).toContain('TICKWARDEN_HTTP_DENY: entry "10.0.0.0/99"');
  });

  it('next: upcoming ticks in the schedule time zone, --json one object per line; bad arguments exit 2 with the usage', () => {
    const result = cli('next', dir, 'ops/nightly', '-n', '2');
    expect(result.code).toBe(0);
    expect(result.out.trim().split('\n')).toHaveLength(2);
    expect(result.out).toMatch(/^\d{4}-\d{2}-\d{2} 02:30:00 GMT\+[12]$/m);
    const json = cli('next', dir, 'ops/nightly', '--json', '--count', '3');
    expect(json.code).toBe(0);
    const ticks = json.out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(ticks).toHaveLength(3);
    for (const tick of ticks) {
      expect(tick).toMatchObject({
        schedule: 'ops/nightly',
        timezone: 'Europe/Berlin',
        tick: new Date(Number(tick['tickMs'])).toISOString(),
      });
      expect(tick['local']).toMatch(/^\d{4}-\d{2}-\d{2} 02:30:00 GMT\+[12]$/);
    }
    expect(ticks.map((t) => Number(t['tickMs']))).toEqual(ticks.map((t) => Number(t['tickMs'])).sort((a, b) => a - b));
    expect(cli('next', dir, 'ops/nightly', '-n', '0')).toMatchObject({ code: 2 });
    expect(cli('next', dir, 'ops/unknown')).toMatchObject({
      code: 2,
      out: '',
      err: 'tickwarden: no schedule "ops/unknown" (known: ops/every-second, ops/nightly)\n',
    });
    expect(cli('frobnicate')).toMatchObject({ code: 2 });
    expect(cli('status', '--bogus-flag')).toMatchObject({ code: 2 });
  });

  it('--help, help COMMAND and --version answer on stdout with exit 0; usage errors exit 2 on stderr with the usage', () => {
    const top = cli('--help');
    expect(top).toMatchObject({ code: 0, err: '' });
    expect(cli('-h').out).toBe(top.out);
    expect(cli('help').out).toBe(top.out);
    for (const command of ['validate', 'next', 'pause', 'resume', 'trigger', 'status'])
      expect(top.out).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(top.out).toContain('Exit codes:\n  0  done\n  1  the operation failed');
    expect(top.out).toMatch(/^ {2}2 {2}usage or config error/m);

    const status = cli('status', '--help');
    expect(status).toMatchObject({ code: 0, err: '' });
    expect(status.out).toMatch(
      /^usage: tickwarden status \[SCHEDULE\] \[-n COUNT\] \[--json\] \[--runs\] \[--actions\]\n/,
    );
    expect(status.out).toContain('--json');
    expect(status.out).toContain('Exit codes: 0 done; 1 ');
    expect(cli('help', 'status').out).toBe(status.out);
    expect(cli('status', '-h').out).toBe(status.out);
    // --help wins over everything else on the line, even without the environment.
    expect(cliWith({ TICKWARDEN_QUEUE_REDIS: '' }, 'trigger', 'x/y', '--help')).toMatchObject({
      code: 0,
      out: cli('help', 'trigger').out,
    });
    expect(cli('pause', '--help').out).toMatch(/^usage: tickwarden pause SCHEDULE \[--note TEXT\] \[--by NAME\]\n/);

    const rootVersion = (
      JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8')) as {
        version: string;
      }
    ).version;
    expect(cli('--version')).toMatchObject({
      code: 0,
      out: `tickwarden ${rootVersion} (Node.js ${process.version}, ${process.platform}-${process.arch})\n`,
    });

    const none = cli();
    expect(none).toMatchObject({ code: 2, out: '' });
    expect(none.err).toContain(top.out);
    const missing = cli('next', dir);
    expect(missing).toMatchObject({
      code: 2,
      out: '',
      err: 'tickwarden: next takes 2 argument(s) (PATH SCHEDULE), got 1\nusage: tickwarden next PATH SCHEDULE [-n COUNT] [--json]\nRun "tickwarden next --help" for more.\n',
    });
    expect(cli('help', 'frobnicate')).toMatchObject({ code: 2 });
    expect(cli('--json', 'status')).toMatchObject({ code: 2 });
    expect(cli('resume', 'a/b', 'c/d').code).toBe(2);
    expect(cli('pause', 'a/b', '--note').code).toBe(2);
  });

  it('every Redis command with its servers refused (closed ports): exit 1 at once with one line naming the variable and the servers, no ioredis output', async () => {
    const queueDown = { TICKWARDEN_QUEUE_REDIS: 'redis://:s3cret@127.0.0.1:1' };
    const results = await oneAtATime(
      [['status'], ['pause', 'ops/every-second'], ['resume', 'ops/every-second'], ['trigger', 'ops/nightly']],
      (command) => cliAsync(queueDown, ...command),
    );
    for (const { code, out, err, ms } of results) {
      expect({ code, out, err }).toEqual({
        code: 1,
        out: '',
        err: 'tickwarden: cannot reach the queue Redis (TICKWARDEN_QUEUE_REDIS, redis://:***@127.0.0.1:1): connect ECONNREFUSED 127.0.0.1:1\n',
      });
      expect(ms).toBeLessThan(5000);
    }
    // The queue Redis answers, the lock nodes do not.
    const locksDown = await cliAsync(
      { TICKWARDEN_LOCK_NODES: 'redis://:s3cret@127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3' },
      'trigger',
      'ops/nightly',
    );
    expect(locksDown).toMatchObject({ code: 1, out: '' });
    expect(locksDown.err).toBe(
      'tickwarden: cannot reach a quorum of the lock nodes (TICKWARDEN_LOCK_NODES: 127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3): 0 of 3 answered, 2 needed; ' +
        '127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1; 127.0.0.1:2: connect ECONNREFUSED 127.0.0.1:2; 127.0.0.1:3: connect ECONNREFUSED 127.0.0.1:3\n',
    );
    expect(locksDown.ms).toBeLessThan(5000);
  });

  it('every Redis command with its servers stopped (SIGSTOP: connections accepted, nothing answered): exit 1 within seconds naming what did not answer', async () => {
    const [stoppedLocks, stoppedQueue] = await Promise.all([
      startRedisNodes({ count: 3, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    const stopped = {
      TICKWARDEN_QUEUE_REDIS: stoppedQueue.urls[0] ?? '',
      TICKWARDEN_LOCK_NODES: stoppedLocks.urls.join(','),
    };
    const lockIds = stoppedLocks.nodes.map((node) => node.id);
    try {
      await Promise.all([
        stoppedQueue.nodes[0]?.pause(),
        stoppedLocks.nodes[1]?.pause(),
        stoppedLocks.nodes[2]?.pause(),
      ]);
      const commands = [
        ['status'],
        ['status', '--json'],
        ['pause', 'ops/every-second'],
        ['resume', 'ops/every-second'],
        ['trigger', 'ops/nightly'],
      ];
      // The queue Redis stopped; then (trigger) two of three lock nodes stopped, the queue Redis up.
      const queueResults = await oneAtATime(commands, (command) => cliAsync(stopped, ...command));
      const locksResult = await cliAsync(
        { TICKWARDEN_LOCK_NODES: stopped.TICKWARDEN_LOCK_NODES },
        'trigger',
        'ops/nightly',
      );
      for (const { code, out, err, ms } of queueResults) {
        expect({ code, out, err }).toEqual({
          code: 1,
          out: '',
          err: `tickwarden: cannot reach the queue Redis (TICKWARDEN_QUEUE_REDIS, ${stoppedQueue.urls[0]}): connected, but no answer within 3000 ms (server stopped or overloaded?)\n`,
        });
        expect(ms).toBeLessThan(8000);
      }
      expect(locksResult).toMatchObject({ code: 1, out: '' });
      expect(locksResult.err).toBe(
        `tickwarden: cannot reach a quorum of the lock nodes (TICKWARDEN_LOCK_NODES: ${lockIds.join(', ')}): 1 of 3 answered, 2 needed; ` +
          `${lockIds[1]}: connected, but no answer within 3000 ms (server stopped or overloaded?); ${lockIds[2]}: connected, but no answer within 3000 ms (server stopped or overloaded?)\n`,
      );
      expect(locksResult.ms).toBeLessThan(8000);

      // One lock node of three stopped: the trigger takes its lease on the other two, and says which one did not answer.
      await stoppedLocks.nodes[1]?.resume();
      const oneDown = await cliAsync(
        { TICKWARDEN_LOCK_NODES: stopped.TICKWARDEN_LOCK_NODES },
        'trigger',
        'ops/nightly',
      );
      expect(oneDown.code, oneDown.err).toBe(0);
      expect(oneDown.out).toMatch(/^triggered ops\/nightly: job ops\/nightly@manual-\d+\n$/);
      expect(oneDown.err).toBe(
        `tickwarden: warning: 1 of the lock nodes (TICKWARDEN_LOCK_NODES: ${lockIds.join(', ')}) not reached (a quorum of 2 answered): ${lockIds[2]}: connected, but no answer within 3000 ms (server stopped or overloaded?)\n`,
      );
      expect(oneDown.ms).toBeLessThan(8000);
    } finally {
      await Promise.all([...stoppedQueue.nodes, ...stoppedLocks.nodes].map((node) => node.resume()));
      await Promise.all([stoppedLocks.close(), stoppedQueue.close()]);
    }
  });

  it('pause stops every replica from firing, resume restarts it; trigger enqueues a run; status shows it all', async () => {
    const loaded = await loadConfig(dir);
    if (!loaded.ok) throw new Error('config');
    const outcomes: { outcome: TickOutcome; tickMs: number }[] = [];
    const redlock = new Redlock(locks.urls);
    const connection = new Redis(queue.urls[0] ?? '', { maxRetriesPerRequest: null });
    const scheduler = new Scheduler({
      replicaId: 'cli-test',
      redlock,
      queueConnection: connection,
      logger: pino({ level: 'silent' }),
      onOutcome: ({ outcome, scheduleId, tickMs }) =>
        scheduleId === 'ops/every-second' && outcomes.push({ outcome, tickMs }),
      // A short lead: the ticks contested before the pause come within a second.
      contestLeadMs: 700,
    });
    scheduler.setSchedules(loaded.config.schedules);
    scheduler.start();
    try {
      await waitUntil(() => outcomes.some((o) => o.outcome === 'enqueued'), 'a first enqueued tick', {
        timeoutMs: 5000,
      });
      expect(cli('pause', 'ops/every-second', '--note', 'maintenance', '--by', 'alice')).toMatchObject({
        code: 0,
        out: 'paused ops/every-second\n',
      });
      // Ticks contested before the pause (up to the lead ahead) were enqueued: their jobs end skipped-paused on a worker.
      const pausedAt = Date.now() + 1000;
      await waitUntil(
        () => outcomes.filter((o) => o.tickMs > pausedAt && o.outcome === 'skipped-paused').length >= 2,
        'paused ticks',
        { timeoutMs: 5000 },
      );
      expect(outcomes.filter((o) => o.tickMs > pausedAt && o.outcome === 'enqueued')).toEqual([]);
      expect(cli('status', 'ops/every-second').out).toContain('maintenance');
      expect(cli('resume', 'ops/every-second', '--note', 'done')).toMatchObject({
        code: 0,
        out: 'resumed ops/every-second\n',
      });
      const resumedAt = Date.now() + 1000;
      await waitUntil(
        () => outcomes.some((o) => o.tickMs > resumedAt && o.outcome === 'enqueued'),
        'ticks after resume',
        { timeoutMs: 5000 },
      );

      // Backfill the ticks the pause skipped: listed by a dry run, fired once each, and not again.
      const skipped = outcomes.filter((o) => o.outcome === 'skipped-paused').map((o) => o.tickMs);
      const range = [
        '--from',
        new Date(skipped[0] as number).toISOString(),
        '--to',
        new Date(skipped.at(-1) as number).toISOString(),
      ];
      const dry = cli('backfill', 'ops/every-second', ...range, '--dry-run');
      expect(dry.code).toBe(0);
      expect(dry.out.split('\n').filter((line) => line.endsWith('  would fire  skipped-paused'))).toHaveLength(
        skipped.length,
      );
      expect(dry.out).toMatch(new RegExp(`\\ndry run: ops/every-second: ${skipped.length} would fire, 0 skipped\\n$`));
      const fired = cli(
        'backfill',
        'ops/every-second',
        ...range,
        '--json',
        '--note',
        'after maintenance',
        '--by',
        'alice',
      );
      expect(fired.code).toBe(0);
      const ticks = fired.out
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { tickMs: number; action: string; jobId?: string });
      expect(ticks.filter((t) => t.action === 'fire').map((t) => t.tickMs)).toEqual(skipped);
      expect(ticks.every((t) => t.jobId === `ops/every-second@${t.tickMs}-backfill`)).toBe(true);
      expect(cli('backfill', 'ops/every-second', ...range).out).toMatch(
        new RegExp(`\\nops/every-second: 0 fired, ${skipped.length} skipped\\n$`),
      );
      expect(cli('backfill', 'ops/every-second', '--from', 'now-1h')).toMatchObject({
        code: 2,
        err: expect.stringMatching(
          /holds more than 100 ticks of ops\/every-second: narrow the range, or raise the maximum \(--max/,
        ),
      });
      expect(cli('backfill', 'ops/every-second', '--from', 'yesterday')).toMatchObject({
        code: 2,
        err: expect.stringMatching(/--from: "yesterday" is not an ISO 8601 time with a zone/),
      });
      expect(cli('backfill', 'ops/every-second')).toMatchObject({
        code: 2,
        err: expect.stringMatching(/backfill needs --from TIME/),
      });

      const triggered = cli('trigger', 'ops/nightly');
      expect(triggered.code).toBe(0);
      const jobId = /job (\S+)$/m.exec(triggered.out)?.[1] ?? '';
      expect(jobId).toMatch(/^ops\/nightly@manual-\d+$/);
      const q = new Queue('tickwarden-default', { connection });
      expect((await q.getJob(jobId))?.data.schedule).toBe('ops/nightly');
      await q.close();

      // A gap a starting replica found (tick-marks.test.ts records real ones): one line.
      // Hours ago, not a fixed date: the history keeps a schedule's records within its retention of the newest.
      const gap = { firstTickMs: Math.floor(Date.now() / 1000) * 1000 - 3 * 3_600_000, count: 4, atLeast: false };
      await new RedisReplicaStore(connection).record([
        {
          scheduleId: 'ops/nightly',
          keepMs: 86_400_000,
          retention: { keep: 20, maxAgeMs: 86_400_000 },
          record: {
            tickMs: gap.firstTickMs + 3000,
            outcome: 'missed',
            reason: 'no-replica',
            lagMs: 9000,
            jobId: undefined,
            replica: 'b0',
            gap,
          },
        },
      ]);
      const status = cli('status').out;
      expect(status).toContain(
        `  ${new Date(gap.firstTickMs).toISOString()} .. ${new Date(gap.firstTickMs + 3000).toISOString()}  missed  4 ticks while no replica ran  found by b0`,
      );
      expect(status).toContain('ops/nightly  30 2 * * * (Europe/Berlin)  active');
      expect(status).toMatch(/ops\/nightly[\s\S]*triggered {2}job (waiting|delayed)[\s\S]* {2}by cli/);
      // Newest tick first, not recording order: the gap (3 h ago) was recorded after the trigger (now).
      expect(status.indexOf('triggered  job')).toBeLessThan(status.indexOf('missed  4 ticks'));
      expect(status).toMatch(
        /ops\/every-second[\s\S]*enqueued {2}job (waiting|delayed) {2}(lag \d+ ms|\d+ ms ahead) {2}by cli-test/,
      );

      // The audit trail: who did what, newest first; without --by, <user>@<host>.
      expect(status).toMatch(
        /ops\/every-second[\s\S]*actions:\n {4}\S+ {2}backfill {2}by \S+@\S+ {2}\(\S+ \.\. \S+: 0 fired, \d+ skipped\)\n {4}\S+ {2}backfill {2}by alice: after maintenance {2}\(\S+ \.\. \S+: \d+ fired, 0 skipped\)\n {4}\S+ {2}resume {2}by \S+@\S+: done\n {4}\S+ {2}pause {2}by alice: maintenance/,
      );
      expect(status).toMatch(
        /ops\/nightly[\s\S]*actions:\n {4}\S+ {2}trigger {2}by \S+@\S+ {2}\(job ops\/nightly@manual-\d+\)/,
      );
      const actions = cli('status', 'ops/every-second', '--json', '--actions')
        .out.trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(actions.map((a) => [a['action'], a['note']])).toEqual([
        ['backfill', ''],
        ['backfill', 'after maintenance'],
        ['resume', 'done'],
        ['pause', 'maintenance'],
      ]);
      // The run history the workers write (apps/worker), as status shows it.
      const endedAtMs = Date.now();
      await new RunHistory(connection).append(
        'ops/nightly',
        {
          tickMs: endedAtMs - 2000,
          jobId: 'ops/nightly@1',
          outcome: 'failed',
          attempt: 1,
          worker: 'w-1',
          fence: 42,
          startedAtMs: endedAtMs - 1500,
          endedAtMs,
          exitCode: 3,
          error: 'boom',
        },
        { keep: 20, maxAgeMs: 86_400_000 },
      );
      expect(cli('status', 'ops/nightly').out).toMatch(
        /runs:\n {4}\S+ {2}failed {2}attempt 1 {2}1500 ms {2}exit 3 {2}fence 42 {2}on w-1 {2}boom/,
      );
      expect(JSON.parse(cli('status', 'ops/nightly', '--json', '--runs').out)).toMatchObject({
        schedule: 'ops/nightly',
        outcome: 'failed',
        exitCode: 3,
        error: 'boom',
      });
      expect(cli('status', '--runs')).toMatchObject({ code: 2 });

      // --json: the tick records only, one object per line, newest tick first, -n of them.
      const json = cli('status', 'ops/every-second', '--json', '-n', '3');
      expect(json.code).toBe(0);
      const records = json.out
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(records).toHaveLength(3);
      expect(
        records.every(
          (r) => r['schedule'] === 'ops/every-second' && r['tick'] === new Date(Number(r['tickMs'])).toISOString(),
        ),
      ).toBe(true);
      expect(records.map((r) => Number(r['tickMs']))).toEqual(
        records.map((r) => Number(r['tickMs'])).sort((a, b) => b - a),
      );
      expect(new Set(records.map((r) => r['outcome']))).toEqual(
        new Set(outcomes.filter((o) => records.some((r) => r['tickMs'] === o.tickMs)).map((o) => o.outcome)),
      );
      expect(cli('status', '--json', '-n', '10001')).toMatchObject({ code: 2 });

      // This host's clock 30 s ahead or behind: a triggered run is due now by the lock nodes' time, as the workers judge it.
      const jobs = new Queue('tickwarden-default', { connection });
      for (const offsetMs of [30_000, -30_000]) {
        const skewed = cliWith(skewedClockEnv(offsetMs), 'trigger', 'ops/nightly');
        expect(skewed.code, skewed.err).toBe(0);
        const skewedJob = await jobs.getJob(/job (\S+)$/m.exec(skewed.out)?.[1] ?? '');
        expect(Math.abs((skewedJob?.data as TickJobData).dueMs - Date.now()), `${offsetMs}`).toBeLessThan(5000);
      }
      await jobs.close();
    } finally {
      await scheduler.stop();
      await redlock.close();
      connection.disconnect();
    }
  });
});
