import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import path from 'node:path';
import { DEFAULT_SECRETS_DIR, type HandlerConfig } from '@tickwarden/config';
import { HandlerError, type RunContext, type RunDetails } from '../run-context.ts';
import { runEnv, runGuarded, type CommandRunOptions } from './guarded-program.ts';
import { resolveValues } from './secrets.ts';

export type CommandHandlerConfig = Extract<HandlerConfig, { kind: 'command' }>;

/**
 * Runs the schedule's command in its own process group, its argv as given (no
 * shell interprets it; the gate of program.ts only execs it): the
 * payload as JSON on stdin, the tick in `TICKWARDEN_*` variables (the worker's
 * own `TICKWARDEN_*` settings are not passed on), stdout and
 * stderr logged line by line (capped). Exit code 0 is success. When
 * `context.signal` aborts, the whole group gets SIGTERM, then SIGKILL after
 * `killGraceMs` - or earlier, at the end of the lease's validity: the group is
 * SIGKILLed {@link LEASE_KILL_MARGIN_MS} before it, here and by the guard,
 * whatever happens. Processes the command leaves behind in its group when it
 * exits are stopped the same way: the run ends only once its group is gone.
 */
export async function runCommand(
  config: CommandHandlerConfig,
  context: RunContext,
  options: CommandRunOptions,
): Promise<RunDetails> {
  const [program, ...args] = config.argv;
  if (program === undefined) throw new HandlerError('command has an empty argv');
  const env = runEnv(context, await resolveValues(config.env, options.secretsDir ?? DEFAULT_SECRETS_DIR));
  const executable = await findExecutable(program, config.cwd, env['PATH']);
  if (executable === undefined) {
    const where = program.includes('/')
      ? `at ${path.resolve(config.cwd ?? process.cwd(), program)}`
      : `named "${program}" on PATH`;
    throw new HandlerError(`cannot start command "${program}": no executable file ${where}`, {
      code: 'COMMAND_NOT_FOUND',
    });
  }
  const result = await runGuarded(
    { noun: 'command', executable, args, cwd: config.cwd, env, killGraceMs: config.killGraceMs },
    context,
    options,
  );
  if ('error' in result)
    throw new HandlerError(`cannot start command "${program}": ${result.error.message}`, {}, { cause: result.error });
  if (result.code === 0) return { exitCode: 0, commandMs: result.durationMs, outputLines: result.outputLines };
  if (result.code !== null)
    throw new HandlerError(`command exited with code ${result.code}`, { exitCode: result.code });
  throw new HandlerError(`command was killed by ${result.signal ?? 'a signal'}`, { exitSignal: result.signal });
}

/**
 * The file execvp would run: a program with a slash as is (relative to `cwd`), else the first
 * executable file of that name in PATH's directories (`/usr/bin:/bin` when PATH is unset, as
 * libuv does). Looked up here, before the gate execs it, so a missing program fails the run
 * with a clear error rather than the gate's exit code 127.
 */
async function findExecutable(
  program: string,
  cwd: string | undefined,
  pathList: string | undefined,
): Promise<string | undefined> {
  const base = cwd ?? process.cwd();
  const directories = program.includes('/')
    ? ['']
    : (pathList ?? '/usr/bin:/bin').split(':').filter((dir) => dir !== '');
  for (const directory of directories) {
    const candidate = path.resolve(base, directory, program);
    try {
      await access(candidate, constants.X_OK);
      if ((await stat(candidate)).isFile()) return candidate;
    } catch {
      // not there, or not executable: try the next directory
    }
  }
  return undefined;
}
