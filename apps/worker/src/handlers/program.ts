import { spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import type { CommandGuard } from '../command-guard.ts';

/** How a program's gate shell ended, or why it could not be started. */
export type ProgramExit = { code: number | null; signal: NodeJS.Signals | null } | { error: Error };

/** What to start: an absolute executable, its arguments, working directory and whole environment. */
export interface ProgramSpec {
  executable: string;
  args: readonly string[];
  cwd: string | undefined;
  env: NodeJS.ProcessEnv;
  /** Whether fd 4 is a report channel (module processes). */
  reports: boolean;
}

/**
 * A program started behind its gate in a new process group, with a guard that SIGKILLs the group
 * at its deadline or when the starting side dies: by this worker and its command guard, or by
 * the launcher container (launcher-client.ts).
 */
export interface LaunchedProgram {
  /** The group's id (its gate shell's pid); undefined when it could not be started (`exited` then says why). */
  pgid: number | undefined;
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** fd 4, when the spec asked for it. */
  reports: Readable | undefined;
  exited: Promise<ProgramExit>;
  /** Resolves once the guard surely has the group's deadline (a crash after that kills the group); rejects with `signal`'s reason. */
  guarded(signal: AbortSignal): Promise<void>;
  /** Lets the program run (the gate execs it). */
  openGate(): void;
  /** Keeps it from ever running (the gate exits 125). */
  closeGate(): void;
  /** Moves the guard's SIGKILL deadline to `killInMs` from now. */
  guardKillIn(killInMs: number): void;
  /** Signals the whole group; with 0, whether any process of it is left. */
  signal(signal: NodeJS.Signals | 0): boolean;
  /** The run is over: the guard forgets the group. */
  release(): void;
}

/** Starts programs for runs: {@link GuardLauncher} in this process, or the launcher container. */
export interface ProgramLauncher {
  /** Resolves once programs can be started; rejects with `signal`'s reason, or a HandlerError when none can be in time. */
  ready(signal: AbortSignal): Promise<void>;
  /** Starts `spec` behind its gate, guarded, its SIGKILL deadline `killInMs` from now. */
  launch(spec: ProgramSpec, killInMs: number, signal: AbortSignal): Promise<LaunchedProgram>;
}

/**
 * Every command (and every module process: see module.ts) starts behind a gate: `sh` in the
 * command's new process group waits for a line on fd 3, then execs the program (same pid, same
 * group; fd 4, a module process's report channel, stays open across the exec). The line is
 * written only once the guard has the group's deadline. A starter killed between the fork and
 * that moment (the fork returns before the guard can be told) closes fd 3 with its death: the
 * gate exits 125 and nothing of the command runs. Without the gate such a command ran unwatched,
 * and could outlive the lease (apps/worker/test/process.test.ts).
 */
const GATE_SHELL = '/bin/sh';
const GATE_ARGS = ['-c', 'IFS= read -r open <&3 || exit 125; exec 3<&-; exec "$@"', 'tickwarden-gate'];

/** A program's gate shell, spawned detached (its own process group) with every fd a pipe. */
export interface GatedChild {
  pid: number | undefined;
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  gate: Writable;
  reports: Readable | undefined;
  exited: Promise<ProgramExit>;
}

/** Spawns `spec` behind its closed gate (see GATE_ARGS). */
export function spawnGated(spec: ProgramSpec): GatedChild {
  const stdio: 'pipe'[] = spec.reports ? ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe', 'pipe'];
  const child = spawn(GATE_SHELL, [...GATE_ARGS, spec.executable, ...spec.args], {
    cwd: spec.cwd,
    env: spec.env,
    detached: true,
    stdio,
  });
  const exited = new Promise<ProgramExit>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => resolve({ error }));
  });
  const gate = child.stdio[3] as Writable;
  gate.on('error', () => undefined);
  child.stdin.on('error', () => undefined); // EPIPE when the program does not read its input
  return {
    pid: child.pid,
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    gate,
    reports: spec.reports ? (child.stdio[4] as Readable) : undefined,
    exited,
  };
}

/** Signals process group `pgid`; with 0, whether it has a process left. EPERM (exists, not ours) counts as alive. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** How often a group is polled once its program exited or was signalled, ms. */
const GROUP_POLL_MS = 20;
/** After SIGKILL, how long a group is waited for before giving up (zombies nobody reaps), ms. */
const AFTER_KILL_WAIT_MS = 2000;

/** Resolves once `alive` says no process of the group is left, or AFTER_KILL_WAIT_MS after it was SIGKILLed (`killedAt`, performance.now()). */
export async function groupGone(alive: () => boolean, killedAt: () => number | undefined): Promise<void> {
  while (alive()) {
    const killed = killedAt();
    if (killed !== undefined && performance.now() - killed > AFTER_KILL_WAIT_MS) return;
    await new Promise((resolve) => setTimeout(resolve, GROUP_POLL_MS));
  }
}

/** Starts programs as children of this process, each group watched by the command guard. */
export class GuardLauncher implements ProgramLauncher {
  readonly #guard: CommandGuard;

  constructor(guard: CommandGuard) {
    this.#guard = guard;
  }

  ready(signal: AbortSignal): Promise<void> {
    return this.#guard.ready(signal);
  }

  launch(spec: ProgramSpec, killInMs: number): Promise<LaunchedProgram> {
    const guard = this.#guard;
    const child = spawnGated(spec);
    const { pid: pgid } = child;
    if (pgid !== undefined) guard.watch(pgid, killInMs);
    return Promise.resolve({
      pgid,
      stdin: child.stdin,
      stdout: child.stdout,
      stderr: child.stderr,
      reports: child.reports,
      exited: child.exited,
      guarded: (signal) => (pgid === undefined ? Promise.resolve() : guard.watching(pgid, signal)),
      openGate: () => child.gate.end('open\n'),
      closeGate: () => child.gate.destroy(),
      guardKillIn: (ms) => {
        if (pgid !== undefined) guard.watch(pgid, ms);
      },
      signal: (signal) => pgid !== undefined && signalGroup(pgid, signal),
      release: () => {
        if (pgid !== undefined) guard.unwatch(pgid);
      },
    });
  }
}
