// How every program of a run is started and supervised, a command's or the module runner's:
// behind the gate, in its own process group, told to the guard, stopped before its lease ends.
import type { Readable } from 'node:stream';
import type { CommandGuard } from '../command-guard.ts';
import { HandlerError, tickIso, type RunContext } from '../run-context.ts';
import { DEFAULT_OUTPUT_LIMITS, OutputLog, type OutputLimits } from './output.ts';
import { groupGone, GuardLauncher, type LaunchedProgram, type ProgramExit, type ProgramLauncher } from './program.ts';

/** What a command or module run needs besides its config and context. */
export interface CommandRunOptions {
  /** The worker's guard: it stops the run's process group if this process dies or stalls (programs started here). */
  guard: CommandGuard;
  /** The launcher container, which starts programs under its own user and guards them; unset: they start here. */
  launcher?: ProgramLauncher | undefined;
  limits?: OutputLimits | undefined;
  /** Where the Secrets that `{ secret, key }` values name are mounted (`TICKWARDEN_SECRETS_DIR`); default DEFAULT_SECRETS_DIR. */
  secretsDir?: string | undefined;
}

/**
 * A command's (or module process's) group is SIGKILLed this long before its lease's validity
 * ends, by the worker and by the guard alike, ms. It covers the guard's timer lateness
 * and the kill's delivery; the lease watchdog aborts (SIGTERM) 200 ms before
 * the end, so a lease-lost abort leaves a command about 100 ms for SIGTERM.
 */
export const LEASE_KILL_MARGIN_MS = 100;
/** The `code` of the HandlerError of a program not started because its lease could lapse first. */
export const LEASE_ENDING_BEFORE_START = 'LEASE_ENDING_BEFORE_START';

/** The environment of a run's process: the allowlisted part of the worker's (INHERITED_ENV), then `extra` (the schedule's `env`), then the run's `TICKWARDEN_*` variables. */
export function runEnv(context: RunContext, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...inheritedEnv(),
    ...extra,
    TICKWARDEN_SCHEDULE: context.schedule,
    TICKWARDEN_TICK: tickIso(context),
    TICKWARDEN_FENCE: String(context.fence),
    TICKWARDEN_JOB_ID: context.jobId,
    TICKWARDEN_ATTEMPT: String(context.attempt),
  };
}

/** Why the worker itself SIGKILLed a run's group: its lease validity was ending, or it outlived the kill grace after SIGTERM. */
export type GroupKillCause = 'lease-end' | 'kill-grace';

/** A program run as a command is (see {@link runGuarded}): the command's own, or the module runner. */
export interface GuardedProgram {
  /** What runs, in messages: "command", "module process". */
  noun: string;
  /** An absolute path (the gate execs it as is). */
  executable: string;
  args: readonly string[];
  cwd: string | undefined;
  /** The whole environment (see {@link runEnv}). */
  env: NodeJS.ProcessEnv;
  killGraceMs: number;
  /**
   * When set, fd 4 of the program is a pipe to the worker (a report channel: the gate keeps it
   * open across its exec), and each line written to it is passed here, with the run's output log
   * so that records written from it count against the same caps. Lines longer than
   * {@link REPORT_LINE_MAX_BYTES} are dropped (each with a warning).
   */
  onReport?: ((line: string, output: OutputLog) => void) | undefined;
  /** Called right before the worker itself SIGKILLs the group (the guard's kills are logged by the guard's client). */
  onKill?: ((cause: GroupKillCause) => void) | undefined;
}

/** How a guarded program ended (an abort, or a refusal to start, is thrown instead). */
export type GuardedResult =
  | (Exclude<ProgramExit, { error: Error }> & {
      /** Set when the worker SIGKILLed the group, with why (the group may have been gone already). */
      killed: GroupKillCause | undefined;
      /** From the spawn to the group's end, ms. */
      durationMs: number;
      /** Lines logged from the program's output (report records included). */
      outputLines: number;
    })
  | { error: Error };

/** A report line (fd 4) longer than this is dropped, bytes. */
export const REPORT_LINE_MAX_BYTES = 1024 * 1024;

/**
 * Runs `program` the way every command runs: behind the gate in a new process group, the guard
 * told of the group before the gate opens, the payload as JSON on stdin, stdout and stderr
 * logged line by line (capped), SIGTERM to the group on abort and SIGKILL after the kill grace,
 * and SIGKILL {@link LEASE_KILL_MARGIN_MS} before the lease's validity ends (here and by the
 * guard), whatever happens. Resolves once the group is gone; rejects with the abort's reason
 * when `context.signal` aborted, or with why the program was not started.
 */
export async function runGuarded(
  program: GuardedProgram,
  context: RunContext,
  options: CommandRunOptions,
): Promise<GuardedResult> {
  const launcher = options.launcher ?? new GuardLauncher(options.guard);
  // Nothing starts that the guard could not stop if this worker died or stalled.
  await launcher.ready(context.signal);
  const refused = startRefusal(context, program.noun);
  if (refused) throw refused;
  const started = performance.now();
  const { executable, args, cwd, env } = program;
  const spec = { executable, args, cwd, env, reports: program.onReport !== undefined };
  const launched = await launcher.launch(spec, context.lease.msLeft() - LEASE_KILL_MARGIN_MS, context.signal);
  const group =
    launched.pgid === undefined
      ? undefined
      : new ProcessGroup(launched.pgid, program.killGraceMs, (signal) => launched.signal(signal), program.onKill);
  const stopFollowingLease = followLease(launched, group, context);
  const output = new OutputLog(context, options.limits ?? DEFAULT_OUTPUT_LIMITS);
  const streamsDone = followOutput(launched, program, output, context);
  launched.stdin.end(JSON.stringify(context.payload ?? null));
  const onAbort = (): void => group?.stop();
  context.signal.addEventListener('abort', onAbort, { once: true });
  if (context.signal.aborted) onAbort();
  let ended: { result: ProgramExit; notStarted: unknown };
  try {
    ended = await superviseGroup(launched, group, program.noun, context);
  } finally {
    stopFollowingLease();
    context.signal.removeEventListener('abort', onAbort);
    group?.dispose();
    launched.release();
  }
  await drainStreams(launched, streamsDone);
  const { result, notStarted } = ended;
  if ('error' in result) return result;
  if (context.signal.aborted) throw context.signal.reason;
  if (notStarted !== undefined) throw notStarted;
  return {
    ...result,
    killed: group?.killedBy,
    durationMs: Math.round(performance.now() - started),
    outputLines: output.lines,
  };
}

/** Keeps the group's SIGKILL deadline (here and the guard's) LEASE_KILL_MARGIN_MS before the lease's validity ends, through its extensions; returns how to stop following. */
function followLease(launched: LaunchedProgram, group: ProcessGroup | undefined, context: RunContext): () => void {
  const follow = (): void => {
    if (!group) return;
    const killInMs = context.lease.msLeft() - LEASE_KILL_MARGIN_MS;
    group.killIn(killInMs);
    launched.guardKillIn(killInMs);
  };
  follow();
  return context.lease.onExtended(follow);
}

/** Logs stdout and stderr line by line (capped), and passes report lines (fd 4) on; resolves when every stream ended. */
function followOutput(
  launched: LaunchedProgram,
  program: GuardedProgram,
  output: OutputLog,
  context: RunContext,
): Promise<unknown> {
  const followed = [output.follow(launched.stdout, 'stdout'), output.follow(launched.stderr, 'stderr')];
  const { onReport } = program;
  if (launched.reports && onReport)
    followed.push(
      followLines(
        launched.reports,
        REPORT_LINE_MAX_BYTES,
        (line) => onReport(line, output),
        (bytes) =>
          context.logger.warn(
            { bytes, maxBytes: REPORT_LINE_MAX_BYTES },
            `${program.noun} wrote a report line longer than the cap: dropped`,
          ),
      ),
    );
  return Promise.all(followed);
}

/**
 * Opens the gate once the guard surely has the group (a crash before that closes it, and nothing
 * runs), and not after the lease could lapse (this worker may have been paused meanwhile: the
 * guard would kill the group at once, but the program could start first); once open, the guard's
 * kill time is still ahead. Waits for the program's exit and for its group to be gone (what it
 * left behind is stopped). `notStarted`: why the gate stayed closed.
 */
async function superviseGroup(
  launched: LaunchedProgram,
  group: ProcessGroup | undefined,
  noun: string,
  context: RunContext,
): Promise<{ result: ProgramExit; notStarted: unknown }> {
  let notStarted: unknown;
  if (group) {
    try {
      await launched.guarded(context.signal);
      const refusal = startRefusal(context, noun);
      if (refusal) throw refusal;
      await context.started();
      launched.openGate();
    } catch (error) {
      notStarted = error;
      launched.closeGate();
    }
  }
  const result = await launched.exited;
  if (group) {
    if (group.alive()) {
      if (!context.signal.aborted)
        context.logger.warn({ pgid: group.pgid }, `${noun} exited leaving processes in its group: stopping them`);
      group.stop();
    }
    await group.gone();
  }
  return { result, notStarted };
}

/** Everything holding the pipes is gone (unless something left the group): gives the streams a moment to drain, then closes them. */
async function drainStreams(launched: LaunchedProgram, streamsDone: Promise<unknown>): Promise<void> {
  await Promise.race([streamsDone, new Promise((resolve) => setTimeout(resolve, 200).unref())]);
  launched.stdout.destroy();
  launched.stderr.destroy();
  launched.reports?.destroy();
}

/** Splits a byte stream into lines for `onLine`; a line longer than `maxBytes` is dropped (`onDropped` with its length so far). Resolves at its end. */
function followLines(
  stream: Readable,
  maxBytes: number,
  onLine: (line: string) => void,
  onDropped: (bytes: number) => void,
): Promise<void> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let dropping = false;
  const append = (part: Buffer): void => {
    if (dropping) return;
    pendingBytes += part.length;
    if (pendingBytes > maxBytes) {
      dropping = true;
      pending = [];
      onDropped(pendingBytes);
    } else pending.push(part);
  };
  const flush = (): void => {
    if (!dropping) onLine(Buffer.concat(pending).toString('utf8'));
    pending = [];
    pendingBytes = 0;
    dropping = false;
  };
  return new Promise((resolve) => {
    stream.on('data', (chunk: Buffer) => {
      let start = 0;
      for (let newline = chunk.indexOf(10, start); newline !== -1; newline = chunk.indexOf(10, start)) {
        append(chunk.subarray(start, newline));
        flush();
        start = newline + 1;
      }
      if (start < chunk.length) append(chunk.subarray(start));
    });
    const end = (): void => {
      if (pendingBytes > 0 && !dropping) flush();
      resolve();
    };
    stream.once('end', end);
    stream.once('close', end);
    stream.once('error', end);
  });
}

/**
 * Why a program must not start now, if it must not: the run was aborted, or its lease has no
 * more validity than the kill margin (it could not be stopped before the lease ends).
 */
function startRefusal(context: RunContext, noun: string): Error | undefined {
  if (context.signal.aborted) return context.signal.reason as Error;
  const msLeft = context.lease.msLeft();
  if (msLeft > LEASE_KILL_MARGIN_MS) return undefined;
  return new HandlerError(
    `the lease has ${Math.round(msLeft)} ms of validity left, not more than the ${LEASE_KILL_MARGIN_MS} ms kill margin: the ${noun} is not started`,
    {
      code: LEASE_ENDING_BEFORE_START,
    },
  );
}

/**
 * What a job process inherits from the worker's environment: the search path, home, user, locale,
 * time zone and CA certificates a program expects. Nothing else: the worker's settings and
 * credentials (`TICKWARDEN_*`, `*_REDIS_PASSWORD`, proxies, whatever a Deployment adds) are none
 * of a job's business; a schedule passes what its job needs in its own `env`.
 */
const INHERITED_ENV: readonly string[] = [
  ...['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'TMPDIR', 'TZ'],
  ...['LANG', 'LANGUAGE', 'LC_ALL', 'LC_CTYPE', 'LC_MESSAGES', 'LC_NUMERIC', 'LC_TIME', 'LC_COLLATE', 'LC_MONETARY'],
  ...['SSL_CERT_FILE', 'SSL_CERT_DIR', 'NODE_EXTRA_CA_CERTS'],
];

function inheritedEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    INHERITED_ENV.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]]])),
  );
}

/**
 * A run's process group, signalled as a whole: `stop` sends SIGTERM, then
 * SIGKILL after the grace; `killIn` sets a SIGKILL deadline that holds whether
 * or not the group was stopped (the lease's validity end).
 */
class ProcessGroup {
  readonly pgid: number;
  readonly #graceMs: number;
  readonly #sendSignal: (signal: NodeJS.Signals | 0) => boolean;
  readonly #onKill: ((cause: GroupKillCause) => void) | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #killedAt: number | undefined;
  #killedBy: GroupKillCause | undefined;
  #stopping = false;

  constructor(
    pgid: number,
    graceMs: number,
    sendSignal: (signal: NodeJS.Signals | 0) => boolean,
    onKill?: (cause: GroupKillCause) => void,
  ) {
    this.pgid = pgid;
    this.#graceMs = graceMs;
    this.#sendSignal = sendSignal;
    this.#onKill = onKill;
  }

  /** Why this worker SIGKILLed the group, if it did. */
  get killedBy(): GroupKillCause | undefined {
    return this.#killedBy;
  }

  #signal(signal: NodeJS.Signals | 0): boolean {
    return this.#sendSignal(signal);
  }

  alive(): boolean {
    return this.#signal(0);
  }

  /** SIGTERM to the group now, SIGKILL after the grace. Idempotent. */
  stop(): void {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#signal('SIGTERM');
    this.#graceTimer = setTimeout(() => this.kill('kill-grace'), this.#graceMs);
  }

  /** SIGKILL `ms` from now (at once if not above 0), replacing the previous deadline. */
  killIn(ms: number): void {
    if (this.#killedAt !== undefined) return;
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = setTimeout(() => this.kill('lease-end'), Math.max(0, ms));
  }

  kill(cause: GroupKillCause): void {
    this.dispose();
    if (this.#killedAt === undefined) {
      this.#killedAt = performance.now();
      this.#killedBy = cause;
      this.#onKill?.(cause);
    }
    this.#signal('SIGKILL');
  }

  /** Resolves once no process is left in the group (or, after SIGKILL, when waiting longer is pointless). */
  gone(): Promise<void> {
    return groupGone(
      () => this.alive(),
      () => this.#killedAt,
    );
  }

  dispose(): void {
    clearTimeout(this.#graceTimer);
    clearTimeout(this.#deadlineTimer);
  }
}
