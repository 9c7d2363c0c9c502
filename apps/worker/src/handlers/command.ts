import { spawn } from 'node:child_process';
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
/** How often the process group is polled once the command exited or was signalled, ms. */
const GROUP_POLL_MS = 20;
/** After SIGKILL, how long to wait for the group to vanish before giving up (zombies nobody reaps), ms. */
const AFTER_KILL_WAIT_MS = 2000;

/**
 * Runs the schedule's command without a shell, in its own process group: the
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
  // No command starts that the guard could not stop if this worker died or stalled.
  await guard.ready(context.signal);
  const started = performance.now();
  const child = spawn(program, args, {
    cwd: config.cwd,
    env: {
      ...inheritedEnv(),
      ...config.env,
      TICKWARDEN_SCHEDULE: context.schedule,
      TICKWARDEN_TICK: tickIso(context),
      TICKWARDEN_FENCE: String(context.fence),
      TICKWARDEN_JOB_ID: context.jobId,
      TICKWARDEN_ATTEMPT: String(context.attempt),
    },
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null } | { error: Error }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => resolve({ error }));
  });
  const group = child.pid === undefined ? undefined : new ProcessGroup(child.pid, config.killGraceMs);
  // Told in the same tick as the spawn: the pipe holds the line even if this process is SIGKILLed right after.
  const followLease = (): void => {
    if (!group) return;
    const killInMs = context.lease.msLeft() - LEASE_KILL_MARGIN_MS;
    group.killIn(killInMs);
    guard.watch(group.pgid, killInMs);
  };
  followLease();
  const stopFollowing = context.lease.onExtended(followLease);
  const output = new OutputLog(context, limits);
  const streamsDone = Promise.all([output.follow(child.stdout, 'stdout'), output.follow(child.stderr, 'stderr')]);
  child.stdin.on('error', () => undefined); // EPIPE when the command does not read its input
  child.stdin.end(JSON.stringify(context.payload ?? null));

  const onAbort = (): void => group?.stop();
  context.signal.addEventListener('abort', onAbort, { once: true });
  if (context.signal.aborted) onAbort();
  let result: Awaited<typeof exited>;
  try {
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
  child.stdout.destroy();
  child.stderr.destroy();

  const durationMs = Math.round(performance.now() - started);
  if ('error' in result) throw new HandlerError(`cannot start command "${program}": ${result.error.message}`, {}, { cause: result.error });
  if (context.signal.aborted) throw context.signal.reason;
  if (result.code === 0) return { exitCode: 0, commandMs: durationMs, outputLines: output.lines };
  if (result.code !== null) throw new HandlerError(`command exited with code ${result.code}`, { exitCode: result.code });
  throw new HandlerError(`command was killed by ${result.signal ?? 'a signal'}`, { exitSignal: result.signal });
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
