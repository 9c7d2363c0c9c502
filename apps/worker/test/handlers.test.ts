import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sleep, waitUntil } from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandGuard, HandlerError, runCommand, runHttp, runModule, type RunContext } from '../src/index.ts';
import { captureLogger, groupAlive, runContext, testLease } from './support.ts';

const abortReason = () => new Error('stop now');

describe('http handler', () => {
  let server: http.Server;
  let base: string;
  const seen: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
  let socketClosed = false;
  let held: http.IncomingMessage | undefined;

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      request.on('end', () => {
        seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body });
        if (request.url === '/ok') response.writeHead(204).end();
        else if (request.url === '/fail') response.writeHead(503, { 'content-type': 'text/plain' }).end(`${'x'.repeat(3000)}TAIL`);
        else if (request.url === '/hang') {
          held = request;
          request.socket.once('close', () => (socketClosed = true));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  const config = (url: string, overrides = {}) => ({ kind: 'http' as const, url, method: 'POST' as const, headers: { 'X-Team': 'a', 'Idempotency-Key': 'user-set' }, timeoutMs: 5000, ...overrides });

  it('POSTs the payload as JSON with the idempotency key, tick, schedule and fence headers; 2xx succeeds', async () => {
    const { logger } = captureLogger();
    const details = await runHttp(config(`${base}/ok`), runContext(new AbortController().signal, logger));
    expect(details['status']).toBe(204);
    const request = seen.find((r) => r.url === '/ok');
    expect(request?.method).toBe('POST');
    expect(JSON.parse(request?.body ?? '')).toEqual({ hello: 'world' });
    expect(request?.headers).toMatchObject({
      'content-type': 'application/json',
      'idempotency-key': 'team-a/job@1893499200000',
      'x-tickwarden-schedule': 'team-a/job',
      'x-tickwarden-tick': '2030-01-01T12:00:00.000Z',
      'x-tickwarden-fence': '1700000000000001',
      'x-team': 'a',
    });
  });

  it('credentials in the URL are sent as Basic auth, never in an error message', async () => {
    const { logger } = captureLogger();
    await runHttp(config(`${base.replace('http://', 'http://svc:p%40ss@')}/ok`), runContext(new AbortController().signal, logger));
    expect(seen.at(-1)?.headers['authorization']).toBe(`Basic ${Buffer.from('svc:p@ss').toString('base64')}`);
    const refused = await runHttp(config('http://svc:secret@127.0.0.1:1/ok'), runContext(new AbortController().signal, logger)).catch((e: unknown) => e);
    expect((refused as Error).message).toMatch(/^http request failed: /);
    expect(JSON.stringify(refused, Object.getOwnPropertyNames(refused))).not.toContain('secret');
  });

  it('a non-2xx status fails with the status and at most 1 KiB of the body', async () => {
    const { logger } = captureLogger();
    const error = await runHttp(config(`${base}/fail`), runContext(new AbortController().signal, logger)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HandlerError);
    const { details, message } = error as HandlerError;
    expect(details['status']).toBe(503);
    expect(message).toMatch(/^http 503 Service Unavailable: x+/);
    expect(Buffer.byteLength(String(details['body']))).toBeLessThanOrEqual(1024 + 3);
    expect(message).not.toContain('TAIL');
  });

  it('its own timeout fails the call', async () => {
    const { logger } = captureLogger();
    const error = await runHttp(config(`${base}/hang`, { timeoutMs: 200 }), runContext(new AbortController().signal, logger)).catch((e: unknown) => e);
    expect((error as Error).message).toBe('http request timed out after 200 ms');
    await waitUntil(() => socketClosed, 'the timed-out request socket to close');
  });

  it('an abort cancels the request: the server sees the socket close', async () => {
    socketClosed = false;
    held = undefined;
    const { logger } = captureLogger();
    const controller = new AbortController();
    const call = runHttp(config(`${base}/hang`), runContext(controller.signal, logger)).catch((e: unknown) => e);
    await waitUntil(() => held !== undefined, 'the request to arrive');
    const reason = abortReason();
    controller.abort(reason);
    expect(await call).toBe(reason);
    await waitUntil(() => socketClosed, 'the aborted request socket to close', { timeoutMs: 2000 });
  });
});

describe('command handler', () => {
  let dir: string;
  const guard = new CommandGuard({ logger: captureLogger().logger });
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-command-'));
    guard.start();
  });
  afterAll(async () => {
    await guard.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const guarded = { guard };
  const command = (script: string, killGraceMs = 300) => ({ kind: 'command' as const, argv: [process.execPath, '-e', script], cwd: dir, env: { EXTRA: 'yes' }, killGraceMs });

  it('runs without a shell: payload on stdin, the tick in TICKWARDEN_* variables (not the worker\'s own), output logged line by line; exit 0 succeeds', async () => {
    const { logger, records } = captureLogger();
    process.env['TICKWARDEN_QUEUE_REDIS'] = 'redis://:secret@queue:6379';
    const script = `
      let input = '';
      process.stdin.on('data', (c) => (input += c)).on('end', () => {
        const e = process.env;
        console.log(JSON.stringify({ input: JSON.parse(input), cwd: process.cwd(), vars: [e.TICKWARDEN_SCHEDULE, e.TICKWARDEN_TICK, e.TICKWARDEN_FENCE, e.TICKWARDEN_JOB_ID, e.TICKWARDEN_ATTEMPT, e.EXTRA, e.TICKWARDEN_QUEUE_REDIS ?? 'unset', typeof e.PATH] }));
        console.error('to stderr');
      });`;
    const details = await runCommand(command(script), runContext(new AbortController().signal, logger, { attempt: 2 }), guarded).finally(() => delete process.env['TICKWARDEN_QUEUE_REDIS']);
    expect(details['exitCode']).toBe(0);
    const stdout = records.find((r) => r['stream'] === 'stdout');
    expect(JSON.parse(String(stdout?.['msg']))).toEqual({
      input: { hello: 'world' },
      cwd: dir,
      vars: ['team-a/job', '2030-01-01T12:00:00.000Z', '1700000000000001', 'team-a/job@1893499200000', '2', 'yes', 'unset', 'string'],
    });
    expect(records.some((r) => r['stream'] === 'stderr' && r['msg'] === 'to stderr')).toBe(true);
  });

  it('a non-zero exit fails; a missing program fails to start', async () => {
    const { logger } = captureLogger();
    const failed = await runCommand(command('process.exit(3)'), runContext(new AbortController().signal, logger), guarded).catch((e: unknown) => e);
    expect((failed as HandlerError).message).toBe('command exited with code 3');
    expect((failed as HandlerError).details['exitCode']).toBe(3);
    const missing = await runCommand({ ...command(''), argv: ['/nonexistent/tickwarden-nope'] }, runContext(new AbortController().signal, logger), guarded).catch((e: unknown) => e);
    expect((missing as Error).message).toMatch(/^cannot start command "\/nonexistent\/tickwarden-nope": no executable file at \/nonexistent\/tickwarden-nope$/);
  });

  it('finds the program as execvp would: a path with a slash from cwd, a bare name on the command\'s PATH; a file that is not executable is not run', async () => {
    const { logger, records } = captureLogger();
    mkdirSync(path.join(dir, 'bin'), { recursive: true });
    writeFileSync(path.join(dir, 'bin', 'say-argv0'), '#!/bin/sh\necho "argv0 $0 $1"\n', { mode: 0o755 });
    writeFileSync(path.join(dir, 'bin', 'not-executable'), '#!/bin/sh\necho ran\n', { mode: 0o644 });
    const run = (argv: string[], env: Record<string, string> = {}) =>
      runCommand({ kind: 'command', argv, cwd: dir, env, killGraceMs: 300 }, runContext(new AbortController().signal, logger), guarded);
    expect((await run(['./bin/say-argv0', 'relative']))['exitCode']).toBe(0);
    expect((await run(['say-argv0', 'bare'], { PATH: `/nonexistent:${path.join(dir, 'bin')}` }))['exitCode']).toBe(0);
    expect(records.filter((r) => r['stream'] === 'stdout').map((r) => r['msg'])).toEqual([`argv0 ${path.join(dir, 'bin', 'say-argv0')} relative`, `argv0 ${path.join(dir, 'bin', 'say-argv0')} bare`]);
    const bare = await run(['say-argv0']).catch((e: unknown) => e);
    expect((bare as HandlerError).message).toBe('cannot start command "say-argv0": no executable file named "say-argv0" on PATH');
    expect((bare as HandlerError).details['code']).toBe('COMMAND_NOT_FOUND');
    const plain = await run(['bin/not-executable']).catch((e: unknown) => e);
    expect((plain as HandlerError).message).toBe(`cannot start command "bin/not-executable": no executable file at ${path.join(dir, 'bin', 'not-executable')}`);
  });

  it('caps output at 1,000 lines and 4 KiB per line, then one "truncated" line', async () => {
    const { logger, records } = captureLogger();
    const script = `process.stdout.write('y'.repeat(10000) + '\\n'); for (let i = 0; i < 1500; i++) process.stdout.write('line ' + i + '\\n');`;
    await runCommand(command(script), runContext(new AbortController().signal, logger), guarded);
    const lines = records.filter((r) => r['stream'] === 'stdout');
    expect(lines).toHaveLength(1001);
    expect(lines[0]?.['lineTruncated']).toBe(true);
    expect(String(lines[0]?.['msg'])).toHaveLength(4096);
    expect(lines[999]?.['msg']).toBe('line 998');
    expect(lines[1000]?.['msg']).toMatch(/^output truncated/);
  });

  it('abort: SIGTERM to the whole process group, SIGKILL after the kill grace: the group is really gone', async () => {
    const { logger, records } = captureLogger();
    // The command and a grandchild in its group both ignore SIGTERM.
    const script = `
      const { spawn } = require('node:child_process');
      process.on('SIGTERM', () => console.log('parent got SIGTERM'));
      const child = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"], { stdio: 'ignore' });
      console.log('pgid ' + process.pid + ' grandchild ' + child.pid);
      setInterval(() => {}, 1000);`;
    const controller = new AbortController();
    const started = performance.now();
    const call = runCommand(command(script, 400), runContext(controller.signal, logger), guarded).catch((e: unknown) => e);
    await waitUntil(() => records.some((r) => String(r['msg']).startsWith('pgid ')), 'the command to start');
    const [, pgid, , grandchild] = String(records.find((r) => String(r['msg']).startsWith('pgid '))?.['msg']).split(' ');
    expect(groupAlive(Number(pgid))).toBe(true);
    const reason = abortReason();
    controller.abort(reason);
    expect(await call).toBe(reason);
    const elapsed = performance.now() - started;
    expect(groupAlive(Number(pgid))).toBe(false);
    expect(() => process.kill(Number(grandchild), 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    expect(records.some((r) => r['msg'] === 'parent got SIGTERM')).toBe(true);
    expect(elapsed).toBeLessThan(5000);
  });

  it('a command that honours SIGTERM stops at once on abort', async () => {
    const { logger, records } = captureLogger();
    const controller = new AbortController();
    const call = runCommand(command("console.log('pid ' + process.pid); setInterval(() => {}, 1000)", 10_000), runContext(controller.signal, logger), guarded).catch((e: unknown) => e);
    await waitUntil(() => records.some((r) => String(r['msg']).startsWith('pid ')), 'the command to start');
    const pgid = Number(String(records.find((r) => String(r['msg']).startsWith('pid '))?.['msg']).slice(4));
    const at = performance.now();
    controller.abort(abortReason());
    await call;
    expect(performance.now() - at).toBeLessThan(2000);
    expect(groupAlive(pgid)).toBe(false);
  });

  it('processes left behind in the group when the command exits are stopped before the run ends', async () => {
    const { logger, records } = captureLogger();
    const script = `
      const { spawn } = require('node:child_process');
      spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' }).unref();
      console.log('pgid ' + process.pid);`;
    const details = await runCommand(command(script), runContext(new AbortController().signal, logger), guarded);
    expect(details['exitCode']).toBe(0);
    const pgid = Number(String(records.find((r) => String(r['msg']).startsWith('pgid '))?.['msg']).slice(5));
    expect(groupAlive(pgid)).toBe(false);
    expect(records.some((r) => String(r['msg']).startsWith('command exited leaving processes'))).toBe(true);
  });
});

describe('command handler: bound to the lease', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-command-lease-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const command = (script: string, killGraceMs: number) => ({ kind: 'command' as const, argv: [process.execPath, '-e', script], cwd: dir, env: {}, killGraceMs });
  const heartbeats = (name: string) => readFileSync(path.join(dir, name), 'utf8').trim().split('\n').map(Number);
  /** A command appending Date.now() to `name` every 20 ms and printing its pid; `ignoreTerm` makes it survive SIGTERM. */
  const beating = (name: string, ignoreTerm: boolean) =>
    `${ignoreTerm ? "process.on('SIGTERM', () => console.log('got SIGTERM'));" : ''}
     const beat = () => require('node:fs').appendFileSync(${JSON.stringify(path.join(dir, name))}, Date.now() + '\\n');
     console.log('pid ' + process.pid); beat(); setInterval(beat, 20);`;
  // Never kills: these tests see the worker's own kills (command-guard.test.ts tests the guard's).
  const passiveGuard = { ready: () => Promise.resolve(), watch: () => undefined, watching: () => Promise.resolve(), unwatch: () => undefined } as unknown as CommandGuard;
  const pidOf = (records: Record<string, unknown>[]) => Number(String(records.find((r) => String(r['msg']).startsWith('pid '))?.['msg']).slice(4));

  it('an aborted command that ignores SIGTERM is SIGKILLed before its lease validity ends, although its kill grace is longer', async () => {
    const { logger, records } = captureLogger();
    const controller = new AbortController();
    const lease = testLease(1500);
    const call = runCommand(command(beating('ignores-term.txt', true), 20_000), runContext(controller.signal, logger, { lease }), { guard: passiveGuard }).catch((e: unknown) => e);
    await waitUntil(() => records.some((r) => String(r['msg']).startsWith('pid ')), 'the command to start');
    // The lease's validity end on the wall clock the command writes its heartbeats with.
    const validityEndsAt = Date.now() + lease.msLeft();
    const reason = abortReason();
    controller.abort(reason);
    expect(await call).toBe(reason);
    expect(records.some((r) => r['msg'] === 'got SIGTERM')).toBe(true);
    expect(groupAlive(pidOf(records))).toBe(false);
    expect(Math.max(...heartbeats('ignores-term.txt'))).toBeLessThan(validityEndsAt);
  });

  it('a command still running when its lease validity ends is SIGKILLed, abort or not; each extension moves that end', async () => {
    const { logger, records } = captureLogger();
    // Extended every 150 ms to 400 ms ahead: a 1.2 s command outlives the first validity end and still succeeds.
    const extended = testLease(400);
    const extender = setInterval(() => extended.extended(400), 150);
    try {
      const details = await runCommand(command('setTimeout(() => {}, 1200)', 60_000), runContext(new AbortController().signal, logger, { lease: extended }), { guard: passiveGuard });
      expect(details['exitCode']).toBe(0);
    } finally {
      clearInterval(extender);
    }
    // Never extended: killed before the end of its validity, without an abort.
    const lease = testLease(600);
    const validityEndsAt = Date.now() + lease.msLeft();
    const error = await runCommand(command(beating('not-extended.txt', true), 20_000), runContext(new AbortController().signal, logger, { lease }), { guard: passiveGuard }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HandlerError);
    expect((error as HandlerError).details['exitSignal']).toBe('SIGKILL');
    expect(records.some((r) => r['msg'] === 'got SIGTERM')).toBe(false);
    expect(groupAlive(pidOf(records))).toBe(false);
    expect(Math.max(...heartbeats('not-extended.txt'))).toBeLessThan(validityEndsAt);
  });

  it('no command starts once its lease could lapse first: not at spawn, nor when this worker was paused while telling the guard', async () => {
    const { logger } = captureLogger();
    const marker = path.join(dir, 'too-late.txt');
    const writesMarker = command(`require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`, 1000);
    // 50 ms of validity left: within the kill margin already.
    const atSpawn = await runCommand(writesMarker, runContext(new AbortController().signal, logger, { lease: testLease(50) }), { guard: passiveGuard }).catch((e: unknown) => e);
    expect((atSpawn as HandlerError).details['code']).toBe('LEASE_ENDING_BEFORE_START');
    // Valid at spawn, but the guard is told only after the validity ended (as when the worker is SIGSTOPped there).
    const slowGuard = { ...passiveGuard, watching: () => sleep(400) } as unknown as CommandGuard;
    const atGate = await runCommand(writesMarker, runContext(new AbortController().signal, logger, { lease: testLease(300) }), { guard: slowGuard }).catch((e: unknown) => e);
    expect((atGate as HandlerError).details['code']).toBe('LEASE_ENDING_BEFORE_START');
    await sleep(200);
    expect(existsSync(marker)).toBe(false);
  });

  it('no command starts without a running guard: the run fails with COMMAND_GUARD_UNAVAILABLE and nothing is spawned', async () => {
    const { logger } = captureLogger();
    const idle = new CommandGuard({ logger, readyTimeoutMs: 200 });
    const marker = path.join(dir, 'never.txt');
    const error = await runCommand(command(`require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`, 1000), runContext(new AbortController().signal, logger), { guard: idle }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HandlerError);
    expect((error as HandlerError).details['code']).toBe('COMMAND_GUARD_UNAVAILABLE');
    await sleep(300);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('module handler', () => {
  let dir: string;
  let configFile: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-module-'));
    configFile = path.join(dir, 'teams', 'team-a.yaml');
    mkdirSync(path.join(dir, 'teams', 'jobs'), { recursive: true });
    writeFileSync(
      path.join(dir, 'teams', 'jobs', 'jobs.mjs'),
      `import { writeFileSync } from 'node:fs';
       export async function record(ctx) {
         ctx.logger.info('hello from the module', { fence: ctx.fence });
         ctx.logger.warn({ n: 2 }, 'pino style');
         console.log('console line');
         writeFileSync(ctx.payload.out, JSON.stringify({ ...ctx, signal: typeof ctx.signal.aborted, logger: typeof ctx.logger.info }));
       }
       export async function fail() { throw new RangeError('boom'); }
       export async function cooperative(ctx) {
         ctx.logger.info('waiting');
         await new Promise((resolve, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)));
       }
       export function busy(ctx) { ctx.logger.info('spinning'); for (;;) {} }
       export const notAFunction = 42;
       export default async function () { setInterval(() => {}, 1000); }`,
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const config = (exportName: string, killGraceMs = 300) => ({ kind: 'module' as const, path: './jobs/jobs.mjs', exportName, killGraceMs });
  const context = (signal: AbortSignal, overrides: Partial<RunContext> = {}) => {
    const { logger, records } = captureLogger();
    return { context: runContext(signal, logger, overrides), records };
  };

  it('imports the module relative to the config file and calls the named export with the run context; its logger writes to the worker logs', async () => {
    const out = path.join(dir, 'out.json');
    const { context: ctx, records } = context(new AbortController().signal, { payload: { out } });
    await runModule(config('record'), ctx, configFile);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual({
      schedule: 'team-a/job',
      tick: '2030-01-01T12:00:00.000Z',
      tickMs: Date.UTC(2030, 0, 1, 12),
      fence: 1_700_000_000_000_001,
      jobId: 'team-a/job@1893499200000',
      attempt: 1,
      payload: { out },
      signal: 'boolean',
      logger: 'function',
    });
    expect(records).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ stream: 'log', msg: 'hello from the module', fence: 1_700_000_000_000_001, level: 30 }),
        expect.objectContaining({ stream: 'log', msg: 'pino style', n: 2, level: 40 }),
        expect.objectContaining({ stream: 'stdout', msg: 'console line' }),
      ]),
    );
  });

  it('a throwing export fails the run; a missing export fails it too; a default export that leaves timers running still ends', async () => {
    const failed = await runModule(config('fail'), context(new AbortController().signal).context, configFile).catch((e: unknown) => e);
    expect((failed as Error).message).toBe('module RangeError: boom');
    const missing = await runModule(config('notAFunction'), context(new AbortController().signal).context, configFile).catch((e: unknown) => e);
    expect((missing as Error).message).toMatch(/has no function export "notAFunction" \(found number\)/);
    await expect(runModule(config('default'), context(new AbortController().signal).context, configFile)).resolves.toBeDefined();
  });

  it('a module still running when its lease validity ends is terminated, abort or not; each extension moves that end', async () => {
    const extended = testLease(400);
    const extender = setInterval(() => extended.extended(400), 150);
    try {
      // The default export ends at once (its timers end with the thread): extensions never cut a finished call short.
      await expect(runModule(config('default', 60_000), context(new AbortController().signal, { lease: extended }).context, configFile)).resolves.toBeDefined();
    } finally {
      clearInterval(extender);
    }
    // Never extended, never aborted, a 60 s kill grace: only the lease's end can stop this busy loop.
    const { context: ctx, records } = context(new AbortController().signal, { lease: testLease(500) });
    const error = await runModule(config('busy', 60_000), ctx, configFile).catch((e: unknown) => e);
    expect((error as HandlerError).message).toMatch(/terminated/);
    expect(records.some((r) => r['msg'] === 'lease validity ends: terminating the module thread')).toBe(true);
  });

  it('abort reaches the module as its signal; a cooperative module stops at once', async () => {
    const controller = new AbortController();
    const { context: ctx, records } = context(controller.signal);
    const call = runModule(config('cooperative', 10_000), ctx, configFile).catch((e: unknown) => e);
    await waitUntil(() => records.some((r) => r['msg'] === 'waiting'), 'the module to start');
    const at = performance.now();
    const reason = abortReason();
    controller.abort(reason);
    expect(await call).toBe(reason);
    expect(performance.now() - at).toBeLessThan(1000);
  });

  it('a module that ignores its signal (a busy loop) is terminated after the kill grace', async () => {
    const controller = new AbortController();
    const { context: ctx, records } = context(controller.signal);
    const call = runModule(config('busy', 300), ctx, configFile).catch((e: unknown) => e);
    await waitUntil(() => records.some((r) => r['msg'] === 'spinning'), 'the module to spin');
    await sleep(100);
    const at = performance.now();
    const reason = abortReason();
    controller.abort(reason);
    expect(await call).toBe(reason);
    const took = performance.now() - at;
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(2000);
    expect(records.some((r) => String(r['msg']).startsWith('module ignored the abort'))).toBe(true);
  });
});
