import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HandlerConfig } from '@tickwarden/config';
import {
  LEASE_KILL_MARGIN_MS,
  runEnv,
  runGuarded,
  type CommandRunOptions,
  type GroupKillCause,
} from './guarded-program.ts';
import type { RunnerReport } from './module-runner.ts';
import type { OutputLevel, OutputLog } from './output.ts';
import { HandlerError, type RunContext, type RunDetails } from '../run-context.ts';

export type ModuleHandlerConfig = Extract<HandlerConfig, { kind: 'module' }>;

// The runner sits next to this file, as .ts in the sources (run by Node's type stripping) and .js once built.
const RUNNER = fileURLToPath(
  new URL(`./module-runner${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url),
);
const LEVELS: readonly OutputLevel[] = ['debug', 'info', 'warn', 'error'];

/** The module's absolute path: as written when absolute, else relative to the directory of the config file defining the schedule. */
export function resolveModulePath(modulePath: string, configFile: string): string {
  return path.isAbsolute(modulePath) ? modulePath : path.resolve(path.dirname(configFile), modulePath);
}

/**
 * Runs the schedule's module in a child process of its own, the way a command
 * runs (runGuarded: behind the gate, in a new process group the command guard
 * watches, the worker's own `TICKWARDEN_*` settings not passed on): `node
 * module-runner <module> <export>` imports the module and calls the named
 * export with `{ schedule, tick, tickMs, fence, jobId, attempt, payload,
 * signal, logger }`, reporting log records and the call's end on fd 4. A
 * resolved call is success, a rejection or throw is failure. When
 * `context.signal` aborts, the group gets SIGTERM (the module's `signal`
 * aborts); if it has not ended `killGraceMs` later, SIGKILL, which stops even a
 * busy loop. Whatever happens, the group is SIGKILLed {@link LEASE_KILL_MARGIN_MS}
 * before the run's lease validity ends (each extension moves that end), by this
 * worker and by the guard - which does it even while this worker is paused.
 */
export async function runModule(
  config: ModuleHandlerConfig,
  context: RunContext,
  configFile: string,
  options: CommandRunOptions,
): Promise<RunDetails> {
  const modulePath = resolveModulePath(config.path, configFile);
  let done: Extract<RunnerReport, { type: 'done' }> | undefined;
  let unreadable = false;
  const onReport = (line: string, output: OutputLog): void => {
    let report: RunnerReport;
    try {
      report = JSON.parse(line) as RunnerReport;
    } catch {
      if (!unreadable)
        context.logger.warn(
          { bytes: Buffer.byteLength(line) },
          'module process wrote a line on its report channel (fd 4) that is not a report: ignored',
        );
      unreadable = true;
      return;
    }
    if (report.type === 'log')
      output.write('log', String(report.msg), LEVELS.includes(report.level) ? report.level : 'info', report.fields);
    else if (report.type === 'done') done ??= report;
  };
  const onKill = (cause: GroupKillCause): void => {
    if (done) return; // the call ended: only what it left behind is killed
    if (cause === 'lease-end')
      context.logger.warn(
        { leaseMsLeft: Math.round(context.lease.msLeft()) },
        "lease validity ends: killing the module's process group",
      );
    else if (context.signal.aborted)
      context.logger.warn(
        { killGraceMs: config.killGraceMs },
        'module ignored the abort for its kill grace: killing its process group',
      );
  };
  const result = await runGuarded(
    {
      noun: 'module process',
      executable: process.execPath,
      args: [RUNNER, modulePath, config.exportName],
      cwd: undefined,
      env: runEnv(context),
      killGraceMs: config.killGraceMs,
      onReport,
      onKill,
    },
    context,
    options,
  );
  if ('error' in result)
    throw new HandlerError(`cannot start the module process: ${result.error.message}`, {}, { cause: result.error });
  // The call's own end decides, whatever happened to the process after it reported.
  const finished = done as Extract<RunnerReport, { type: 'done' }> | undefined;
  if (finished?.ok)
    return { moduleMs: result.durationMs, ...(result.outputLines > 0 ? { outputLines: result.outputLines } : {}) };
  if (finished) {
    const { name, message, stack } = finished.error;
    const error = new HandlerError(
      finished.crashed ? `module process crashed: ${name}: ${message}` : `module ${name}: ${message}`,
      { errorName: name },
    );
    if (stack) error.stack = stack;
    throw error;
  }
  // No report of the call's end: the process was killed, or exited (process.exit) before its call finished.
  if (
    result.killed === 'lease-end' ||
    (result.signal === 'SIGKILL' && context.lease.msLeft() <= LEASE_KILL_MARGIN_MS)
  ) {
    throw new HandlerError(
      `module process killed: its lease validity was ending (${LEASE_KILL_MARGIN_MS} ms kill margin) before its call finished`,
      { exitSignal: result.signal, killed: 'lease-end' },
    );
  }
  if (result.code !== null)
    throw new HandlerError(`module process exited with code ${result.code} before its call finished`, {
      exitCode: result.code,
    });
  throw new HandlerError(`module process was killed by ${result.signal ?? 'a signal'} before its call finished`, {
    exitSignal: result.signal,
  });
}
