import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { processStartTime } from './process-start-time.ts';

/**
 * Client side of the reaper sidecar (see reaper-process.ts). One per test
 * process, started on first use; its stdin pipe is unref'd so it never keeps
 * the test process alive, and its end is what tells the sidecar to clean up.
 */
class Reaper {
  #child: ChildProcess | undefined;
  #exited: string | undefined;

  #send(line: string): void {
    if (!this.#child) {
      this.#child = spawn(process.execPath, [fileURLToPath(new URL('./reaper-process.ts', import.meta.url))], {
        detached: true,
        stdio: ['pipe', 'ignore', 'ignore'],
      });
      this.#child.unref();
      (this.#child.stdin as Socket).unref();
      this.#child.once('exit', (code, signal) => (this.#exited = `code ${code}, signal ${signal}`));
      this.#child.stdin?.on('error', () => undefined);
    }
    if (this.#exited)
      throw new Error(`the test kit's reaper exited (${this.#exited}): what the kit starts would not be cleaned up`);
    this.#child.stdin?.write(`${line}\n`);
  }

  watchProcess(pid: number): void {
    const startTime = processStartTime(pid);
    if (startTime) this.#send(`pid ${pid} ${startTime}`);
  }
  forgetProcess(pid: number): void {
    this.#send(`unpid ${pid}`);
  }
  watchContainer(id: string): void {
    this.#send(`container ${id}`);
  }
  forgetContainer(id: string): void {
    this.#send(`uncontainer ${id}`);
  }
  watchDir(path: string): void {
    this.#send(`dir ${path}`);
  }
  forgetDir(path: string): void {
    this.#send(`undir ${path}`);
  }
}

/** The test process's reaper: whatever it watches is removed if this process dies. */
export const reaper = new Reaper();
