import { spawn, type ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import { reaper } from './reaper.ts';
import { waitUntil } from './wait.ts';

/** How to start a process the test manages. */
export interface ManagedProcessOptions {
  /** Names the process in errors. */
  name: string;
  command: string;
  args: readonly string[];
  env?: Record<string, string | undefined>;
  cwd?: string;
}

/**
 * A real OS process under test (a scheduler or worker replica): killed,
 * paused, resumed by PID, its stdout kept line by line (pino JSON is parsed),
 * and registered with the kit's reaper so it never outlives the test run.
 */
export class ManagedProcess {
  readonly name: string;
  readonly lines: string[] = [];
  readonly #child: ChildProcess;
  readonly #exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  private constructor(options: ManagedProcessOptions) {
    this.name = options.name;
    this.#child = spawn(options.command, [...options.args], {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const pid = this.#child.pid;
    if (pid) reaper.watchProcess(pid);
    this.#exit = new Promise((resolve) => {
      this.#child.once('exit', (code, signal) => {
        if (pid) reaper.forgetProcess(pid);
        resolve({ code, signal });
      });
    });
    for (const stream of [this.#child.stdout, this.#child.stderr]) {
      if (stream) readline.createInterface({ input: stream }).on('line', (line) => this.lines.push(line));
    }
  }

  static start(options: ManagedProcessOptions): ManagedProcess {
    return new ManagedProcess(options);
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  get exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    return this.#exit;
  }

  /** stdout/stderr lines that parse as JSON objects (pino logs). */
  get records(): Record<string, unknown>[] {
    return this.lines.flatMap((line) => {
      try {
        const value: unknown = JSON.parse(line);
        return value && typeof value === 'object' ? [value as Record<string, unknown>] : [];
      } catch {
        return [];
      }
    });
  }

  /** Waits until a log line satisfies `match`. */
  waitForLine(match: (line: string) => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    return waitUntil(() => this.lines.some(match), `${this.name}: ${what}`, { timeoutMs, intervalMs: 25 });
  }

  signal(signal: NodeJS.Signals): void {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill(signal);
  }

  /** Sends `signal` (SIGTERM by default) and waits for the exit; SIGKILL after `graceMs`. */
  async stop(
    signal: NodeJS.Signals = 'SIGTERM',
    graceMs = 10_000,
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.signal('SIGCONT');
    this.signal(signal);
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    try {
      return await this.#exit;
    } finally {
      clearTimeout(timer);
    }
  }
}
