import type { Socket } from 'node:net';
import type { ProgramSpec } from './handlers/program.ts';

/**
 * The worker's side of one connection to the launcher (one program per connection), one JSON
 * object per line. Deadlines (`killAtMs`) are on CLOCK_MONOTONIC (`hostMonotonicMs`), which every
 * container of a pod shares: the kernel's, with no time namespace. Bytes travel as base64.
 */
export type LauncherRequest =
  | { op: 'ping' }
  | { op: 'launch'; spec: ProgramSpec; killAtMs: number }
  | { op: 'stdin'; data: string }
  | { op: 'stdin-end' }
  | { op: 'open' }
  | { op: 'close-gate' }
  | { op: 'kill-at'; killAtMs: number }
  | { op: 'signal'; signal: NodeJS.Signals };

/** The file descriptors of a program whose bytes the launcher passes on: stdout, stderr, and fd 4 (reports). */
export type StreamFd = 1 | 2 | 4;

/**
 * The launcher's side. `launched` comes once the group's deadline is with the launcher's guard;
 * `exit` says whether processes are left in the group (`gone` follows once none is).
 */
export type LauncherEvent =
  | { ev: 'pong' }
  | { ev: 'launched'; pgid: number }
  | { ev: 'data'; fd: StreamFd; data: string }
  | { ev: 'end'; fd: StreamFd }
  | { ev: 'exit'; code: number | null; signal: NodeJS.Signals | null; groupAlive: boolean }
  | { ev: 'failed'; message: string }
  | { ev: 'gone' };

/** A line longer than this ends the connection, bytes: a launch request carries the payload and the environment. */
export const MAX_LINE_BYTES = 16 * 1024 * 1024;

/** The `code` of the HandlerError of a run whose program could not be started for want of a launcher. */
export const LAUNCHER_UNAVAILABLE = 'LAUNCHER_UNAVAILABLE';

export function send(socket: Socket, message: LauncherRequest | LauncherEvent): void {
  if (!socket.destroyed && socket.writable) socket.write(`${JSON.stringify(message)}\n`);
}

/** Calls `onMessage` with each line of `socket` parsed; a line past MAX_LINE_BYTES or not JSON destroys the socket. */
export function onMessages<T>(socket: Socket, onMessage: (message: T) => void): void {
  let pending = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => {
    pending += chunk;
    for (let newline = pending.indexOf('\n'); newline !== -1; newline = pending.indexOf('\n')) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      let message: T;
      try {
        message = JSON.parse(line) as T;
      } catch {
        socket.destroy(new Error('launcher protocol: a line that is not JSON'));
        return;
      }
      onMessage(message);
    }
    if (pending.length > MAX_LINE_BYTES)
      socket.destroy(new Error(`launcher protocol: a line longer than ${MAX_LINE_BYTES} bytes`));
  });
}
