import { spawn, type ChildProcessByStdio } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { HandlerError } from './run-context.ts';
import type { WorkerMetrics } from './metrics.ts';

// The guard process sits next to this file, as .ts in the sources and .js once built.
const GUARD_PROCESS = fileURLToPath(
  new URL(`./command-guard-process${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url),
);

/** A command or module run waits at most this long for a running guard, then fails (COMMAND_GUARD_UNAVAILABLE), ms. */
export const GUARD_READY_TIMEOUT_MS = 5_000;
/** The `code` of the HandlerError of a run that found no guard running in time. */
export const COMMAND_GUARD_UNAVAILABLE = 'COMMAND_GUARD_UNAVAILABLE';
/** A guard that exits before it is ready is spawned again only after this, so a broken guard cannot spin, ms. */
export const GUARD_RESPAWN_DELAY_MS = 1_000;
/** `watching` writes again this long after a write to a guard that is gone, ms. */
const REWRITE_DELAY_MS = 20;
/** After its stdin closed, how long `close` waits for the guard to exit before it SIGKILLs it by pid, ms. */
const CLOSE_WAIT_MS = 2_000;

/** CLOCK_MONOTONIC in ms: unlike performance.now(), its origin is the same in every process of the host. */
export const hostMonotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export interface CommandGuardOptions {
  logger: Logger;
  metrics?: WorkerMetrics | undefined;
  /** The clock kill times are sent on: it must be the guard process's (default {@link hostMonotonicMs}). */
  monotonicMs?: (() => number) | undefined;
  /** Default {@link GUARD_READY_TIMEOUT_MS}. */
  readyTimeoutMs?: number | undefined;
}

type GuardChild = ChildProcessByStdio<Writable, Readable, null>;

/**
 * The worker's side of the command guard (command-guard-process.ts): spawns
 * the guard once, tells it each command's (and module process's, see
 * handlers/module.ts) process group and the time to SIGKILL it (just before the run's lease validity ends, moved on with each
 * extension), and respawns it if it exits. The guard acts when this process
 * cannot: it died (the pipe reaches EOF) or it is paused or stuck (a kill time
 * passes without being moved).
 *
 * A guard that exits is logged as an error (COMMAND_GUARD_EXITED), counted,
 * and replaced at once; the new guard is sent every watched group with its
 * kill time, so running commands are unguarded only while it starts. New
 * commands start only while a guard runs: a run waits for one, and fails with
 * COMMAND_GUARD_UNAVAILABLE after {@link GUARD_READY_TIMEOUT_MS}.
 */
export class CommandGuard {
  readonly #options: CommandGuardOptions;
  readonly #monotonicMs: () => number;
  /** Every watched group and its kill time (monotonic ms), kept to brief a respawned guard. */
  readonly #killAt = new Map<number, number>();
  readonly #readyListeners = new Set<() => void>();
  #child: GuardChild | undefined;
  #pid: number | undefined;
  #respawnTimer: NodeJS.Timeout | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: CommandGuardOptions) {
    this.#options = options;
    this.#monotonicMs = options.monotonicMs ?? hostMonotonicMs;
  }

  /** The pid of the running guard; undefined while none is ready. */
  get pid(): number | undefined {
    return this.#pid;
  }

  get running(): boolean {
    return this.#pid !== undefined;
  }

  start(): void {
    if (!this.#child && !this.#closing) this.#spawn();
  }

  /** Resolves once a guard runs; rejects with `signal`'s reason, or with a HandlerError (COMMAND_GUARD_UNAVAILABLE) after the timeout. */
  ready(signal: AbortSignal = new AbortController().signal): Promise<void> {
    if (this.running) return Promise.resolve();
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    const timeoutMs = this.#options.readyTimeoutMs ?? GUARD_READY_TIMEOUT_MS;
    return new Promise((resolve, reject) => {
      const settle = (error?: unknown): void => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.#readyListeners.delete(onReady);
        if (error === undefined) resolve();
        else reject(error as Error);
      };
      const onReady = (): void => settle();
      const onAbort = (): void => settle(signal.reason);
      const timer = setTimeout(
        () =>
          settle(
            new HandlerError(`no command guard is running after ${timeoutMs} ms: nothing is started`, {
              code: COMMAND_GUARD_UNAVAILABLE,
            }),
          ),
        timeoutMs,
      );
      signal.addEventListener('abort', onAbort, { once: true });
      this.#readyListeners.add(onReady);
    });
  }

  /** The guard SIGKILLs group `pgid` `killInMs` from now, unless a later `watch` moves that time or `unwatch` drops it. */
  watch(pgid: number, killInMs: number): void {
    const at = this.#monotonicMs() + killInMs;
    this.#killAt.set(pgid, at);
    void this.#send(`watch ${pgid} ${at.toFixed(3)}`);
  }

  /**
   * Resolves once a running guard has group `pgid`'s kill time in its pipe: from then on the
   * guard kills the group even if this process dies at once (if the guard dies instead, its
   * successor is told every watched group). While no guard runs it waits for one, like
   * {@link ready}, and rejects like it; a group not watched is an error.
   */
  async watching(pgid: number, signal: AbortSignal): Promise<void> {
    for (;;) {
      await this.ready(signal);
      const at = this.#killAt.get(pgid);
      if (at === undefined) throw new Error(`process group ${pgid} is not watched`);
      if (await this.#send(`watch ${pgid} ${at.toFixed(3)}`)) return;
      // The guard is gone (EPIPE) but its exit is not handled yet: give that a moment, then wait for the next one.
      await new Promise((resolve) => setTimeout(resolve, REWRITE_DELAY_MS));
    }
  }

  unwatch(pgid: number): void {
    if (this.#killAt.delete(pgid)) void this.#send(`unwatch ${pgid}`);
  }

  /** Closes the guard's stdin (it kills whatever is still watched, then exits) and waits for its exit. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    clearTimeout(this.#respawnTimer);
    this.#pid = undefined;
    const child = this.#child;
    if (!child || child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.stdin.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), CLOSE_WAIT_MS);
    await exited;
    clearTimeout(timer);
  }

  /**
   * Writes `line` to the running guard; resolves whether it reached the guard's pipe (false when
   * none runs or the write failed). Until a guard is ready, #killAt keeps the line's effect: the
   * guard gets it all when it is.
   */
  #send(line: string): Promise<boolean> {
    const child = this.#child;
    if (!child || !this.running) return Promise.resolve(false);
    return new Promise((resolve) => child.stdin.write(`${line}\n`, (error) => resolve(!error)));
  }

  #spawn(): void {
    // Not detached, no shell: the guard shares the worker's process group and nothing else.
    const child: GuardChild = spawn(process.execPath, [GUARD_PROCESS], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.#child = child;
    child.stdin.on('error', () => undefined); // EPIPE once the guard is gone: its exit is handled below
    readline.createInterface({ input: child.stdout }).on('line', (line) => this.#onReport(child, line));
    let gone = false;
    const onGone = (fields: Record<string, unknown>): void => {
      if (gone) return;
      gone = true;
      this.#onExit(child, fields);
    };
    child.once('exit', (exitCode, signal) => onGone({ exitCode, signal }));
    child.once('error', (error) => onGone({ err: error }));
  }

  #onReport(child: GuardChild, line: string): void {
    if (child !== this.#child || this.#closing) return;
    const [kind, first, second] = line.split(' ');
    if (kind === 'ready') this.#onReady(Number(first));
    else if (kind === 'killed') this.#onKilled(Number(first), Number(second));
  }

  #onReady(pid: number): void {
    this.#pid = pid;
    this.#options.logger.info({ guardPid: pid, watchedGroups: this.#killAt.size }, 'command guard started');
    for (const [pgid, at] of this.#killAt) void this.#send(`watch ${pgid} ${at.toFixed(3)}`);
    for (const listener of [...this.#readyListeners]) listener();
  }

  #onKilled(pgid: number, lateMs: number): void {
    this.#killAt.delete(pgid);
    this.#options.metrics?.commandGuardKills.inc();
    this.#options.logger.error(
      { code: 'COMMAND_GUARD_KILLED', pgid, lateMs },
      "command guard SIGKILLed a run's process group (a command or a module process): its lease deadline passed without an extension reaching the guard (this worker was paused or stuck)",
    );
  }

  #onExit(child: GuardChild, fields: Record<string, unknown>): void {
    if (child !== this.#child || this.#closing) return;
    const wasReady = this.running;
    this.#pid = undefined;
    this.#child = undefined;
    this.#options.metrics?.commandGuardExits.inc();
    const respawnInMs = wasReady ? 0 : GUARD_RESPAWN_DELAY_MS;
    this.#options.logger.error(
      { ...fields, code: 'COMMAND_GUARD_EXITED', unguardedGroups: this.#killAt.size, respawnInMs },
      'command guard exited: starting a new one; running commands and module processes are unguarded until it is ready',
    );
    this.#respawnTimer = setTimeout(() => this.#spawn(), respawnInMs);
  }
}
