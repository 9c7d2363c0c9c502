import type { EnvResult } from '@tickwarden/config';
import { pino, type Logger } from 'pino';
import { LogSink } from './log-sink.ts';

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

/** A process's logger: JSON lines on stdout, written off the event loop (LogSink). */
export function processLogger(level: string, base: Record<string, unknown>): Logger {
  return pino({ level, base }, new LogSink(1));
}

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
