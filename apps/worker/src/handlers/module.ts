import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { HandlerConfig } from '@tickwarden/config';
import { LEASE_KILL_MARGIN_MS } from './command.ts';
import type { FromRunner, ModuleRunnerInput, ToRunner } from './module-runner.ts';
import { DEFAULT_OUTPUT_LIMITS, OutputLog, type OutputLimits } from './output.ts';
import { HandlerError, tickIso, type RunContext, type RunDetails } from './types.ts';

export type ModuleHandlerConfig = Extract<HandlerConfig, { kind: 'module' }>;

// The runner sits next to this file, as .ts in the sources and .js once built.
const RUNNER = new URL(`./module-runner${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url);

/** The module's absolute path: as written when absolute, else relative to the directory of the config file defining the schedule. */
export function resolveModulePath(modulePath: string, configFile: string): string {
  return path.isAbsolute(modulePath) ? modulePath : path.resolve(path.dirname(configFile), modulePath);
}

/**
 * Runs the schedule's module in its own worker thread: imports it and calls the
 * named export with `{ schedule, tick, tickMs, fence, jobId, attempt, payload,
 * signal, logger }`. A resolved call is success, a rejection or throw is
 * failure. When `context.signal` aborts, the thread's `signal` aborts (a
 * message); if the call has not ended `killGraceMs` later, the thread is
 * terminated, which stops even a busy loop. Whatever happens, the thread is
 * terminated {@link LEASE_KILL_MARGIN_MS} before the run's lease validity
 * ends (each extension moves that end): nothing of a run outlives its lease.
 */
export async function runModule(config: ModuleHandlerConfig, context: RunContext, configFile: string, limits: OutputLimits = DEFAULT_OUTPUT_LIMITS): Promise<RunDetails> {
  const modulePath = resolveModulePath(config.path, configFile);
  const input: ModuleRunnerInput = {
    modulePath,
    exportName: config.exportName,
    context: {
      schedule: context.schedule,
      tick: tickIso(context),
      tickMs: context.tickMs,
      fence: context.fence,
      jobId: context.jobId,
      attempt: context.attempt,
      payload: context.payload ?? null,
    },
  };
  const started = performance.now();
  const output = new OutputLog(context, limits);
  const thread = new Worker(RUNNER, { workerData: input, stdout: true, stderr: true, name: `tickwarden:${context.jobId}` });
  const streams = Promise.all([output.follow(thread.stdout, 'stdout'), output.follow(thread.stderr, 'stderr')]);
  let done: Extract<FromRunner, { type: 'done' }> | undefined;
  let crashed: Error | undefined;
  let terminated = false;
  let killTimer: NodeJS.Timeout | undefined;
  thread.on('message', (message: FromRunner) => {
    if (message.type === 'log') output.write('log', message.msg, message.level, message.fields);
    else if (message.type === 'done' && !done) {
      done = message;
      // The call is over: whatever it left running (timers, sockets) ends with the thread.
      void thread.terminate();
    }
  });
  thread.on('error', (error) => (crashed ??= error));
  const exited = new Promise<number>((resolve) => thread.once('exit', resolve));
  const terminate = (fields: Record<string, unknown>, message: string): void => {
    if (terminated || done) return;
    terminated = true;
    context.logger.warn(fields, message);
    void thread.terminate();
  };
  const onAbort = (): void => {
    const reason: unknown = context.signal.reason;
    thread.postMessage({ type: 'abort', reason: reason instanceof Error ? reason.message : String(reason) } satisfies ToRunner);
    killTimer = setTimeout(() => terminate({ killGraceMs: config.killGraceMs }, 'module ignored the abort: terminating its thread'), config.killGraceMs);
  };
  let leaseTimer: NodeJS.Timeout | undefined;
  const followLease = (): void => {
    clearTimeout(leaseTimer);
    const terminateInMs = Math.max(0, context.lease.msLeft() - LEASE_KILL_MARGIN_MS);
    leaseTimer = setTimeout(() => terminate({ leaseMsLeft: Math.round(context.lease.msLeft()) }, 'lease validity ends: terminating the module thread'), terminateInMs);
  };
  followLease();
  const stopFollowing = context.lease.onExtended(followLease);
  context.signal.addEventListener('abort', onAbort, { once: true });
  if (context.signal.aborted) onAbort();
  let exitCode: number;
  try {
    exitCode = await exited;
  } finally {
    clearTimeout(killTimer);
    clearTimeout(leaseTimer);
    stopFollowing();
    context.signal.removeEventListener('abort', onAbort);
  }
  await Promise.race([streams, new Promise((resolve) => setTimeout(resolve, 200).unref())]);

  if (context.signal.aborted) throw context.signal.reason;
  const finished = done as Extract<FromRunner, { type: 'done' }> | undefined;
  if (finished?.ok) return { moduleMs: Math.round(performance.now() - started) };
  if (finished) {
    const error = new HandlerError(`module ${finished.error.name}: ${finished.error.message}`, { errorName: finished.error.name });
    if (finished.error.stack) error.stack = finished.error.stack;
    throw error;
  }
  if (crashed) throw new HandlerError(`module thread crashed: ${crashed.message}`, {}, { cause: crashed });
  throw new HandlerError(`module thread exited (code ${exitCode}${terminated ? ', terminated' : ''}) before its call finished`, { exitCode });
}
