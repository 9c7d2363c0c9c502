import { chmod, rm } from 'node:fs/promises';
import net from 'node:net';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { hostMonotonicMs, type CommandGuard } from './command-guard.ts';
import { groupGone, signalGroup, spawnGated, type GatedChild } from './handlers/program.ts';
import { onMessages, send, type LauncherEvent, type LauncherRequest, type StreamFd } from './launcher-protocol.ts';

export interface LauncherServerOptions {
  socketPath: string;
  logger: Logger;
  /** Started: it SIGKILLs a group at its deadline, or every group if this process dies. */
  guard: CommandGuard;
}

/**
 * The launcher: starts the worker's programs (commands, module processes) as children of its own
 * process, under its own user, which holds no credential - a program cannot read the worker's
 * environment or memory, whatever it does. One connection per program: the worker sends the
 * spec and its deadline, opens the gate, moves the deadline and signals the group; the launcher
 * passes stdout, stderr and reports back. Its command guard SIGKILLs the group at the deadline
 * (the worker paused or stuck) or when the launcher dies; a worker whose connection closes
 * before the group is gone (it died) has the group SIGKILLed at once.
 */
export class LauncherServer {
  readonly #options: LauncherServerOptions;
  readonly #server = net.createServer((socket) => this.#accept(socket));
  /** Programs started and not gone yet, and who waits for none to be left. */
  #running = 0;
  #onIdle: (() => void) | undefined;
  readonly #sockets = new Set<net.Socket>();

  constructor(options: LauncherServerOptions) {
    this.#options = options;
  }

  /** Listens on the socket path (a stale socket file is replaced), connectable by the worker's user. */
  async start(): Promise<void> {
    const { socketPath } = this.#options;
    await rm(socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(socketPath, resolve);
    });
    // The worker runs as another user; only the pod's two containers mount the socket's directory.
    await chmod(socketPath, 0o666);
  }

  /**
   * Resolves once no program runs. Kubernetes stops the pod's containers together: the launcher
   * must outlive the worker's drain (its running jobs may finish for the shutdown grace).
   */
  idle(): Promise<void> {
    if (this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => (this.#onIdle = resolve));
  }

  /** Stops listening and ends every connection (a program still running is killed: its worker left). */
  close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const socket of this.#sockets) socket.destroy();
    return closed;
  }

  #ended(): void {
    this.#running--;
    if (this.#running === 0) this.#onIdle?.();
  }

  #accept(socket: net.Socket): void {
    const { guard, logger } = this.#options;
    let child: GatedChild | undefined;
    let settled = false;
    let killedAt: number | undefined;
    const reply = (event: LauncherEvent): void => send(socket, event);
    const forward = (stream: Readable, fd: StreamFd): void => {
      stream.on('data', (chunk: Buffer) => reply({ ev: 'data', fd, data: chunk.toString('base64') }));
      stream.once('end', () => reply({ ev: 'end', fd }));
      stream.on('error', () => undefined);
    };
    const kill = (pgid: number): void => {
      killedAt ??= performance.now();
      signalGroup(pgid, 'SIGKILL');
    };
    let gone: Promise<void> | undefined;
    /** Once no process of the group is left (see groupGone), tells the worker and lets the guard forget it. */
    const awaitGone = (pgid: number): Promise<void> =>
      (gone ??= (async () => {
        await groupGone(
          () => signalGroup(pgid, 0),
          () => killedAt,
        );
        guard.unwatch(pgid);
        reply({ ev: 'gone' });
        this.#ended();
      })());
    const launch = async (request: Extract<LauncherRequest, { op: 'launch' }>): Promise<void> => {
      if (child) return void socket.destroy(new Error('launcher protocol: one program per connection'));
      child = spawnGated(request.spec);
      const { pid } = child;
      if (pid === undefined) {
        const exit = await child.exited;
        return reply({ ev: 'failed', message: 'error' in exit ? exit.error.message : 'not started' });
      }
      this.#running++;
      guard.watch(pid, request.killAtMs - hostMonotonicMs());
      forward(child.stdout, 1);
      forward(child.stderr, 2);
      if (child.reports) forward(child.reports, 4);
      void child.exited.then((exit) => {
        settled = true;
        if ('error' in exit) return reply({ ev: 'failed', message: exit.error.message });
        reply({ ev: 'exit', code: exit.code, signal: exit.signal, groupAlive: signalGroup(pid, 0) });
        return awaitGone(pid);
      });
      try {
        await guard.watching(pid, new AbortController().signal);
        reply({ ev: 'launched', pgid: pid });
      } catch (error) {
        logger.error({ err: error, pgid: pid }, 'the command guard did not take the group: not started');
        kill(pid);
      }
    };
    const onRequest = (request: LauncherRequest): void => {
      const pgid = child?.pid;
      switch (request.op) {
        case 'ping':
          return reply({ ev: 'pong' });
        case 'launch':
          return void launch(request);
        case 'stdin':
          return void child?.stdin.write(Buffer.from(request.data, 'base64'));
        case 'stdin-end':
          return void child?.stdin.end();
        case 'open':
          return void child?.gate.end('open\n');
        case 'close-gate':
          return void child?.gate.destroy();
        case 'kill-at':
          if (pgid !== undefined) guard.watch(pgid, request.killAtMs - hostMonotonicMs());
          return;
        case 'signal':
          if (pgid !== undefined) signalGroup(pgid, request.signal);
          return;
      }
    };
    onMessages<LauncherRequest>(socket, onRequest);
    this.#sockets.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => {
      this.#sockets.delete(socket);
      const pgid = child?.pid;
      if (pgid === undefined) return;
      child?.gate.destroy();
      // The worker left before its group was gone: it died, or gave up on the run. Nothing may outlive it.
      if (signalGroup(pgid, 0)) {
        if (!settled) logger.warn({ pgid }, 'the worker left while its program ran: killing the group');
        kill(pgid);
      }
      void awaitGone(pgid);
    });
  }
}
