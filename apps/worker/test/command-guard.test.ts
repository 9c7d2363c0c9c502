import { spawn, spawnSync } from 'node:child_process';
import { reaper, sleep, waitUntil } from '@tickwarden/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { CommandGuard, HandlerError, hostMonotonicMs, WorkerMetrics } from '../src/index.ts';
import { captureLogger, groupAlive, processRunning } from './support.ts';

describe('command guard (a real sidecar process)', () => {
  const groups: number[] = [];
  afterAll(() => {
    for (const pgid of groups) if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
  });

  /** A process group of its own that runs until killed, like a command's. */
  function sleeperGroup(): number {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { detached: true, stdio: 'ignore' });
    child.unref();
    const pgid = child.pid as number;
    reaper.watchProcess(pgid);
    groups.push(pgid);
    return pgid;
  }

  async function startedGuard() {
    const { logger, records } = captureLogger();
    const metrics = new WorkerMetrics();
    const guard = new CommandGuard({ logger, metrics });
    guard.start();
    await guard.ready(new AbortController().signal);
    return { guard, records, metrics };
  }

  it('reads the clock every process of the host shares: a child process reads CLOCK_MONOTONIC between our two readings', () => {
    const before = hostMonotonicMs();
    // stdout.write, not console.log: FORCE_COLOR (set by nx) would colour a logged number.
    const child = spawnSync(
      process.execPath,
      ['-e', 'process.stdout.write(String(Number(process.hrtime.bigint()) / 1e6))'],
      { encoding: 'utf8' },
    );
    const after = hostMonotonicMs();
    const theirs = Number(child.stdout.trim());
    expect(theirs).toBeGreaterThan(before);
    expect(theirs).toBeLessThan(after);
  });

  it('SIGKILLs a group whose kill time passes; a group whose time was moved on, or that was unwatched, keeps running', async () => {
    const { guard, records, metrics } = await startedGuard();
    try {
      const [expiring, moved, unwatched] = [sleeperGroup(), sleeperGroup(), sleeperGroup()];
      for (const pgid of [expiring, moved, unwatched]) guard.watch(pgid, 300);
      guard.watch(moved, 60_000);
      guard.unwatch(unwatched);
      await waitUntil(() => !groupAlive(expiring), 'the expired group to be killed', { timeoutMs: 5000 });
      // Well past the first kill time, the others still run.
      await waitUntil(() => records.some((r) => r['code'] === 'COMMAND_GUARD_KILLED'), 'the kill report');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(groupAlive(moved)).toBe(true);
      expect(groupAlive(unwatched)).toBe(true);
      expect(records.filter((r) => r['code'] === 'COMMAND_GUARD_KILLED').map((r) => r['pgid'])).toEqual([expiring]);
      expect(await metrics.registry.metrics()).toMatch(/tickwarden_worker_command_guard_kills_total 1/);
    } finally {
      await guard.close();
    }
  });

  it('when the worker side goes away (the pipe closes), every watched group is killed at once and the guard exits', async () => {
    const { guard } = await startedGuard();
    const guardPid = guard.pid as number;
    const watched = sleeperGroup();
    guard.watch(watched, 60_000);
    await guard.close();
    expect(processRunning(guardPid)).toBe(false);
    // Killed before the guard exited; the bound is only for our own reaping of the dead sleeper.
    await waitUntil(() => !groupAlive(watched), 'the watched group to be gone', { timeoutMs: 1000 });
  });

  it('a guard that dies is logged, counted and replaced; the new one is told every watched group and kills it at its time', async () => {
    const { guard, records, metrics } = await startedGuard();
    try {
      const first = guard.pid as number;
      const watched = sleeperGroup();
      guard.watch(watched, 1500);
      process.kill(first, 'SIGKILL');
      await waitUntil(() => guard.pid !== undefined && guard.pid !== first, 'a new guard', { timeoutMs: 5000 });
      expect(records.find((r) => r['code'] === 'COMMAND_GUARD_EXITED')).toMatchObject({
        signal: 'SIGKILL',
        unguardedGroups: 1,
        respawnInMs: 0,
      });
      expect(await metrics.registry.metrics()).toMatch(/tickwarden_worker_command_guard_exits_total 1/);
      // A SIGKILLed guard could not kill anything: the group outlived it, and the new guard ends it.
      await waitUntil(() => !groupAlive(watched), 'the new guard to kill the group', { timeoutMs: 5000 });
      expect(records.find((r) => r['code'] === 'COMMAND_GUARD_KILLED')).toMatchObject({ pgid: watched });
    } finally {
      await guard.close();
    }
  });

  it('watching() resolves once a running guard has the group in its pipe: with none running yet, only once one started and was told', async () => {
    const { logger } = captureLogger();
    const guard = new CommandGuard({ logger });
    try {
      const watched = sleeperGroup();
      guard.watch(watched, 1500);
      let told = false;
      const watching = guard.watching(watched, new AbortController().signal).then(() => (told = true));
      await sleep(200);
      expect(told).toBe(false);
      guard.start();
      await watching;
      expect(guard.pid).toBeDefined();
      // It has it: it kills the group at its time.
      await waitUntil(() => !groupAlive(watched), 'the guard to kill the group', { timeoutMs: 5000 });
      await expect(guard.watching(12345678, new AbortController().signal)).rejects.toThrow(
        'process group 12345678 is not watched',
      );
    } finally {
      await guard.close();
    }
  });

  it("ready() waits for a guard: it rejects with the signal's reason on abort, and with COMMAND_GUARD_UNAVAILABLE after its timeout", async () => {
    const { logger } = captureLogger();
    const idle = new CommandGuard({ logger, readyTimeoutMs: 100 });
    const controller = new AbortController();
    const aborted = idle.ready(controller.signal).catch((e: unknown) => e);
    const reason = new Error('shutting down');
    controller.abort(reason);
    expect(await aborted).toBe(reason);
    const unavailable = await idle.ready(new AbortController().signal).catch((e: unknown) => e);
    expect(unavailable).toBeInstanceOf(HandlerError);
    expect((unavailable as HandlerError).details['code']).toBe('COMMAND_GUARD_UNAVAILABLE');
  });
});
