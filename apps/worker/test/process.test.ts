import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ScheduleConfig } from '@tickwarden/config';
import { leaseResource, tickFence } from '@tickwarden/contracts';
import { Redlock, resourceKeys, type Lease } from '@tickwarden/redlock';
import {
  freePort,
  ManagedProcess,
  sleep,
  startAppProcess,
  startRedisNodes,
  waitUntil,
  runOnBrokenConfig,
  type RedisNodes,
} from '@tickwarden/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  enqueueTick,
  groupAlive,
  nodeCommand,
  processRunning,
  runningMembers,
  shortLeaseSchedule,
  settledJob,
} from './support.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const FIXTURE = fileURLToPath(new URL('./fixtures/worker-process.ts', import.meta.url));

describe('worker as an OS process', () => {
  let locks: RedisNodes;
  let queueNodes: RedisNodes;
  let connection: Redis;
  let scheduler: Redlock;
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-worker-proc-'));
  const configDir = path.join(dir, 'config');
  mkdirSync(configDir);
  const processes: ManagedProcess[] = [];

  beforeAll(async () => {
    [locks, queueNodes] = await Promise.all([
      startRedisNodes({ count: 5, aof: false }),
      startRedisNodes({ count: 1, aof: false }),
    ]);
    connection = new Redis(queueNodes.urls[0] as string, { maxRetriesPerRequest: null });
    scheduler = new Redlock(locks.urls, { nodeTimeoutMs: 500 });
  });
  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    connection.disconnect();
    await scheduler.close();
    await Promise.all([locks.close(), queueNodes.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  const file = (name: string) => path.join(dir, name);
  const lines = (name: string) => (existsSync(file(name)) ? readFileSync(file(name), 'utf8').trim().split('\n') : []);
  /** A command that appends "start <fence> <ms> <pid>", waits `ms`, then appends "end <fence> <ms>". */
  const recordedSleep = (name: string, ms: number) =>
    nodeCommand(
      `const fs = require('node:fs'); const f = ${JSON.stringify(file(name))}; const fence = process.env.TICKWARDEN_FENCE;
       fs.appendFileSync(f, ['start', fence, Date.now(), process.pid].join(' ') + '\\n');
       setTimeout(() => fs.appendFileSync(f, ['end', fence, Date.now()].join(' ') + '\\n'), ${ms});`,
      { killGraceMs: 1000 },
    );
  /** A command that appends "pid <pid>", then its wall clock (ms) every 50 ms until killed. */
  const heartbeat = (name: string) =>
    nodeCommand(
      `const fs = require('node:fs'); const f = ${JSON.stringify(file(name))};
       fs.appendFileSync(f, 'pid ' + process.pid + '\\n');
       setInterval(() => fs.appendFileSync(f, Date.now() + '\\n'), 50);`,
      { killGraceMs: 1000 },
    );
  /** The pid of the command guard a worker process started. */
  const guardPid = (worker: ManagedProcess) =>
    Number(worker.records.find((r) => r['msg'] === 'command guard started')?.['guardPid']);

  /** Writes one team file (JSON is YAML): the schedules as the config file format spells them. */
  function writeTeam(
    name: string,
    schedules: { name: string; handler: Record<string, unknown>; leaseTtl?: string; queue: string }[],
  ): void {
    writeFileSync(
      path.join(configDir, `${name}.yaml`),
      JSON.stringify({ team: name, schedules: schedules.map((s) => ({ cron: '0 0 1 1 *', leaseTtl: '2s', ...s })) }),
    );
  }
  const commandYaml = (schedule: ScheduleConfig) => {
    const handler = schedule.handler as Extract<ScheduleConfig['handler'], { kind: 'command' }>;
    return { kind: 'command', argv: handler.argv, killGrace: `${handler.killGraceMs}ms` };
  };

  async function startWorker(
    name: string,
    env: Record<string, string> = {},
  ): Promise<{ worker: ManagedProcess; port: number }> {
    const port = await freePort();
    const worker = startAppProcess({
      role: 'worker',
      name,
      main: MAIN,
      configDir,
      lockNodes: locks.urls,
      queueRedis: queueNodes.urls[0],
      httpPort: port,
      logLevel: 'info',
      env,
    });
    processes.push(worker);
    await worker.waitForLine((line) => line.includes('"http listening"'), 'start');
    return { worker, port };
  }

  const runStarted = (worker: ManagedProcess, jobId: string) =>
    worker.waitForLine(
      (line) => line.includes('"run started"') && line.includes(`"jobId":"${jobId}"`),
      `run of ${jobId} started`,
    );

  it('SIGTERM: a running command job finishes within the grace, then the process exits 0; probes and metrics answer before', async () => {
    const schedule = shortLeaseSchedule('graceful/job', recordedSleep('graceful.txt', 1500), {
      queue: 'graceful',
      leaseTtlMs: 2000,
    });
    writeTeam('graceful', [{ name: 'job', handler: commandYaml(schedule), queue: 'graceful' }]);
    const { worker, port } = await startWorker('graceful', { TICKWARDEN_SHUTDOWN_GRACE: '10s' });
    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    // The guard ran before anything else started.
    const order = worker.records.map((r) => r['msg']);
    expect(order.indexOf('command guard started')).toBeGreaterThan(-1);
    expect(order.indexOf('command guard started')).toBeLessThan(order.indexOf('consuming queue'));
    const paused = [0, 1, 2].map((i) => locks.node(i));
    await Promise.all(paused.map((node) => node.pause()));
    try {
      const notReady = await fetch(`${base}/readyz`);
      expect(notReady.status).toBe(503);
      // Two nodes answer; on a loaded machine one may miss the probe's node timeout.
      expect(await notReady.text()).toMatch(/lock quorum unreachable \([0-2] of 5 answer, 3 needed\)/);
    } finally {
      await Promise.all(paused.map((node) => node.resume()));
    }

    const { jobId } = await enqueueTick(scheduler, connection, schedule);
    await runStarted(worker, jobId);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/tickwarden_worker_active_runs 1/);
    expect(metrics).toMatch(/tickwarden_worker_runs_total\{outcome="skipped-overlap"\} 0/);
    const guard = guardPid(worker);
    expect(processRunning(guard)).toBe(true);
    const exit = await worker.stop('SIGTERM', 15_000);
    expect(exit.code).toBe(0);
    expect(processRunning(guard)).toBe(false);
    expect(lines('graceful.txt').map((line) => line.split(' ')[0])).toEqual(['start', 'end']);
    const job = await settledJob(connection, 'graceful', jobId);
    expect(await job.getState()).toBe('completed');
    const records = worker.records;
    const finished = records.findIndex((r) => r['outcome'] === 'succeeded' && r['jobId'] === jobId);
    expect(finished).toBeGreaterThan(-1);
    expect(finished).toBeLessThan(records.findIndex((r) => r['msg'] === 'stopped'));
  });

  it('SIGTERM past the grace: the run is aborted (its process group is gone), its lease released, the process exits 0', async () => {
    const schedule = shortLeaseSchedule('impatient/job', recordedSleep('impatient.txt', 30_000), {
      queue: 'impatient',
      leaseTtlMs: 2000,
    });
    writeTeam('impatient', [{ name: 'job', handler: commandYaml(schedule), queue: 'impatient' }]);
    const { worker, port } = await startWorker('impatient', {
      TICKWARDEN_SHUTDOWN_GRACE: '500ms',
      TICKWARDEN_QUEUES: 'impatient',
    });
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule);
    await runStarted(worker, jobId);
    await waitUntil(() => lines('impatient.txt').length > 0, 'the command to start');
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/tickwarden_worker_active_runs 1/);
    const pid = Number(lines('impatient.txt')[0]?.split(' ')[3]);
    const at = performance.now();
    const exit = await worker.stop('SIGTERM', 15_000);
    expect(exit.code).toBe(0);
    expect(performance.now() - at).toBeLessThan(5000);
    expect(groupAlive(pid)).toBe(false);
    const job = await settledJob(connection, 'impatient', jobId);
    expect(await job.getState()).toBe('failed');
    expect(job.failedReason).toBe('aborted: the worker is shutting down');
    expect(worker.records.filter((r) => r['jobId'] === jobId && 'outcome' in r).map((r) => r['outcome'])).toEqual([
      'aborted-shutdown',
    ]);
    await scheduler.release(await scheduler.acquire(data.lease.resource, 1000, { retryCount: 0 }));
  });

  it('an invalid environment or config exits 2 naming every error', async () => {
    const noEnv = startAppProcess({
      role: 'worker',
      name: 'no-env',
      main: MAIN,
      env: {
        TICKWARDEN_CONFIG: '',
        TICKWARDEN_LOCK_NODES: '',
        TICKWARDEN_QUEUE_REDIS: '',
        TICKWARDEN_SHUTDOWN_GRACE: 'soon',
      },
    });
    expect((await noEnv.exited).code).toBe(2);
    const stderr = noEnv.lines.join('\n');
    for (const variable of [
      'TICKWARDEN_CONFIG',
      'TICKWARDEN_LOCK_NODES',
      'TICKWARDEN_QUEUE_REDIS',
      'TICKWARDEN_SHUTDOWN_GRACE',
    ])
      expect(stderr).toContain(`${variable}:`);

    const refused = await runOnBrokenConfig({
      role: 'worker',
      name: 'bad-config',
      main: MAIN,
      lockNodes: locks.urls,
      queueRedis: queueNodes.urls[0],
    });
    expect(refused.code).toBe(2);
    for (const at of refused.errorsAt) expect(refused.output).toContain(at);

    // A lock node reached through a proxy as the queue Redis: distinct URLs, one server (its run_id).
    const oneServer = startAppProcess({
      role: 'worker',
      name: 'one-server',
      main: MAIN,
      configDir,
      lockNodes: locks.urls,
      queueRedis: (await locks.link('one-server')).urls[1],
    });
    expect((await oneServer.exited).code).toBe(2);
    expect(oneServer.records.find((r) => r['level'] === 50)?.['msg']).toMatch(
      /^TICKWARDEN_LOCK_NODES entry 2 \(.+\) and TICKWARDEN_QUEUE_REDIS \(.+\) are one Redis server/,
    );
  });

  it('hot reload: an added schedule (a module handler, relative to its file) runs on a newly consumed queue; a bad reload is rejected and the last good config keeps running', async () => {
    const first = shortLeaseSchedule('reload/first', nodeCommand(''), { queue: 'reload' });
    writeTeam('reload', [{ name: 'first', handler: commandYaml(first), queue: 'reload' }]);
    // TICKWARDEN_QUEUES unset: every queue of the config, including ones a reload adds.
    const { worker } = await startWorker('reload');
    expect(worker.records.some((r) => r['msg'] === 'consuming queue' && r['queue'] === 'reload-new')).toBe(false);
    // The added schedule runs a module, found relative to its config file.
    mkdirSync(path.join(configDir, 'jobs'), { recursive: true });
    writeFileSync(
      path.join(configDir, 'jobs', 'added.mjs'),
      "export async function run(ctx) { ctx.logger.info('module ran', { fence: ctx.fence, attempt: ctx.attempt }); }\n",
    );
    const added = shortLeaseSchedule(
      'reload/added',
      { kind: 'module', path: './jobs/added.mjs', exportName: 'run', killGraceMs: 1000 },
      { queue: 'reload-new' },
    );
    writeTeam('reload', [
      { name: 'first', handler: commandYaml(first), queue: 'reload' },
      { name: 'added', handler: { kind: 'module', path: './jobs/added.mjs', export: 'run' }, queue: 'reload-new' },
    ]);
    await worker.waitForLine((line) => line.includes('"config reloaded"'), 'reload');
    expect(worker.records.some((r) => r['msg'] === 'consuming queue' && r['queue'] === 'reload-new')).toBe(true);
    const one = await enqueueTick(scheduler, connection, added);
    const ran = await settledJob(connection, 'reload-new', one.jobId);
    expect(ran.returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect(worker.records.find((r) => r['msg'] === 'module ran')).toMatchObject({
      stream: 'log',
      jobId: one.jobId,
      fence: ran.returnvalue.fence,
      attempt: 1,
      schedule: 'reload/added',
    });
    writeFileSync(
      path.join(configDir, 'reload.yaml'),
      'team: reload\nschedules:\n  - name: added\n    cron: "not a cron"\n',
    );
    await worker.waitForLine((line) => line.includes('config reload rejected'), 'rejection');
    const two = await enqueueTick(scheduler, connection, added, { tickMs: one.data.tickMs + 1000 });
    expect((await settledJob(connection, 'reload-new', two.jobId)).returnvalue).toMatchObject({ outcome: 'succeeded' });
    expect((await worker.stop()).code).toBe(0);
    rmSync(path.join(configDir, 'reload.yaml'));
  });

  /**
   * A worker process running the fixture (apps/worker/test/fixtures/worker-process.ts): BullMQ
   * re-delivers a dead worker's job within ~1.6 s, before a 3 s lease (extended every 1 s) can have lapsed.
   */
  async function startFixture(
    id: string,
    schedule: ScheduleConfig,
    env: Record<string, string> = {},
  ): Promise<ManagedProcess> {
    const worker = ManagedProcess.start({
      name: id,
      command: process.execPath,
      args: ['--conditions=@tickwarden/source', FIXTURE],
      env: {
        FIXTURE_WORKER_ID: id,
        FIXTURE_LOCK_NODES: locks.urls.join(','),
        FIXTURE_QUEUE_REDIS: queueNodes.urls[0],
        FIXTURE_SCHEDULES: JSON.stringify([schedule]),
        FIXTURE_LOCK_DURATION_MS: '1000',
        FIXTURE_STALLED_INTERVAL_MS: '300',
        ...env,
      },
    });
    processes.push(worker);
    await worker.waitForLine((line) => line.includes('fixture worker started'), 'start');
    return worker;
  }

  it("a worker SIGKILLed between a command's fork and telling its guard of it: the command never runs (it waits behind a gate the worker opens only once the guard has its group)", async () => {
    const schedule = shortLeaseSchedule('forked/job', heartbeat('forked.txt'), { queue: 'forked', leaseTtlMs: 2000 });
    const victim = await startFixture('forked-a', schedule, { FIXTURE_DIE_AFTER_SPAWN_OF: 'forked.txt' });
    const victimGuard = guardPid(victim);
    await enqueueTick(scheduler, connection, schedule);
    expect((await victim.exited).signal).toBe('SIGKILL');
    await waitUntil(() => !processRunning(victimGuard), 'the guard to exit after the worker');
    // A command that started would have written its pid, then a beat every 50 ms, for as long as it lives.
    await sleep(2000);
    const written = lines('forked.txt');
    const pid = Number(written[0]?.split(' ')[1]);
    if (pid > 0 && groupAlive(pid)) process.kill(-pid, 'SIGKILL');
    expect(written).toEqual([]);
  });

  it('a worker SIGKILLed mid-run: its guard kills the command at once; the attempt is recorded worker-lost and (attempts 2) retried on another worker only after the lease expired, with a greater fence, never overlapping', async () => {
    const ttl = 3000;
    const schedule = shortLeaseSchedule('crash/job', recordedSleep('crash.txt', 3000), {
      queue: 'crash',
      leaseTtlMs: ttl,
      attempts: 2,
    });
    const workers = await Promise.all([startFixture('crash-a', schedule), startFixture('crash-b', schedule)]);
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule);
    await waitUntil(
      () => workers.some((w) => w.lines.some((line) => line.includes('"run started"'))),
      'a run to start',
    );
    const victim = workers.find((w) => w.lines.some((line) => line.includes('"run started"'))) as ManagedProcess;
    const survivor = workers.find((w) => w !== victim) as ManagedProcess;
    await waitUntil(() => lines('crash.txt').length > 0, 'the command to start');
    await sleep(300);
    // The worker process dies alone: its command's process group is left to the guard.
    const commandPgid = Number(lines('crash.txt')[0]?.split(' ')[3]);
    const key = resourceKeys('tickwarden', leaseResource(schedule.id, 'skip', 0)).lock;
    const pttls = await Promise.all(
      locks.urls.map(async (url) => {
        const client = new Redis(url, { maxRetriesPerRequest: 0 });
        try {
          return Number(await client.pttl(key));
        } finally {
          client.disconnect();
        }
      }),
    );
    const victimGuard = guardPid(victim);
    const killedAt = Date.now();
    victim.signal('SIGKILL');
    // Orphaned, a killed command may linger as a zombie until adopted and reaped: count running members only.
    await waitUntil(() => runningMembers(commandPgid).length === 0, 'the guard to kill the command', {
      timeoutMs: 10_000,
      intervalMs: 10,
    });
    expect(Date.now()).toBeLessThan(killedAt + ttl);
    await waitUntil(() => !processRunning(victimGuard), 'the guard to exit after the worker');
    const job = await settledJob(connection, 'crash', jobId, 20_000);
    expect(await job.getState()).toBe('completed');
    expect(job.stalledCounter).toBe(1);

    const entries = lines('crash.txt').map((line) => line.split(' '));
    expect(entries.map(([kind]) => kind)).toEqual(['start', 'start', 'end']);
    const [first, second, end] = entries as [string[], string[], string[]];
    // The first start's token is its tick's (the first grant on the schedule's resource); the retry's is above it.
    expect(Number(first[1])).toBe(tickFence(data.tickMs));
    expect(Number(second[1])).toBeGreaterThan(Number(first[1]));
    expect(end[1]).toBe(second[1]);
    // The lease lapsed on a majority only when the third-shortest key expired.
    const lapsedAt = killedAt + ([...pttls].sort((a, b) => a - b)[2] as number);
    expect(Number(second[2])).toBeGreaterThanOrEqual(lapsedAt - 25);
    const rerun = survivor.records.find((r) => r['msg'] === 'run started');
    expect(rerun).toMatchObject({ firstStart: false, worker: survivor.name, attempt: 2 });
    expect(survivor.records.find((r) => r['outcome'] === 'worker-lost')).toMatchObject({
      attempt: 1,
      fence: Number(first[1]),
    });
    // BullMQ handed the job over while the lease was still alive: the survivor waited for it.
    expect(job.processedOn).toBeLessThan(lapsedAt);
    expect((await survivor.stop()).code).toBe(0);
  });

  it('a worker paused (SIGSTOP) past its lease: the guard kills the command before another run can take the lease; resumed, the run fails as lease lost', async () => {
    const schedule = shortLeaseSchedule('paused/job', heartbeat('paused.txt'), { queue: 'paused', leaseTtlMs: 2000 });
    writeTeam('paused', [{ name: 'job', handler: commandYaml(schedule), leaseTtl: '2s', queue: 'paused' }]);
    const { worker } = await startWorker('paused', { TICKWARDEN_QUEUES: 'paused' });
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule);
    await runStarted(worker, jobId);
    await waitUntil(() => lines('paused.txt').length > 3, 'heartbeats');
    const pgid = Number(lines('paused.txt')[0]?.split(' ')[1]);
    const beats = () => lines('paused.txt').slice(1).map(Number);
    worker.signal('SIGSTOP');
    let second: Lease | undefined;
    try {
      // Another run of the schedule: granted once the paused worker's lease lapsed on a majority.
      second = await scheduler.acquire(data.lease.resource, 2000, {
        retryCount: 200,
        retryDelayMs: 50,
        retryJitterMs: 0,
      });
      const grantedBy = Date.now();
      // The paused worker cannot reap it: a zombie at most, running nothing.
      expect(runningMembers(pgid)).toEqual([]);
      expect(Math.max(...beats())).toBeLessThan(grantedBy);
      const count = beats().length;
      await sleep(300);
      expect(beats()).toHaveLength(count);
    } finally {
      worker.signal('SIGCONT');
    }
    await scheduler.release(second);
    await worker.waitForLine(
      (line) => line.includes('"outcome":"aborted-lease-lost"'),
      'the run to fail as lease lost',
    );
    expect(worker.records.find((r) => r['code'] === 'COMMAND_GUARD_KILLED')).toMatchObject({ pgid });
    expect((await worker.stop()).code).toBe(0);
  });

  it("a worker paused (SIGSTOP) past a module run's lease: the guard kills the module's process group at the lease deadline; resumed, nothing of the module writes again", async () => {
    // A module that ignores its signal and beats every 50 ms: run in the worker's own memory (a thread), it was
    // paused with the worker and wrote again on resume, after the next run had started (issue #17's chaos run).
    mkdirSync(path.join(configDir, 'jobs'), { recursive: true });
    writeFileSync(
      path.join(configDir, 'jobs', 'beat.mjs'),
      `import { appendFileSync, writeFileSync } from 'node:fs';
       export async function run(ctx) {
         writeFileSync(${JSON.stringify(file('paused-module.env'))}, JSON.stringify(Object.keys(process.env).filter((name) => name.startsWith('TICKWARDEN_')).sort()));
         appendFileSync(${JSON.stringify(file('paused-module.txt'))}, 'pid ' + process.pid + '\\n');
         setInterval(() => appendFileSync(${JSON.stringify(file('paused-module.txt'))}, Date.now() + '\\n'), 50);
         await new Promise(() => {});
       }\n`,
    );
    const schedule = shortLeaseSchedule(
      'paused-module/job',
      { kind: 'module', path: './jobs/beat.mjs', exportName: 'run', killGraceMs: 10_000 },
      { queue: 'paused-module', leaseTtlMs: 2000 },
    );
    writeTeam('paused-module', [
      {
        name: 'job',
        handler: { kind: 'module', path: './jobs/beat.mjs', export: 'run', killGrace: '10s' },
        leaseTtl: '2s',
        queue: 'paused-module',
      },
    ]);
    const { worker } = await startWorker('paused-module', { TICKWARDEN_QUEUES: 'paused-module' });
    const { jobId, data } = await enqueueTick(scheduler, connection, schedule);
    await runStarted(worker, jobId);
    await waitUntil(() => lines('paused-module.txt').length > 3, 'heartbeats');
    const pgid = Number(lines('paused-module.txt')[0]?.split(' ')[1]);
    // A process of its own (the gate's group), not the worker.
    expect(pgid).not.toBe(worker.pid);
    // The run's variables only: none of the worker's settings (TICKWARDEN_LOCK_NODES, TICKWARDEN_QUEUE_REDIS, ...).
    expect(JSON.parse(readFileSync(file('paused-module.env'), 'utf8'))).toEqual([
      'TICKWARDEN_ATTEMPT',
      'TICKWARDEN_FENCE',
      'TICKWARDEN_JOB_ID',
      'TICKWARDEN_SCHEDULE',
      'TICKWARDEN_TICK',
    ]);
    const beats = () => lines('paused-module.txt').slice(1).map(Number);
    worker.signal('SIGSTOP');
    let second: Lease | undefined;
    let grantedBy: number;
    let count: number;
    try {
      // Another run of the schedule: granted once the paused worker's lease lapsed on a majority.
      second = await scheduler.acquire(data.lease.resource, 2000, {
        retryCount: 200,
        retryDelayMs: 50,
        retryJitterMs: 0,
      });
      grantedBy = Date.now();
      // The paused worker cannot reap it: a zombie at most, running nothing.
      expect(runningMembers(pgid)).toEqual([]);
      expect(Math.max(...beats())).toBeLessThan(grantedBy);
      count = beats().length;
    } finally {
      worker.signal('SIGCONT');
    }
    await worker.waitForLine(
      (line) => line.includes('"outcome":"aborted-lease-lost"'),
      'the run to fail as lease lost',
    );
    await sleep(300);
    // Resumed, the worker's own timers fire late (the module's beat, in the thread of old, wrote on): nothing writes.
    expect(beats()).toHaveLength(count);
    expect(Math.max(...beats())).toBeLessThan(grantedBy);
    expect(groupAlive(pgid)).toBe(false);
    expect(worker.records.find((r) => r['code'] === 'COMMAND_GUARD_KILLED')).toMatchObject({ pgid });
    await scheduler.release(second);
    expect((await worker.stop()).code).toBe(0);
  });
});
