import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  freePort,
  ManagedProcess,
  startAppProcess,
  startRedisNodes,
  waitUntil,
  type RedisNodes,
} from '@tickwarden/testkit';
import { Redlock } from '@tickwarden/redlock';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CommandGuard,
  RemoteLauncher,
  runCommand,
  type CommandHandlerConfig,
  type HandlerError,
} from '../src/index.ts';
import {
  captureLogger,
  enqueueTick,
  groupAlive,
  nodeCommand,
  runContext,
  shortLeaseSchedule,
  settledJob,
  testLease,
} from './support.ts';

const LAUNCHER = fileURLToPath(new URL('../src/launcher-main.ts', import.meta.url));
const WORKER = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const SOURCE = '--conditions=@tickwarden/source';
const command = (script: string, killGraceMs = 500): CommandHandlerConfig =>
  nodeCommand(script, { killGraceMs }) as CommandHandlerConfig;

describe('the launcher: programs started in another process, over its socket', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-launcher-'));
  const socketPath = path.join(dir, 'launcher.sock');
  let launcher: ManagedProcess;
  const guard = new CommandGuard({ logger: captureLogger().logger });
  const remote = new RemoteLauncher(socketPath);

  beforeAll(async () => {
    launcher = ManagedProcess.start({
      name: 'launcher',
      command: process.execPath,
      args: [SOURCE, LAUNCHER],
      env: { TICKWARDEN_LAUNCHER_SOCKET: socketPath },
    });
    await launcher.waitForLine((line) => line.includes('"launcher listening"'), 'the launcher to listen');
  });
  afterAll(async () => {
    await launcher.stop('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs a command as a child of the launcher: payload on stdin, output logged, exit code, the run variables only', async () => {
    const { logger, records } = captureLogger();
    const script = `let input = ''; process.stdin.on('data', (c) => (input += c)).on('end', () => { console.log('ppid', process.ppid, 'input', input, 'env', Object.keys(process.env).filter((k) => k.startsWith('TICKWARDEN_')).sort().join(',')); process.exit(3); });`;
    const run = runCommand(command(script), runContext(new AbortController().signal, logger), {
      guard,
      launcher: remote,
    });
    await expect(run).rejects.toMatchObject({ message: 'command exited with code 3' });
    const [line] = records.filter((r) => r['stream'] === 'stdout').map((r) => String(r['msg']));
    expect(line).toBe(
      `ppid ${launcher.pid} input {"hello":"world"} env TICKWARDEN_ATTEMPT,TICKWARDEN_FENCE,TICKWARDEN_JOB_ID,TICKWARDEN_SCHEDULE,TICKWARDEN_TICK`,
    );
    expect(guard.running).toBe(false);
  });

  it('an abort stops the group (SIGTERM, SIGKILL after the kill grace)', async () => {
    const controller = new AbortController();
    const { logger, records } = captureLogger();
    const run = runCommand(
      command(`process.on('SIGTERM', () => {}); console.log('ignoring SIGTERM'); setInterval(() => {}, 1000);`, 300),
      runContext(controller.signal, logger),
      { guard, launcher: remote },
    );
    run.catch(() => undefined);
    // Aborted once Node runs its handler (its startup can take a second): SIGTERM before that would kill it at once.
    await waitUntil(() => records.some((r) => r['msg'] === 'ignoring SIGTERM'), 'the command to ignore SIGTERM');
    const abortedAt = performance.now();
    controller.abort(new Error('stop'));
    await expect(run).rejects.toThrow('stop');
    expect(performance.now() - abortedAt).toBeGreaterThan(250);
    expect(performance.now() - abortedAt).toBeLessThan(2700);
  });

  it("the group is SIGKILLed by the launcher's guard at its deadline (the worker stopped moving it), and at once when the worker's connection closes", async () => {
    const sleeping = {
      executable: process.execPath,
      args: ['-e', 'setInterval(() => {}, 1000)'],
      cwd: undefined,
      env: {},
      reports: false,
    };
    const signal = new AbortController().signal;
    const timed = await remote.launch(sleeping, 400, signal);
    timed.openGate();
    const from = performance.now();
    expect(await timed.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(performance.now() - from).toBeGreaterThan(250);
    expect(performance.now() - from).toBeLessThan(2000);
    // The kill's log line comes over the launcher's stdout, which may be read after the exit came over its socket.
    await waitUntil(
      () => launcher.records.some((r) => r['code'] === 'COMMAND_GUARD_KILLED' && r['pgid'] === timed.pgid),
      "the guard's kill record",
    );
    timed.release();

    const left = await remote.launch(sleeping, 60_000, signal);
    left.openGate();
    const pgid = left.pgid as number;
    await waitUntil(() => groupAlive(pgid), 'the program to run');
    left.release();
    await waitUntil(() => !groupAlive(pgid), 'the group to be killed', { timeoutMs: 2000 });
  });

  it('SIGTERM (the pod stops, the worker drains): the launcher exits 0 only once its running program ended', async () => {
    const drainSocket = path.join(dir, 'drain.sock');
    const draining = ManagedProcess.start({
      name: 'draining',
      command: process.execPath,
      args: [SOURCE, LAUNCHER],
      env: { TICKWARDEN_LAUNCHER_SOCKET: drainSocket },
    });
    await draining.waitForLine((line) => line.includes('"launcher listening"'), 'the launcher to listen');
    const program = await new RemoteLauncher(drainSocket).launch(
      {
        executable: process.execPath,
        args: ['-e', 'setTimeout(() => {}, 800)'],
        cwd: undefined,
        env: {},
        reports: false,
      },
      60_000,
      new AbortController().signal,
    );
    program.openGate();
    const from = performance.now();
    draining.signal('SIGTERM');
    expect(await program.exited).toEqual({ code: 0, signal: null });
    program.release();
    expect((await draining.exited).code).toBe(0);
    expect(performance.now() - from).toBeGreaterThan(600);
  });

  it('--check says whether a launcher answers on the socket; a run without one is refused as LAUNCHER_UNAVAILABLE', async () => {
    const check = (socket: string) =>
      ManagedProcess.start({
        name: 'check',
        command: process.execPath,
        args: [SOURCE, LAUNCHER, '--check'],
        env: { TICKWARDEN_LAUNCHER_SOCKET: socket },
      }).exited;
    expect((await check(socketPath)).code).toBe(0);
    expect((await check(path.join(dir, 'none.sock'))).code).toBe(1);
    const nobody = new RemoteLauncher(path.join(dir, 'none.sock'), { readyTimeoutMs: 300 });
    const error = (await runCommand(
      command(''),
      runContext(new AbortController().signal, captureLogger().logger, { lease: testLease(60_000) }),
      { guard, launcher: nobody },
    ).catch((e: unknown) => e)) as HandlerError;
    expect(error.details['code']).toBe('LAUNCHER_UNAVAILABLE');
  });
});

/**
 * The point of the launcher: a job program must not read the worker's credentials. Run as root
 * (CI is), the test starts the launcher as `nobody` with `setpriv`, as the pod runs it as another
 * UID; a worker process holds a password in its environment, as the Deployment gives it.
 */
describe.runIf(process.getuid?.() === 0)(
  "a job program cannot read the worker's credentials (launcher under another user)",
  () => {
    const SECRET = `s3cret-${process.pid}-never-in-a-job`;
    const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-launcher-uid-'));
    const configDir = path.join(dir, 'config');
    const socketDir = path.join(dir, 'socket');
    let locks: RedisNodes;
    let queue: RedisNodes;
    let connection: Redis;
    let scheduler: Redlock;
    const processes: ManagedProcess[] = [];

    beforeAll(async () => {
      mkdirSync(configDir);
      mkdirSync(socketDir);
      chmodSync(dir, 0o755);
      chmodSync(socketDir, 0o777);
      [locks, queue] = await Promise.all([
        startRedisNodes({ count: 3, aof: false }),
        startRedisNodes({ count: 1, aof: false }),
      ]);
      connection = new Redis(queue.urls[0] as string, { maxRetriesPerRequest: null });
      scheduler = new Redlock(locks.urls, { nodeTimeoutMs: 500 });
      // Every way a program could look: its own environment, every other process's environ and argv (its own argv
      // holds the string it looks for), and the worker's memory.
      const probe = `const fs = require('node:fs'); const found = [];
      if (JSON.stringify(process.env).includes(${JSON.stringify(SECRET)})) found.push('own env');
      for (const pid of fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p) && p !== String(process.pid))) {
        for (const file of ['environ', 'cmdline']) { try { if (fs.readFileSync('/proc/' + pid + '/' + file, 'latin1').includes(${JSON.stringify(SECRET)})) found.push(pid + '/' + file); } catch {} }
      }
      for (const pid of fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p) && p !== String(process.pid))) {
        try { if (fs.readFileSync('/proc/' + pid + '/cmdline', 'latin1').includes('worker/src/main.ts')) { fs.closeSync(fs.openSync('/proc/' + pid + '/mem', 'r')); found.push(pid + '/mem'); } } catch {}
      }
      console.log('probe found: ' + (found.join(',') || 'nothing'));`;
      writeFileSync(
        path.join(configDir, 'probe.mjs'),
        `import { execFileSync } from 'node:child_process';\nexport async function run(ctx) { ctx.logger.info(execFileSync(process.execPath, ['-e', ${JSON.stringify(probe)}]).toString().trim()); }\n`,
      );
      writeFileSync(
        path.join(configDir, 'team.yaml'),
        JSON.stringify({
          team: 'uid',
          schedules: [
            {
              name: 'command',
              cron: '0 0 1 1 *',
              leaseTtl: '5s',
              queue: 'uid',
              handler: { kind: 'command', argv: [process.execPath, '-e', probe] },
            },
            {
              name: 'module',
              cron: '0 0 1 1 *',
              leaseTtl: '5s',
              queue: 'uid',
              handler: { kind: 'module', path: './probe.mjs', export: 'run' },
            },
          ],
        }),
      );
      chmodSync(configDir, 0o755);
    });
    afterAll(async () => {
      await Promise.all(processes.map((p) => p.stop('SIGKILL')));
      connection.disconnect();
      await scheduler.close();
      await Promise.all([locks.close(), queue.close()]);
      rmSync(dir, { recursive: true, force: true });
    });

    async function startWorker(name: string, env: Record<string, string>): Promise<ManagedProcess> {
      const worker = startAppProcess({
        role: 'worker',
        name,
        main: WORKER,
        configDir,
        lockNodes: locks.urls,
        queueRedis: queue.urls[0],
        httpPort: await freePort(),
        env: { LOCK_REDIS_PASSWORD_0: SECRET, ...env },
      });
      processes.push(worker);
      await worker.waitForLine((line) => line.includes('"http listening"'), 'start');
      return worker;
    }

    /** Runs both schedules' ticks on `worker` and returns what each probe printed. */
    async function probe(worker: ManagedProcess): Promise<string[]> {
      const found: string[] = [];
      for (const name of ['command', 'module']) {
        const schedule = shortLeaseSchedule(`uid/${name}`, nodeCommand(''), { queue: 'uid', leaseTtlMs: 5000 });
        const { jobId } = await enqueueTick(scheduler, connection, schedule, { data: { payload: null } });
        await settledJob(connection, 'uid', jobId);
        await waitUntil(
          () => worker.records.some((r) => r['jobId'] === jobId && String(r['msg']).startsWith('probe found')),
          `the ${name} probe's line`,
        );
        found.push(
          `${name}: ${String(worker.records.find((r) => r['jobId'] === jobId && String(r['msg']).startsWith('probe found'))?.['msg'])}`,
        );
      }
      return found;
    }

    it("started by the worker itself (no launcher) a program finds the password in the worker's environ; through a launcher under another user, by no route", async () => {
      const local = await startWorker('local-worker', {});
      expect((await probe(local)).every((line) => / found: .*\d+\/environ/.test(line))).toBe(true);
      await local.stop('SIGTERM');

      const socketPath = path.join(socketDir, 'launcher.sock');
      const launcher = ManagedProcess.start({
        name: 'launcher',
        command: 'setpriv',
        args: ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, SOURCE, LAUNCHER],
        env: { TICKWARDEN_LAUNCHER_SOCKET: socketPath },
      });
      processes.push(launcher);
      await launcher.waitForLine((line) => line.includes('"launcher listening"'), 'the launcher to listen');
      const isolated = await startWorker('isolated-worker', { TICKWARDEN_LAUNCHER_SOCKET: socketPath });
      expect(await probe(isolated)).toEqual(['command: probe found: nothing', 'module: probe found: nothing']);
    });
  },
);
