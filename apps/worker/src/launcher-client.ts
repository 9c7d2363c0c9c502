import net from 'node:net';
import { PassThrough, Writable } from 'node:stream';
import { GUARD_READY_TIMEOUT_MS, hostMonotonicMs } from './command-guard.ts';
import type { LaunchedProgram, ProgramExit, ProgramLauncher, ProgramSpec } from './handlers/program.ts';
import { HandlerError } from './run-context.ts';
import { LAUNCHER_UNAVAILABLE, onMessages, send, type LauncherEvent } from './launcher-protocol.ts';

/** A ping waits at most this long for the launcher's answer, ms. */
const PING_TIMEOUT_MS = 1_000;
/** While the launcher does not answer, `ready` tries again this often, ms. */
const RETRY_MS = 200;

/** A connection to the launcher's socket, or the error connecting gave. */
function connect(socketPath: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection(socketPath);
    socket.once('connect', () => resolve(socket));
    socket.once('error', reject);
  });
}

/**
 * The worker's side of the launcher (launcher-server.ts): programs start in the launcher's
 * container under its user, one connection each. The streams, the exit and the group's end come
 * back over the connection; a connection lost mid-run ends the run as failed (the launcher, or
 * its guard if the launcher died, has killed the group).
 */
export class RemoteLauncher implements ProgramLauncher {
  readonly #socketPath: string;
  readonly #readyTimeoutMs: number;
  /** The last connection worked: `ready` need not ask again (a run's launch tells when it stops working). */
  #reachable = false;

  constructor(socketPath: string, options: { readyTimeoutMs?: number } = {}) {
    this.#socketPath = socketPath;
    this.#readyTimeoutMs = options.readyTimeoutMs ?? GUARD_READY_TIMEOUT_MS;
  }

  /** Whether the launcher answers a ping now. */
  async check(): Promise<boolean> {
    let socket: net.Socket | undefined;
    try {
      socket = await connect(this.#socketPath);
      const connected = socket;
      return await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), PING_TIMEOUT_MS);
        const answer = (answered: boolean): void => {
          clearTimeout(timer);
          resolve(answered);
        };
        onMessages<LauncherEvent>(connected, (event) => answer(event.ev === 'pong'));
        connected.once('close', () => answer(false));
        send(connected, { op: 'ping' });
      });
    } catch {
      return false;
    } finally {
      socket?.destroy();
    }
  }

  /** Resolves once the launcher answers; rejects with a HandlerError (LAUNCHER_UNAVAILABLE) after the ready timeout. */
  async ready(signal: AbortSignal): Promise<void> {
    const deadline = performance.now() + this.#readyTimeoutMs;
    for (;;) {
      signal.throwIfAborted();
      if (this.#reachable) return;
      this.#reachable = await this.check();
      if (this.#reachable) return;
      if (performance.now() >= deadline)
        throw new HandlerError(
          `the launcher (${this.#socketPath}) does not answer after ${this.#readyTimeoutMs} ms: nothing is started`,
          { code: LAUNCHER_UNAVAILABLE },
        );
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  async launch(spec: ProgramSpec, killInMs: number, signal: AbortSignal): Promise<LaunchedProgram> {
    let socket: net.Socket;
    try {
      socket = await connect(this.#socketPath);
    } catch (error) {
      this.#reachable = false;
      throw new HandlerError(
        `cannot reach the launcher (${this.#socketPath}): ${(error as Error).message}`,
        { code: LAUNCHER_UNAVAILABLE },
        { cause: error },
      );
    }
    const streams = { 1: new PassThrough(), 2: new PassThrough(), 4: spec.reports ? new PassThrough() : undefined };
    let gone = false;
    let exitSeen = false;
    let settle!: (exit: ProgramExit) => void;
    const exited = new Promise<ProgramExit>((resolve) => (settle = resolve));
    let started!: (pgid: number | undefined) => void;
    const launched = new Promise<number | undefined>((resolve) => (started = resolve));
    onMessages<LauncherEvent>(socket, (event) => {
      switch (event.ev) {
        case 'launched':
          return started(event.pgid);
        case 'data':
          return void streams[event.fd]?.write(Buffer.from(event.data, 'base64'));
        case 'end':
          return void streams[event.fd]?.end();
        case 'exit':
          exitSeen = true;
          gone = !event.groupAlive;
          return settle({ code: event.code, signal: event.signal });
        case 'failed':
          exitSeen = true;
          started(undefined);
          return settle({ error: new Error(event.message) });
        case 'gone':
          gone = true;
          return;
      }
    });
    socket.on('error', () => undefined);
    socket.once('close', () => {
      // Closed before the program's end came: the launcher is gone (or going); the next run asks first.
      if (!exitSeen) this.#reachable = false;
      gone = true;
      started(undefined);
      settle({ error: new Error('the connection to the launcher was lost: its program was killed') });
      for (const stream of Object.values(streams)) stream?.end();
    });
    send(socket, { op: 'launch', spec, killAtMs: hostMonotonicMs() + killInMs });
    const onAbort = (): void => {
      socket.destroy();
    };
    // An abort before the launch is answered leaves nothing running: the launcher kills what the closed connection left.
    signal.addEventListener('abort', onAbort, { once: true });
    const pgid = await launched;
    signal.removeEventListener('abort', onAbort);
    let stdinBytes: Buffer[] = [];
    const stdin = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        stdinBytes.push(chunk);
        callback();
      },
      final(callback) {
        send(socket, { op: 'stdin', data: Buffer.concat(stdinBytes).toString('base64') });
        send(socket, { op: 'stdin-end' });
        stdinBytes = [];
        callback();
      },
    });
    return {
      pgid,
      stdin,
      stdout: streams[1],
      stderr: streams[2],
      reports: streams[4],
      exited,
      // The launcher answers `launched` only once its guard has the deadline.
      guarded: () => Promise.resolve(),
      openGate: () => send(socket, { op: 'open' }),
      closeGate: () => send(socket, { op: 'close-gate' }),
      guardKillIn: (ms) => send(socket, { op: 'kill-at', killAtMs: hostMonotonicMs() + ms }),
      signal: (name) => {
        if (name !== 0 && !gone) send(socket, { op: 'signal', signal: name });
        return !gone;
      },
      release: () => {
        socket.end();
      },
    };
  }
}
