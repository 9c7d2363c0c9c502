import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ManagedProcess } from './managed-process.ts';
import { writeBrokenTeamFile } from './team-files.ts';

/** The two kinds of Tickwarden app process. */
export type AppProcessRole = 'scheduler' | 'worker';

/**
 * How to start a scheduler or a worker. Each named field sets its variable only when given (the
 * test runner's own environment is inherited as it is otherwise); `env` comes last and wins.
 */
export interface AppProcessOptions {
  /** Which app `main` is. */
  role: AppProcessRole;
  /** Names the process in errors. */
  name: string;
  /** The app's entry file (the kit knows no app: the caller passes its own path). */
  main: string;
  /** Node flags before `main` (e.g. `PROCESS_NODE_FLAGS[role]` of @tickwarden/runtime). Default none. */
  nodeFlags?: readonly string[];
  /**
   * `main` is compiled JavaScript (`dist/main.js`): run without `--conditions=@tickwarden/source`,
   * so the workspace's packages resolve to their `dist/` as in the image (the benchmarks measure
   * that). Default false: from source.
   */
  compiled?: boolean;
  /** TICKWARDEN_CONFIG. */
  configDir?: string;
  /** TICKWARDEN_LOCK_NODES: the URLs, or a comma-separated list of them. */
  lockNodes?: string | readonly string[];
  /** TICKWARDEN_QUEUE_REDIS. */
  queueRedis?: string;
  /** TICKWARDEN_HTTP_PORT (0: any free port, logged as "http listening"). */
  httpPort?: number;
  /** TICKWARDEN_REPLICA_ID: the scheduler's only (a worker has none). */
  replicaId?: string;
  /** LOG_LEVEL. */
  logLevel?: string;
  /** Any other variable, and overrides of the ones above (`undefined` unsets an inherited one). */
  env?: Record<string, string | undefined>;
}

/**
 * Starts a scheduler or a worker as a real OS process running `main`, from source
 * (`--conditions=@tickwarden/source`) unless `compiled`. It does not wait: callers wait for the line they need
 * (`"scheduler started"`, `"http listening"`, ...) or for the exit of a process meant to fail.
 */
export function startAppProcess(options: AppProcessOptions): ManagedProcess {
  const { lockNodes, httpPort } = options;
  if (options.role !== 'scheduler' && options.replicaId !== undefined)
    throw new Error(`${options.name}: a ${options.role} has no replica id (TICKWARDEN_REPLICA_ID is the scheduler's)`);
  const named: Record<string, string | undefined> = {
    TICKWARDEN_CONFIG: options.configDir,
    TICKWARDEN_LOCK_NODES: typeof lockNodes === 'string' ? lockNodes : lockNodes?.join(','),
    TICKWARDEN_QUEUE_REDIS: options.queueRedis,
    TICKWARDEN_HTTP_PORT: httpPort === undefined ? undefined : String(httpPort),
    TICKWARDEN_REPLICA_ID: options.replicaId,
    LOG_LEVEL: options.logLevel,
  };
  return ManagedProcess.start({
    name: options.name,
    command: process.execPath,
    args: [
      ...(options.compiled ? [] : ['--conditions=@tickwarden/source']),
      ...(options.nodeFlags ?? []),
      options.main,
    ],
    env: {
      ...Object.fromEntries(Object.entries(named).filter(([, value]) => value !== undefined)),
      ...options.env,
    },
  });
}

/**
 * Runs a scheduler or a worker on a config directory whose one team file has errors, until it exits.
 * Returns its exit code, its output, and where it must have reported the errors (`file:line`).
 */
export async function runOnBrokenConfig(
  options: Omit<AppProcessOptions, 'configDir'>,
): Promise<{ code: number | null; output: string; errorsAt: string[] }> {
  const configDir = mkdtempSync(path.join(tmpdir(), 'tickwarden-bad-config-'));
  try {
    const errorsAt = writeBrokenTeamFile(configDir);
    const app = startAppProcess({ ...options, configDir });
    const { code } = await app.exited;
    return { code, output: app.lines.join('\n'), errorsAt };
  } finally {
    rmSync(configDir, { recursive: true, force: true });
  }
}
