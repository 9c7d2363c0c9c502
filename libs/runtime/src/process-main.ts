import type { EnvResult } from '@tickwarden/config';
import { pino, type Logger } from 'pino';

/** Runs a process's `main`: its result is the exit code; a throw prints the stack and exits 1. */
export function runMain(name: string, main: () => Promise<number>): void {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(
        `${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
      process.exitCode = 1;
    },
  );
}

/**
 * A process's logger: JSON lines on stdout, written asynchronously (a slow reader of the pipe
 * must not hold up the event loop) in writes of at most LOG_WRITE_BYTES. While a write is in
 * flight, pino's stream appends the next lines to one string and measures its UTF-8 length on
 * every line, which copies the whole string each time: writes smaller than its default of 16 KB
 * make a burst of lines (a replica's tick outcomes) far less garbage (apps/scheduler/BENCHMARK.md).
 */
export function processLogger(level: string, base: Record<string, unknown>): Logger {
  return pino({ level, base }, pino.destination({ fd: 1, sync: false, maxWrite: LOG_WRITE_BYTES }));
}

/** Bytes per write of a process's log (see processLogger). */
const LOG_WRITE_BYTES = 4096;

/** Resolves with the first SIGTERM or SIGINT (Kubernetes stops a pod with SIGTERM; Ctrl-C sends SIGINT). */
export function untilStopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
}

/** Whether a setting read from the environment is valid; if not, writes its errors to stderr (the process then exits 2). */
export function envValid<T>(result: EnvResult<T>): result is Extract<EnvResult<T>, { ok: true }> {
  if (!result.ok) for (const error of result.errors) process.stderr.write(`${error.variable}: ${error.message}\n`);
  return result.ok;
}

/**
 * Exits the process with code 1 after `ms`, logging `message`, unless the returned function is
 * called first: a stop that hangs must not outlast the orchestrator's grace.
 */
export function exitUnlessStoppedWithin(ms: number, logger: Logger, message: string): () => void {
  const timer = setTimeout(() => {
    logger.error(message);
    process.exit(1);
  }, ms).unref();
  return () => clearTimeout(timer);
}
