import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import type { HandlerConfig } from '@tickwarden/config';
import type { CommandGuard } from '../command-guard.ts';
import { DEFAULT_OUTPUT_LIMITS, OutputLog, type OutputLimits } from './output.ts';
import { HandlerError, tickIso, type RunContext, type RunDetails } from './types.ts';

export type CommandHandlerConfig = Extract<HandlerConfig, { kind: 'command' }>;

/** What a command run needs besides its config and context. */
export interface CommandRunOptions {
  /** The worker's guard: it stops the command's group if this process dies or stalls. */
  guard: CommandGuard;
  limits?: OutputLimits | undefined;
}

/**
 * A command's group is SIGKILLed this long before its lease's validity ends, by
 * the worker and by the guard alike, ms. It covers the guard's timer lateness
 * and the kill's delivery; the lease watchdog aborts (SIGTERM) 200 ms before
 * the end, so a lease-lost abort leaves a command about 100 ms for SIGTERM.
 */
export const LEASE_KILL_MARGIN_MS = 100;
/**
 * Every command starts behind a gate: `sh` in the command's new process group waits for a line
 * on fd 3, then execs the program (same pid, same group). The worker writes that line only once
 * the guard has the group's kill time in its pipe (`CommandGuard.watching`). A worker killed
 * between the fork and that moment (the fork returns before the guard can be told) closes fd 3
 * with its death: the gate exits 125 and nothing of the command runs. Without the gate such a
 * command ran unwatched, and could outlive the lease (apps/worker/test/process.test.ts).
 */
const GATE_SHELL = '/bin/sh';
const GATE_ARGS = ['-c', 'IFS= read -r open <&3 || exit 125; exec 3<&-; exec "$@"', 'tickwarden-gate'];
/** How often the process group is polled once the command exited or was signalled, ms. */
const GROUP_POLL_MS = 20;
/** After SIGKILL, how long to wait for the group to vanish before giving up (zombies nobody reaps), ms. */
const AFTER_KILL_WAIT_MS = 2000;

/**
 * Runs the schedule's command in its own process group, its argv as given (no
 * shell interprets it; the gate above only execs it): the
 * payload as JSON on stdin, the tick in `TICKWARDEN_*` variables (the worker's
 * own `TICKWARDEN_*` settings are not passed on), stdout and
 * stderr logged line by line (capped). Exit code 0 is success. When
 * `context.signal` aborts, the whole group gets SIGTERM, then SIGKILL after
 * `killGraceMs` - or earlier, at the end of the lease's validity: the group is
 * SIGKILLed {@link LEASE_KILL_MARGIN_MS} before it, here and by the guard,
 * whatever happens. Processes the command leaves behind in its group when it
 * exits are stopped the same way: the run ends only once its group is gone.
 */
export async function runCommand(config: CommandHandlerConfig, context: RunContext, options: CommandRunOptions): Promise<RunDetails> {
  const [program, ...args] = config.argv;
  if (program === undefined) throw new HandlerError('command has an empty argv');
  const { guard, limits = DEFAULT_OUTPUT_LIMITS } = options;
  const env: NodeJS.ProcessEnv = {
    ...inheritedEnv(),
    ...config.env,
    TICKWARDEN_SCHEDULE: context.schedule,
    TICKWARDEN_TICK: tickIso(context),
    TICKWARDEN_FENCE: String(context.fence),
    TICKWARDEN_JOB_ID: context.jobId,
    TICKWARDEN_ATTEMPT: String(context.attempt),
  };
  const executable = await findExecutable(program, config.cwd, env['PATH']);
  if (executable === undefined) {
    const where = program.includes('/') ? `at ${path.resolve(config.cwd ?? process.cwd(), program)}` : `named "${program}" on PATH`;
    throw new HandlerError(`cannot start command "${program}": no executable file ${where}`, { code: 'COMMAND_NOT_FOUND' });
  }
  // No command starts that the guard could not stop if this worker died or stalled.
  await guard.ready(context.signal);
  const refused = startRefusal(context);
  if (refused) throw refused;
  const started = performance.now();
  const child = spawn(GATE_SHELL, [...GATE_ARGS, executable, ...args], { cwd: config.cwd, env, detached: true, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
  // All four are pipes (stdio above): never null.
  const [stdin, stdout, stderr, gate] = [child.stdin as Writable, child.stdout as Readable, child.stderr as Readable, child.stdio[3] as Writable];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null } | { error: Error }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => resolve({ error }));
  });
  const group = child.pid === undefined ? undefined : new ProcessGroup(child.pid, config.killGraceMs);
  const followLease = (): void => {
    if (!group) return;
    const killInMs = context.lease.msLeft() - LEASE_KILL_MARGIN_MS;
    group.killIn(killInMs);
    guard.watch(group.pgid, killInMs);
  };
  followLease();
  const stopFollowing = context.lease.onExtended(followLease);
  const output = new OutputLog(context, limits);
  const streamsDone = Promise.all([output.follow(stdout, 'stdout'), output.follow(stderr, 'stderr')]);
  stdin.on('error', () => undefined); // EPIPE when the command does not read its input
  stdin.end(JSON.stringify(context.payload ?? null));
  gate.on('error', () => undefined);

  const onAbort = (): void => group?.stop();
  context.signal.addEventListener('abort', onAbort, { once: true });
  if (context.signal.aborted) onAbort();
  let notStarted: unknown;
  let result: Awaited<typeof exited>;
  try {
    if (group) {
      // The gate opens only once the guard surely has the group: a crash before that closes it, and nothing runs.
      // Nor after the lease could lapse: this worker may have been paused meanwhile (the guard then kills the
      // group at once, but the command could start first). Once open, the guard's kill time is still ahead.
      try {
        await guard.watching(group.pgid, context.signal);
        const refusal = startRefusal(context);
        if (refusal) throw refusal;
        gate.end('open\n');
      } catch (error) {
        notStarted = error;
        gate.destroy();
      }
    }
    result = await exited;
    if (group) {
      if (group.alive()) {
        if (!context.signal.aborted) context.logger.warn({ pgid: group.pgid }, 'command exited leaving processes in its group: stopping them');
        group.stop();
      }
      await group.gone();
    }
  } finally {
    stopFollowing();
    context.signal.removeEventListener('abort', onAbort);
    group?.dispose();
    if (group) guard.unwatch(group.pgid);
  }
  // Everything holding the pipes is gone (unless something left the group): give the streams a moment to drain.
  await Promise.race([streamsDone, new Promise((resolve) => setTimeout(resolve, 200).unref())]);
  stdout.destroy();
  stderr.destroy();

  const durationMs = Math.round(performance.now() - started);
  if ('error' in result) throw new HandlerError(`cannot start command "${program}": ${result.error.message}`, {}, { cause: result.error });
  if (context.signal.aborted) throw context.signal.reason;
  if (notStarted !== undefined) throw notStarted;
  if (result.code === 0) return { exitCode: 0, commandMs: durationMs, outputLines: output.lines };
  if (result.code !== null) throw new HandlerError(`command exited with code ${result.code}`, { exitCode: result.code });
  throw new HandlerError(`command was killed by ${result.signal ?? 'a signal'}`, { exitSignal: result.signal });
}

/**
 * Why a command must not start now, if it must not: the run was aborted, or its lease has no
 * more validity than the kill margin (the command could not be stopped before the lease ends).
 */
function startRefusal(context: RunContext): Error | undefined {
  if (context.signal.aborted) return context.signal.reason as Error;
  const msLeft = context.lease.msLeft();
  if (msLeft > LEASE_KILL_MARGIN_MS) return undefined;
  return new HandlerError(`the lease has ${Math.round(msLeft)} ms of validity left, not more than the ${LEASE_KILL_MARGIN_MS} ms kill margin: the command is not started`, {
    code: 'LEASE_ENDING_BEFORE_START',
  });
}

/**
 * The file execvp would run: a program with a slash as is (relative to `cwd`), else the first
 * executable file of that name in PATH's directories (`/usr/bin:/bin` when PATH is unset, as
 * libuv does). Looked up here, before the gate execs it, so a missing program fails the run
 * with a clear error rather than the gate's exit code 127.
 */
async function findExecutable(program: string, cwd: string | undefined, pathList: string | undefined): Promise<string | undefined> {
  const base = cwd ?? process.cwd();
  const directories = program.includes('/') ? [''] : (pathList ?? '/usr/bin:/bin').split(':').filter((dir) => dir !== '');
  for (const directory of directories) {
    const candidate = path.resolve(base, directory, program);
    try {
      await access(candidate, constants.X_OK);
      if ((await stat(candidate)).isFile()) return candidate;
    } catch {
      // not there, or not executable: try the next directory
    }
  }
  return undefined;
}

/** The worker's environment without its own settings: `TICKWARDEN_*` carry the Redis URLs (with passwords), none of a command's business. */
function inheritedEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('TICKWARDEN_')));
}

/**
 * A command's process group, signalled as a whole: `stop` sends SIGTERM, then
 * SIGKILL after the grace; `killIn` sets a SIGKILL deadline that holds whether
 * or not the group was stopped (the lease's validity end).
 */
class ProcessGroup {
  readonly pgid: number;
  readonly #graceMs: number;
  #graceTimer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #killedAt: number | undefined;
  #stopping = false;

  constructor(pgid: number, graceMs: number) {
    this.pgid = pgid;
    this.#graceMs = graceMs;
  }

  #signal(signal: NodeJS.Signals | 0): boolean {
    try {
      process.kill(-this.pgid, signal);
      return true;
    } catch (error) {
      // EPERM: it exists but is not ours to signal (it cannot be ours then: treat as alive).
      return (error as NodeJS.ErrnoException).code === 'EPERM';
    }
  }

  alive(): boolean {
    return this.#signal(0);
  }

  /** SIGTERM to the group now, SIGKILL after the grace. Idempotent. */
  stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#signal('SIGTERM');
    this.#graceTimer = setTimeout(() => this.kill(), this.#graceMs);
  }

  /** SIGKILL `ms` from now (at once if not above 0), replacing the previous deadline. */
  killIn(ms: number): void {
    if (this.#killedAt !== undefined) return;
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = setTimeout(() => this.kill(), Math.max(0, ms));
  }

  kill(): void {
    this.dispose();
    this.#killedAt ??= performance.now();
    this.#signal('SIGKILL');
  }

  /** Resolves once no process is left in the group (or, after SIGKILL, when waiting longer is pointless). */
  async gone(): Promise<void> {
    while (this.alive()) {
      if (this.#killedAt !== undefined && performance.now() - this.#killedAt > AFTER_KILL_WAIT_MS) return;
      await new Promise((resolve) => setTimeout(resolve, GROUP_POLL_MS));
    }
  }

  dispose(): void {
    clearTimeout(this.#graceTimer);
    clearTimeout(this.#deadlineTimer);
  }
}
