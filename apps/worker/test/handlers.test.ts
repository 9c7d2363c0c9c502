import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sleep, waitUntil } from '@tickwarden/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_DESTINATIONS, parseHttpDestinations } from '@tickwarden/config';
import {
  CommandGuard,
  HandlerError,
  HTTP_DESTINATION_REFUSED,
  runCommand,
  runHttp,
  runModule,
  type HttpHandlerConfig,
  type RunContext,
} from '../src/index.ts';
import { captureLogger, groupAlive, runContext, runningMembers, testLease } from './support.ts';

const abortReason = () => new Error('stop now');

/**
 * A guard that never kills: these tests see the worker's own kills (command-guard.test.ts tests the
 * guard's, process.test.ts the guard's with the worker paused).
 */
const passiveGuard = {
  ready: () => Promise.resolve(),
  watch: () => undefined,
  watching: () => Promise.resolve(),
  unwatch: () => undefined,
} as unknown as CommandGuard;

/** Gives this (worker) process credentials as a Deployment does; returns what takes them away again. */
function withWorkerSecrets(): () => void {
  const secrets = {
    TICKWARDEN_QUEUE_REDIS: 'redis://:queue-secret@queue:6379',
    LOCK_REDIS_PASSWORD: 'lock-secret',
    QUEUE_REDIS_PASSWORD: 'queue-secret',
    PLATFORM_API_TOKEN: 'token-secret',
  };
  Object.assign(process.env, secrets);
  return () => {
    for (const name of Object.keys(secrets)) delete process.env[name];
  };
}

/** A job's variables: the run's TICKWARDEN_* ones, the schedule's own (`extra`), and the allowlisted ones a program expects. */
function expectOnlyJobEnv(names: readonly string[], extra: readonly string[] = []): void {
  const run = ['TICKWARDEN_ATTEMPT', 'TICKWARDEN_FENCE', 'TICKWARDEN_JOB_ID', 'TICKWARDEN_SCHEDULE', 'TICKWARDEN_TICK'];
  expect(names.filter((name) => name.startsWith('TICKWARDEN_')).sort()).toEqual(run);
  const others = names.filter((name) => !name.startsWith('TICKWARDEN_') && !extra.includes(name));
  // PWD, SHLVL and _ are the gate's (sh) own.
  expect(
    others.every((name) =>
      /^(PATH|HOME|USER|LOGNAME|SHELL|TMPDIR|TZ|LANG|LANGUAGE|LC_[A-Z]+|SSL_CERT_FILE|SSL_CERT_DIR|NODE_EXTRA_CA_CERTS|PWD|SHLVL|_)$/.test(
        name,
      ),
    ),
    others.join(' '),
  ).toBe(true);
  expect(names).toContain('PATH');
}

describe('http handler', () => {
  let server: http.Server;
  let base: string;
  const seen: { method: string; url: string; headers: http.IncomingHttpHeaders; body: string }[] = [];
  let socketClosed = false;
  let held: http.IncomingMessage | undefined;
  let other: http.Server;
  let otherBase: string;
  const stolen: string[] = [];

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      request.on('end', () => {
        seen.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body });
        if (request.url === '/ok') response.writeHead(204).end();
        else if (request.url === '/moved') response.writeHead(307, { location: '/ok' }).end();
        else if (request.url === '/see-other') response.writeHead(303, { location: `${base}/ok` }).end();
        else if (request.url === '/loop') response.writeHead(302, { location: '/loop' }).end();
        else if (request.url === '/elsewhere') response.writeHead(308, { location: `${otherBase}/steal` }).end();
        else if (request.url === '/fail')
          response.writeHead(503, { 'content-type': 'text/plain' }).end(`${'x'.repeat(3000)}TAIL`);
        else if (request.url === '/hang') {
          held = request;
          request.socket.once('close', () => (socketClosed = true));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // Another origin (another port): what a redirect must never reach with the body or headers.
    other = http.createServer((request, response) => {
      stolen.push(request.url ?? '');
      response.writeHead(200).end();
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    otherBase = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    for (const s of [server, other]) {
      s.closeAllConnections();
      s.close();
    }
  });

  const config = (url: string, overrides: Partial<HttpHandlerConfig> = {}): HttpHandlerConfig => ({
    kind: 'http',
    url,
    method: 'POST',
    headers: { 'X-Team': 'a', 'Idempotency-Key': 'user-set' },
    timeoutMs: 5000,
    redirects: 'none',
    ...overrides,
  });

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
    await runHttp(
      config(`${base.replace('http://', 'http://svc:p%40ss@')}/ok`),
      runContext(new AbortController().signal, logger),
    );
    expect(seen.at(-1)?.headers['authorization']).toBe(`Basic ${Buffer.from('svc:p@ss').toString('base64')}`);
    const refused = await runHttp(
      config('http://svc:secret@127.0.0.1:1/ok'),
      runContext(new AbortController().signal, logger),
    ).catch((e: unknown) => e);
    expect((refused as Error).message).toMatch(/^http request failed: /);
    expect(JSON.stringify(refused, Object.getOwnPropertyNames(refused))).not.toContain('secret');
  });

  it('a non-2xx status fails with the status and at most 1 KiB of the body', async () => {
    const { logger } = captureLogger();
    const error = await runHttp(config(`${base}/fail`), runContext(new AbortController().signal, logger)).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HandlerError);
    const { details, message } = error as HandlerError;
    expect(details['status']).toBe(503);
    expect(message).toMatch(/^http 503 Service Unavailable: x+/);
    expect(Buffer.byteLength(String(details['body']))).toBeLessThanOrEqual(1024 + 3);
    expect(message).not.toContain('TAIL');
  });

  it('its own timeout fails the call', async () => {
    const { logger } = captureLogger();
    const error = await runHttp(
      config(`${base}/hang`, { timeoutMs: 200 }),
      runContext(new AbortController().signal, logger),
    ).catch((e: unknown) => e);
    expect((error as Error).message).toBe('http request timed out after 200 ms');
    await waitUntil(() => socketClosed, 'the timed-out request socket to close');
  });

  it('started() comes right before the request is sent; a run aborted before it sends nothing and is not started', async () => {
    const { logger } = captureLogger();
    let started = 0;
    await runHttp(
      config(`${base}/ok`),
      runContext(new AbortController().signal, logger, {
        started: () => {
          started += 1;
        },
      }),
    );
    expect(started).toBe(1);
    const sent = seen.length;
    const aborted = new AbortController();
    aborted.abort(new Error('lease lost'));
    const error = await runHttp(
      config(`${base}/ok`),
      runContext(aborted.signal, logger, {
        started: () => {
          started += 1;
        },
      }),
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ message: 'lease lost' });
    expect(started).toBe(1);
    await sleep(100);
    expect(seen).toHaveLength(sent);
  });

  it('a header from a Secret is read from the mounted file at run time; one that is not mounted fails the run naming Secret and key, before any request', async () => {
    const { logger, records } = captureLogger();
    const secrets = mkdtempSync(path.join(tmpdir(), 'tickwarden-secrets-'));
    mkdirSync(path.join(secrets, 'team-a-api'));
    writeFileSync(path.join(secrets, 'team-a-api', 'token'), 's3cret-token\n');
    const withToken = config(`${base}/ok`, { headers: { 'X-Api-Token': { secret: 'team-a-api', key: 'token' } } });
    await runHttp(withToken, runContext(new AbortController().signal, logger), { secretsDir: secrets });
    expect(seen.at(-1)?.headers['x-api-token']).toBe('s3cret-token');
    const sent = seen.length;
    let started = 0;
    const missing = config(`${base}/ok`, { headers: { 'X-Api-Token': { secret: 'team-a-api', key: 'other' } } });
    const error = await runHttp(
      missing,
      runContext(new AbortController().signal, logger, {
        started: () => {
          started += 1;
        },
      }),
      { secretsDir: secrets },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HandlerError);
    expect((error as HandlerError).message).toBe(
      `cannot read X-Api-Token from Secret team-a-api, key other (${path.join(secrets, 'team-a-api', 'other')}): ENOENT`,
    );
    expect((error as HandlerError).details).toMatchObject({
      code: 'SECRET_UNAVAILABLE',
      secret: 'team-a-api',
      key: 'other',
    });
    expect(started).toBe(0);
    expect(seen).toHaveLength(sent);
    expect(JSON.stringify(records)).not.toContain('s3cret-token');
    rmSync(secrets, { recursive: true, force: true });
  });

  it('redirects are not followed by default: a 3xx fails the run naming where it pointed', async () => {
    const { logger } = captureLogger();
    const error = await runHttp(config(`${base}/moved`), runContext(new AbortController().signal, logger)).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(HandlerError);
    expect((error as HandlerError).message).toBe(`http 307: redirect to ${base}/ok not followed (redirects: none)`);
    expect((error as HandlerError).details).toMatchObject({ status: 307, location: `${base}/ok` });
  });

  it('redirects: same-origin follows redirects to the configured origin (303 as a GET), at most 5, and never sends anything to another origin', async () => {
    const { logger } = captureLogger();
    const sameOrigin = { redirects: 'same-origin' as const };
    const before = seen.length;
    expect(
      await runHttp(config(`${base}/moved`, sameOrigin), runContext(new AbortController().signal, logger)),
    ).toMatchObject({ status: 204, redirects: 1 });
    expect(seen.slice(before).map((r) => [r.method, r.url, r.body])).toEqual([
      ['POST', '/moved', '{"hello":"world"}'],
      ['POST', '/ok', '{"hello":"world"}'],
    ]);
    await runHttp(config(`${base}/see-other`, sameOrigin), runContext(new AbortController().signal, logger));
    expect(seen.at(-1)).toMatchObject({ method: 'GET', url: '/ok', body: '' });
    const loop = await runHttp(
      config(`${base}/loop`, sameOrigin),
      runContext(new AbortController().signal, logger),
    ).catch((e: unknown) => e);
    expect((loop as HandlerError).message).toBe(
      `http 302: redirect to ${base}/loop not followed (more than 5 redirects)`,
    );
    const away = await runHttp(
      config(`${base}/elsewhere`, { ...sameOrigin, headers: { 'X-Api-Token': 'team-secret' } }),
      runContext(new AbortController().signal, logger),
    ).catch((e: unknown) => e);
    expect((away as HandlerError).message).toBe(`http 308: redirect to ${otherBase}/steal not followed (not ${base})`);
    await sleep(100);
    expect(stolen).toEqual([]);
  });

  it('destinations: link-local (cloud metadata) is refused by default before the run starts; a name is checked on the addresses it resolves to when connecting', async () => {
    const { logger } = captureLogger();
    const port = new URL(base).port;
    const refusal = async (url: string, httpDestinations = DEFAULT_HTTP_DESTINATIONS) => {
      let started = 0;
      const before = seen.length;
      const error = await runHttp(
        config(url),
        runContext(new AbortController().signal, logger, {
          started: () => {
            started += 1;
          },
        }),
        { httpDestinations },
      ).catch((e: unknown) => e);
      expect(seen.length - before).toBe(0);
      return { error: error as HandlerError, started };
    };
    // Every spelling of the metadata address is the same host to the URL parser.
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://2852039166/',
      'http://[::ffff:169.254.169.254]/',
      'http://[fe80::1]/',
    ]) {
      const { error, started } = await refusal(url);
      expect(error).toBeInstanceOf(HandlerError);
      expect(error.message).toMatch(/^http destination refused: address \S+ is link-local/);
      expect(error.details).toMatchObject({ code: HTTP_DESTINATION_REFUSED });
      expect(started).toBe(0);
    }
    // A name passes the check on the URL; the addresses it resolves to are checked as the connection is made.
    const denyLoopback = parseHttpDestinations(undefined, '127.0.0.0/8, ::1/128').value;
    const viaName = await refusal(`http://localhost:${port}/ok`, denyLoopback);
    expect(viaName.error.message).toMatch(
      /^http destination refused: address (127\.0\.0\.1|::1) \(localhost\) is denied \(TICKWARDEN_HTTP_DENY\)$/,
    );
    expect(viaName.started).toBe(1);
    // An allow list: what it names is reached (only through its allowed addresses), the rest refused.
    const onlyLoopbackV4 = parseHttpDestinations('127.0.0.1/32', undefined).value;
    expect(
      await runHttp(config(`http://localhost:${port}/ok`), runContext(new AbortController().signal, logger), {
        httpDestinations: onlyLoopbackV4,
      }),
    ).toMatchObject({ status: 204 });
    const byName = parseHttpDestinations('*.example.com', undefined).value;
    expect((await refusal(`${base}/ok`, byName)).error.message).toBe(
      'http destination refused: address 127.0.0.1 is not in TICKWARDEN_HTTP_ALLOW',
    );
    expect((await refusal(`http://localhost:${port}/ok`, byName)).error.message).toBe(
      'http destination refused: host localhost is not in TICKWARDEN_HTTP_ALLOW',
    );
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
  const command = (script: string, killGraceMs = 300) => ({
    kind: 'command' as const,
    argv: [process.execPath, '-e', script],
    cwd: dir,
    env: { EXTRA: 'yes' },
    killGraceMs,
  });

  it("runs without a shell: payload on stdin, the tick in TICKWARDEN_* variables (not the worker's own), output logged line by line; exit 0 succeeds", async () => {
    const { logger, records } = captureLogger();
    const restore = withWorkerSecrets();
    const script = `
      let input = '';
      process.stdin.on('data', (c) => (input += c)).on('end', () => {
        const e = process.env;
        console.log(JSON.stringify({ input: JSON.parse(input), cwd: process.cwd(), vars: [e.TICKWARDEN_SCHEDULE, e.TICKWARDEN_TICK, e.TICKWARDEN_FENCE, e.TICKWARDEN_JOB_ID, e.TICKWARDEN_ATTEMPT, e.EXTRA, e.TICKWARDEN_QUEUE_REDIS ?? 'unset', typeof e.PATH], names: Object.keys(e).sort() }));
        console.error('to stderr');
      });`;
    const details = await runCommand(
      command(script),
      runContext(new AbortController().signal, logger, { attempt: 2 }),
      guarded,
    ).finally(restore);
    expect(details['exitCode']).toBe(0);
    const stdout = records.find((r) => r['stream'] === 'stdout');
    expect(JSON.parse(String(stdout?.['msg']))).toEqual({
      input: { hello: 'world' },
      cwd: dir,
      vars: [
        'team-a/job',
        '2030-01-01T12:00:00.000Z',
        '1700000000000001',
        'team-a/job@1893499200000',
        '2',
        'yes',
        'unset',
        'string',
      ],
      names: expect.any(Array),
    });
    // Nothing of the worker's environment but the allowlist: no credential, whatever its name.
    expectOnlyJobEnv(JSON.parse(String(stdout?.['msg'])).names as string[], ['EXTRA']);
    expect(records.some((r) => r['stream'] === 'stderr' && r['msg'] === 'to stderr')).toBe(true);
  });

  it('an environment value from a Secret reaches the command, read at run time', async () => {
    const { logger, records } = captureLogger();
    const secrets = mkdtempSync(path.join(tmpdir(), 'tickwarden-secrets-'));
    mkdirSync(path.join(secrets, 'team-a-db'));
    writeFileSync(path.join(secrets, 'team-a-db', 'password'), 'db-s3cret');
    const script = 'console.log(process.env.DB_PASSWORD === "db-s3cret" ? "has it" : "missing")';
    const withSecret = { ...command(script), env: { DB_PASSWORD: { secret: 'team-a-db', key: 'password' } } };
    await runCommand(withSecret, runContext(new AbortController().signal, logger), { ...guarded, secretsDir: secrets });
    expect(records.find((r) => r['stream'] === 'stdout')?.['msg']).toBe('has it');
    writeFileSync(path.join(secrets, 'team-a-db', 'password'), 'rotated');
    await runCommand(
      { ...command('console.log(process.env.DB_PASSWORD)'), env: withSecret.env },
      runContext(new AbortController().signal, logger),
      { ...guarded, secretsDir: secrets },
    );
    expect(records.filter((r) => r['stream'] === 'stdout').at(-1)?.['msg']).toBe('rotated');
    rmSync(secrets, { recursive: true, force: true });
  });

  it('a non-zero exit fails; a missing program fails to start', async () => {
    const { logger } = captureLogger();
    const failed = await runCommand(
      command('process.exit(3)'),
      runContext(new AbortController().signal, logger),
      guarded,
    ).catch((e: unknown) => e);
    expect((failed as HandlerError).message).toBe('command exited with code 3');
    expect((failed as HandlerError).details['exitCode']).toBe(3);
    const missing = await runCommand(
      { ...command(''), argv: ['/nonexistent/tickwarden-nope'] },
      runContext(new AbortController().signal, logger),
      guarded,
    ).catch((e: unknown) => e);
    expect((missing as Error).message).toMatch(
      /^cannot start command "\/nonexistent\/tickwarden-nope": no executable file at \/nonexistent\/tickwarden-nope$/,
    );
  });

  it("finds the program as execvp would: a path with a slash from cwd, a bare name on the command's PATH; a file that is not executable is not run", async () => {
    const { logger, records } = captureLogger();
    mkdirSync(path.join(dir, 'bin'), { recursive: true });
    writeFileSync(path.join(dir, 'bin', 'say-argv0'), '#!/bin/sh\necho "argv0 $0 $1"\n', { mode: 0o755 });
    writeFileSync(path.join(dir, 'bin', 'not-executable'), '#!/bin/sh\necho ran\n', { mode: 0o644 });
    const run = (argv: string[], env: Record<string, string> = {}) =>
      runCommand(
        { kind: 'command', argv, cwd: dir, env, killGraceMs: 300 },
        runContext(new AbortController().signal, logger),
        guarded,
      );
    expect((await run(['./bin/say-argv0', 'relative']))['exitCode']).toBe(0);
    expect((await run(['say-argv0', 'bare'], { PATH: `/nonexistent:${path.join(dir, 'bin')}` }))['exitCode']).toBe(0);
    expect(records.filter((r) => r['stream'] === 'stdout').map((r) => r['msg'])).toEqual([
      `argv0 ${path.join(dir, 'bin', 'say-argv0')} relative`,
      `argv0 ${path.join(dir, 'bin', 'say-argv0')} bare`,
    ]);
    const bare = await run(['say-argv0']).catch((e: unknown) => e);
    expect((bare as HandlerError).message).toBe(
      'cannot start command "say-argv0": no executable file named "say-argv0" on PATH',
    );
    expect((bare as HandlerError).details['code']).toBe('COMMAND_NOT_FOUND');
    const plain = await run(['bin/not-executable']).catch((e: unknown) => e);
    expect((plain as HandlerError).message).toBe(
      `cannot start command "bin/not-executable": no executable file at ${path.join(dir, 'bin', 'not-executable')}`,
    );
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
    const call = runCommand(command(script, 400), runContext(controller.signal, logger), guarded).catch(
      (e: unknown) => e,
    );
    await waitUntil(() => records.some((r) => String(r['msg']).startsWith('pgid ')), 'the command to start');
    const [, pgid, , grandchild] = String(records.find((r) => String(r['msg']).startsWith('pgid '))?.['msg']).split(
      ' ',
    );
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
    const call = runCommand(
      command("console.log('pid ' + process.pid); setInterval(() => {}, 1000)", 10_000),
      runContext(controller.signal, logger),
      guarded,
    ).catch((e: unknown) => e);
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
  const command = (script: string, killGraceMs: number) => ({
    kind: 'command' as const,
    argv: [process.execPath, '-e', script],
    cwd: dir,
    env: {},
    killGraceMs,
  });
  const heartbeats = (name: string) => readFileSync(path.join(dir, name), 'utf8').trim().split('\n').map(Number);
  /**
   * A shell command printing its pid (its group's id), then appending the wall time in ms to `name`
   * every 20 ms; `ignoreTerm` makes it survive SIGTERM. A shell starts within milliseconds, where
   * Node can take most of a short lease on a loaded machine.
   */
  const beating = (name: string, ignoreTerm: boolean, killGraceMs: number) => ({
    ...command('', killGraceMs),
    argv: [
      '/bin/sh',
      '-c',
      `${ignoreTerm ? "trap 'echo got SIGTERM' TERM; " : ''}echo pid $$; ` +
        `while :; do /bin/date +%s%3N >> '${path.join(dir, name)}'; /bin/sleep 0.02; done`,
    ],
  });
  const pidOf = (records: Record<string, unknown>[]) =>
    Number(String(records.find((r) => String(r['msg']).startsWith('pid '))?.['msg']).slice(4));
  /**
   * Awaits `call` and says how late this process's timers ran meanwhile, ms. The kill is a timer
   * here (the guard, the second one, is passive in these tests): a heartbeat may follow the
   * validity end by as much as a loaded machine held this process back, and by no more.
   */
  async function timersLate<T>(call: Promise<T>): Promise<{ value: T; lateMs: number }> {
    const delay = monitorEventLoopDelay({ resolution: 10 });
    delay.enable();
    try {
      return { value: await call, lateMs: delay.max / 1e6 };
    } finally {
      delay.disable();
    }
  }

  it('an aborted command that ignores SIGTERM is SIGKILLed before its lease validity ends, although its kill grace is longer', async () => {
    const { logger, records } = captureLogger();
    const controller = new AbortController();
    const lease = testLease(1500);
    const call = runCommand(
      beating('ignores-term.txt', true, 20_000),
      runContext(controller.signal, logger, { lease }),
      { guard: passiveGuard },
    ).catch((e: unknown) => e);
    await waitUntil(() => records.some((r) => String(r['msg']).startsWith('pid ')), 'the command to start');
    // The lease's validity end on the wall clock the command writes its heartbeats with.
    const validityEndsAt = Date.now() + lease.msLeft();
    const reason = abortReason();
    controller.abort(reason);
    const { value, lateMs } = await timersLate(call);
    expect(value).toBe(reason);
    expect(records.some((r) => r['msg'] === 'got SIGTERM')).toBe(true);
    // Running members, not zombies: the shell's killed children are reparented, and their reaper may be slow.
    expect(pidOf(records)).toBeGreaterThan(1);
    expect(runningMembers(pidOf(records))).toEqual([]);
    expect(Math.max(...heartbeats('ignores-term.txt'))).toBeLessThan(validityEndsAt + lateMs);
  });

  it('a command still running when its lease validity ends is SIGKILLed, abort or not; each extension moves that end', async () => {
    const { logger, records } = captureLogger();
    // Extended every 150 ms to 1 s ahead: a 1.6 s command outlives the first validity end and still succeeds.
    const extended = testLease(1000);
    const extender = setInterval(() => extended.extended(1000), 150);
    try {
      const details = await runCommand(
        command('setTimeout(() => {}, 1600)', 60_000),
        runContext(new AbortController().signal, logger, { lease: extended }),
        { guard: passiveGuard },
      );
      expect(details['exitCode']).toBe(0);
    } finally {
      clearInterval(extender);
    }
    // Never extended: killed before the end of its validity, without an abort.
    const lease = testLease(600);
    const validityEndsAt = Date.now() + lease.msLeft();
    const { value: error, lateMs } = await timersLate(
      runCommand(
        beating('not-extended.txt', true, 20_000),
        runContext(new AbortController().signal, logger, { lease }),
        {
          guard: passiveGuard,
        },
      ).catch((e: unknown) => e),
    );
    expect(error).toBeInstanceOf(HandlerError);
    expect((error as HandlerError).details['exitSignal']).toBe('SIGKILL');
    expect(records.some((r) => r['msg'] === 'got SIGTERM')).toBe(false);
    expect(pidOf(records)).toBeGreaterThan(1);
    expect(runningMembers(pidOf(records))).toEqual([]);
    expect(Math.max(...heartbeats('not-extended.txt'))).toBeLessThan(validityEndsAt + lateMs);
  });

  it('no command starts once its lease could lapse first: not at spawn, nor when this worker was paused while telling the guard', async () => {
    const { logger } = captureLogger();
    const marker = path.join(dir, 'too-late.txt');
    const writesMarker = command(`require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`, 1000);
    // 50 ms of validity left: within the kill margin already.
    let started = 0;
    const counted = (overrides: Partial<RunContext> = {}): RunContext =>
      runContext(new AbortController().signal, logger, {
        ...overrides,
        started: () => {
          started += 1;
        },
      });
    const atSpawn = await runCommand(writesMarker, counted({ lease: testLease(50) }), { guard: passiveGuard }).catch(
      (e: unknown) => e,
    );
    expect((atSpawn as HandlerError).details['code']).toBe('LEASE_ENDING_BEFORE_START');
    // Valid at spawn, but the guard is told only after the validity ended (as when the worker is SIGSTOPped there).
    const slowGuard = { ...passiveGuard, watching: () => sleep(400) } as unknown as CommandGuard;
    const atGate = await runCommand(writesMarker, counted({ lease: testLease(300) }), { guard: slowGuard }).catch(
      (e: unknown) => e,
    );
    expect((atGate as HandlerError).details['code']).toBe('LEASE_ENDING_BEFORE_START');
    await sleep(200);
    expect(existsSync(marker)).toBe(false);
    // Not started: the worker puts such a run back instead of failing it.
    expect(started).toBe(0);
    await runCommand(writesMarker, counted(), { guard: passiveGuard });
    expect(existsSync(marker)).toBe(true);
    expect(started).toBe(1);
  });

  it('no command starts without a running guard: the run fails with COMMAND_GUARD_UNAVAILABLE and nothing is spawned', async () => {
    const { logger } = captureLogger();
    const idle = new CommandGuard({ logger, readyTimeoutMs: 200 });
    const marker = path.join(dir, 'never.txt');
    const error = await runCommand(
      command(`require('node:fs').writeFileSync(${JSON.stringify(marker)}, 'ran')`, 1000),
      runContext(new AbortController().signal, logger),
      { guard: idle },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HandlerError);
    expect((error as HandlerError).details['code']).toBe('COMMAND_GUARD_UNAVAILABLE');
    await sleep(300);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('module handler', () => {
  let dir: string;
  let configFile: string;
  const guard = new CommandGuard({ logger: captureLogger().logger });
  beforeAll(() => {
    guard.start();
    dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-module-'));
    configFile = path.join(dir, 'teams', 'team-a.yaml');
    mkdirSync(path.join(dir, 'teams', 'jobs'), { recursive: true });
    writeFileSync(
      path.join(dir, 'teams', 'jobs', 'jobs.mjs'),
      `import { spawn } from 'node:child_process';
       import { writeFileSync } from 'node:fs';
       export async function record(ctx) {
         ctx.logger.info('hello from the module', { fence: ctx.fence });
         ctx.logger.warn({ n: 2 }, 'pino style');
         console.log('console line');
         writeFileSync(ctx.payload.out, JSON.stringify({ ...ctx, signal: typeof ctx.signal.aborted, logger: typeof ctx.logger.info }));
         writeFileSync(ctx.payload.out + '.env', JSON.stringify(Object.keys(process.env).sort()));
       }
       export async function fail() { throw new RangeError('boom'); }
       export async function crash() {
         setTimeout(() => { throw new SyntaxError('late'); }, 10);
         await new Promise((resolve) => setTimeout(resolve, 5000));
       }
       export async function cooperative(ctx) {
         ctx.logger.info('waiting');
         await new Promise((resolve, reject) => ctx.signal.addEventListener('abort', () => {
           ctx.logger.info('aborted', { reason: ctx.signal.reason.name });
           reject(ctx.signal.reason);
         }));
       }
       export function busy(ctx) { ctx.logger.info('spinning'); for (;;) {} }
       export function leaves(ctx) {
         const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
         child.unref();
         ctx.logger.info('pids', { pid: process.pid, child: child.pid });
         console.log('last line');
       }
       export async function lingers() { await new Promise((resolve) => setTimeout(resolve, 1600)); }
       export const notAFunction = 42;
       export default async function () { setInterval(() => {}, 1000); }`,
    );
  });
  afterAll(async () => {
    await guard.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const guarded = { guard };
  const config = (exportName: string, killGraceMs = 300) => ({
    kind: 'module' as const,
    path: './jobs/jobs.mjs',
    exportName,
    killGraceMs,
  });
  const context = (signal: AbortSignal, overrides: Partial<RunContext> = {}) => {
    const { logger, records } = captureLogger();
    return { context: runContext(signal, logger, overrides), records };
  };

  it('imports the module relative to the config file and calls the named export with the run context; its logger writes to the worker logs', async () => {
    const out = path.join(dir, 'out.json');
    const { context: ctx, records } = context(new AbortController().signal, { payload: { out } });
    const restore = withWorkerSecrets();
    const details = await runModule(config('record'), ctx, configFile, guarded).finally(restore);
    expect(details).toEqual({ moduleMs: expect.any(Number), outputLines: 3 });
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
    // The run's variables only: none of the worker's own settings (they carry the Redis URLs and their passwords).
    expectOnlyJobEnv(JSON.parse(readFileSync(`${out}.env`, 'utf8')) as string[]);
    expect(records).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          stream: 'log',
          msg: 'hello from the module',
          fence: 1_700_000_000_000_001,
          level: 30,
        }),
        expect.objectContaining({ stream: 'log', msg: 'pino style', n: 2, level: 40 }),
        expect.objectContaining({ stream: 'stdout', msg: 'console line' }),
      ]),
    );
  });

  it('a throwing export fails the run; a missing export fails it too; a default export that leaves timers running still ends', async () => {
    const runExport = (exportName: string) =>
      runModule(config(exportName), context(new AbortController().signal).context, configFile, guarded);
    const failed = await runExport('fail').catch((e: unknown) => e);
    expect((failed as Error).message).toBe('module RangeError: boom');
    expect((failed as HandlerError).details).toEqual({ errorName: 'RangeError' });
    expect((failed as Error).stack).toContain('jobs.mjs');
    const missing = await runExport('notAFunction').catch((e: unknown) => e);
    expect((missing as Error).message).toMatch(/has no function export "notAFunction" \(found number\)/);
    await expect(runExport('default')).resolves.toBeDefined();
    const crashed = await runExport('crash').catch((e: unknown) => e);
    expect((crashed as Error).message).toBe('module process crashed: SyntaxError: late');
  });

  it('each call runs in a process group of its own, gone when the run ends: what the module leaves behind is stopped; its last output is logged', async () => {
    const { context: ctx, records } = context(new AbortController().signal);
    await runModule(config('leaves'), ctx, configFile, guarded);
    const { pid, child } = records.find((r) => r['msg'] === 'pids') as { pid: number; child: number };
    expect(pid).not.toBe(process.pid);
    expect(groupAlive(pid)).toBe(false);
    expect(() => process.kill(child, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    expect(records.some((r) => r['stream'] === 'stdout' && r['msg'] === 'last line')).toBe(true);
    expect(
      records.some((r) => String(r['msg']).startsWith('module process exited leaving processes in its group')),
    ).toBe(true);
  });

  it('a module still running when its lease validity ends is killed, abort or not; each extension moves that end', async () => {
    // Extended every 150 ms to 1 s ahead (a stalled test process must not let it lapse): a 1.6 s call outlives
    // the first validity end and still succeeds.
    const extended = testLease(1000);
    const extender = setInterval(() => extended.extended(1000), 150);
    try {
      await expect(
        runModule(
          config('lingers', 60_000),
          context(new AbortController().signal, { lease: extended }).context,
          configFile,
          { guard: passiveGuard },
        ),
      ).resolves.toBeDefined();
    } finally {
      clearInterval(extender);
    }
    // Never extended, never aborted, a 60 s kill grace: only the lease's end can stop this busy loop.
    const { context: ctx, records } = context(new AbortController().signal, { lease: testLease(500) });
    const error = await runModule(config('busy', 60_000), ctx, configFile, { guard: passiveGuard }).catch(
      (e: unknown) => e,
    );
    expect((error as HandlerError).message).toMatch(/^module process killed: its lease validity was ending/);
    expect((error as HandlerError).details).toMatchObject({ exitSignal: 'SIGKILL', killed: 'lease-end' });
    expect(records.some((r) => r['msg'] === "lease validity ends: killing the module's process group")).toBe(true);
  });

  it('abort reaches the module as its signal; a cooperative module stops at once', async () => {
    const controller = new AbortController();
    const { context: ctx, records } = context(controller.signal);
    const call = runModule(config('cooperative', 10_000), ctx, configFile, guarded).catch((e: unknown) => e);
    await waitUntil(() => records.some((r) => r['msg'] === 'waiting'), 'the module to start');
    const at = performance.now();
    const reason = abortReason();
    controller.abort(reason);
    expect(await call).toBe(reason);
    expect(performance.now() - at).toBeLessThan(1000);
    expect(records.find((r) => r['msg'] === 'aborted')).toMatchObject({ stream: 'log', reason: 'AbortError' });
  });

  it('a module that ignores its signal (a busy loop) is killed after the kill grace', async () => {
    const controller = new AbortController();
    const { context: ctx, records } = context(controller.signal);
    const call = runModule(config('busy', 300), ctx, configFile, guarded).catch((e: unknown) => e);
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
