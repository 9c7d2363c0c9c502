import { Worker } from 'node:worker_threads';
import { finishConfig, type ConfigFiles } from './load.ts';
import type { HttpDestinations } from './http-destinations.ts';
import type { ConfigError, ConfigResult, ScheduleConfig } from './types.ts';
import { ConfigAssembler, type FileCheck } from './validate.ts';

/**
 * What load-worker.ts posts, in this order: `read` (or `failed`); per file read, its schedules in
 * `schedules` messages, then the rest of its check in `file`; `done`. Checks travel as JSON: it
 * parses faster than a structured clone and into objects that take less memory.
 */
export type LoadMessage =
  | { kind: 'failed'; errors: ConfigError[] }
  | { kind: 'read'; read: ConfigFiles }
  | { kind: 'schedules'; json: string }
  | { kind: 'file'; file: string; json: string }
  | { kind: 'done' };

/** Schedules per message: the caller's event loop parses one message at a time, a few ms each. */
export const SCHEDULES_PER_MESSAGE = 1_000;

// From the sources (tests, local stack) the worker runs its TypeScript too, and resolves the
// workspace's packages to their sources as this process does.
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER = new URL(FROM_SOURCE ? './load-worker.ts' : './load-worker.js', import.meta.url);
const SOURCE_CONDITION = '--conditions=@tickwarden/source';
/** The worker's heap: it holds the files' texts and one file's checks; V8 would otherwise let it grow to hundreds of MB of garbage. */
const WORKER_HEAP = { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 256 };

/**
 * `loadConfig` with the reading, parsing and checking in a worker thread: the same result, but the
 * caller's event loop only puts the files' checks together, one file at a time, so a replica keeps
 * its ticks on time while 100,000 schedules are parsed; and the parser's garbage lives and dies in
 * the worker's heap. Rejects if the worker fails (the caller keeps its last good config).
 */
export function loadConfigOffThread(
  path: string,
  options: { httpDestinations?: HttpDestinations | undefined } = {},
): Promise<ConfigResult> {
  const execArgv =
    FROM_SOURCE && !process.execArgv.includes(SOURCE_CONDITION) ? [...process.execArgv, SOURCE_CONDITION] : undefined;
  const worker = new Worker(WORKER, {
    workerData: { path },
    resourceLimits: WORKER_HEAP,
    ...(execArgv ? { execArgv } : {}),
  });
  const config = new ConfigAssembler();
  let read: ConfigFiles | undefined;
  let schedules: ScheduleConfig[] = [];
  const checked: string[] = [];
  return new Promise<ConfigResult>((resolve, reject) => {
    worker.on('message', (message: LoadMessage) => {
      switch (message.kind) {
        case 'failed':
          resolve({ ok: false, errors: message.errors });
          break;
        case 'read':
          read = message.read;
          break;
        case 'schedules':
          for (const schedule of JSON.parse(message.json) as ScheduleConfig[]) schedules.push(schedule);
          break;
        case 'file':
          checked.push(message.file);
          config.add(message.file, { ...(JSON.parse(message.json) as Omit<FileCheck, 'schedules'>), schedules });
          schedules = [];
          break;
        case 'done':
          if (read === undefined) reject(new Error('config load worker: done before reading'));
          else resolve(finishConfig(config.result(checked), read, options.httpDestinations));
      }
    });
    worker.on('error', (error) => reject(new Error(`config load worker failed: ${error.message}`, { cause: error })));
    worker.on('exit', (code) => reject(new Error(`config load worker exited (code ${code}) before it was done`)));
  });
}
