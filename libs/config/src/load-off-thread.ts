import { Worker } from 'node:worker_threads';
import { finishConfig, type ConfigFiles } from './load.ts';
import type { HttpDestinations } from './http-destinations.ts';
import { SharedParts } from './shared-parts.ts';
import type { ConfigError, ConfigResult, ScheduleConfig, TickwardenConfig } from './types.ts';

/**
 * What load-worker.ts posts, in this order: `read` (or `failed`); the schedules of each file read,
 * in `slice` messages, or `unchanged` for a file whose text is the one the previous config was
 * loaded from (this thread takes that file's schedules from it); once every file is checked, the
 * errors in `slice` messages too (none when the configuration is valid), then `done` with the
 * files checked. The worker puts the files' checks together itself (`team/name` across files, the
 * total), so this thread only collects the lists. They travel as JSON: it parses faster than a
 * structured clone and into objects that take less memory; the schedules' repeated parts are
 * then shared (SharedParts).
 */
export type LoadMessage =
  | { kind: 'failed'; errors: ConfigError[] }
  | { kind: 'read'; read: ConfigFiles }
  | { kind: 'slice'; list: 'schedules' | 'errors'; json: string }
  | { kind: 'unchanged'; file: string }
  | { kind: 'done'; files: string[] };

/**
 * load-worker.ts's input: the configuration's path, and the previous config's files: each one's
 * digest, schedule count and `team/name` ids (joined by newlines: one string clones faster than
 * an array of thousands).
 */
export interface LoadWorkerData {
  path: string;
  known: { file: string; digest: string; count: number; ids: string }[];
}

/** Entries per `slice` message: the caller's event loop parses one message at a time, a few ms each. */
export const ENTRIES_PER_MESSAGE = 1_000;

// From the sources (tests, local stack) the worker runs its TypeScript too, and resolves the
// workspace's packages to their sources as this process does.
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER = new URL(FROM_SOURCE ? './load-worker.ts' : './load-worker.js', import.meta.url);
const SOURCE_CONDITION = '--conditions=@tickwarden/source';
/**
 * The worker's heap: it holds the files' texts, one file's checks and every schedule's identity
 * (for the checks across files); V8 would otherwise let it grow to hundreds of MB of garbage.
 */
const WORKER_HEAP = { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 256 };

/**
 * `loadConfig` with the reading, parsing and checking in a worker thread: the same result, but the
 * caller's event loop only collects the schedules (or errors), a slice at a time, so a replica keeps
 * its ticks on time while 100,000 schedules are parsed; and the parser's garbage lives and dies in
 * the worker's heap. Given the config it replaces (`previous`), the schedules of each file whose
 * text did not change are that config's own objects: a reload after one team's edit builds only
 * that team's schedules here. Rejects if the worker fails (the caller keeps its last good config).
 */
export async function loadConfigOffThread(
  path: string,
  options: { httpDestinations?: HttpDestinations | undefined; previous?: TickwardenConfig | undefined } = {},
): Promise<ConfigResult> {
  const execArgv =
    FROM_SOURCE && !process.execArgv.includes(SOURCE_CONDITION) ? [...process.execArgv, SOURCE_CONDITION] : undefined;
  const previous = await previousFiles(options.previous);
  const data: LoadWorkerData = { path, known: previous.known };
  const worker = new Worker(WORKER, {
    workerData: data,
    resourceLimits: WORKER_HEAP,
    ...(execArgv ? { execArgv } : {}),
  });
  let read: ConfigFiles | undefined;
  const parts = new SharedParts();
  const lists: { schedules: ScheduleConfig[]; errors: ConfigError[] } = { schedules: [], errors: [] };
  return new Promise<ConfigResult>((resolve, reject) => {
    const handle = (message: LoadMessage): void => {
      switch (message.kind) {
        case 'failed':
          resolve({ ok: false, errors: message.errors });
          break;
        case 'read':
          read = message.read;
          break;
        case 'unchanged':
          for (const schedule of previous.schedules.get(message.file) ?? []) lists.schedules.push(schedule);
          break;
        case 'slice': {
          const entries = JSON.parse(message.json) as unknown[];
          if (message.list === 'errors') lists.errors.push(...(entries as ConfigError[]));
          else for (const entry of entries as ScheduleConfig[]) lists.schedules.push(parts.share(entry));
          break;
        }
        case 'done': {
          const { schedules, errors } = lists;
          const result: ConfigResult =
            errors.length > 0 ? { ok: false, errors } : { ok: true, config: { schedules, files: message.files } };
          if (read === undefined) reject(new Error('config load worker: done before reading'));
          else resolve(finishConfig(result, read, options.httpDestinations));
        }
      }
    };
    // A port hands over every message that has arrived in one go: each is handled in a turn of the
    // event loop of its own, so timers run between them. The exit waits its turn behind them.
    const queue: (() => void)[] = [];
    const next = (): void => {
      (queue.shift() as () => void)();
      if (queue.length > 0) setImmediate(next);
    };
    const later = (step: () => void): void => {
      if (queue.push(step) === 1) setImmediate(next);
    };
    worker.on('message', (message: LoadMessage) => later(() => handle(message)));
    worker.on('error', (error) => reject(new Error(`config load worker failed: ${error.message}`, { cause: error })));
    worker.on('exit', (code) =>
      later(() => reject(new Error(`config load worker exited (code ${code}) before it was done`))),
    );
  });
}

/** Schedules of the previous config grouped per turn of the event loop: a big config in one go would hold it. */
const GROUP_SLICE = 5_000;
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * The previous config's files as the worker needs them (digest, schedule count, ids) and its
 * schedules by file, made a slice at a time: the caller's event loop runs its ticks in between.
 */
async function previousFiles(
  previous: TickwardenConfig | undefined,
): Promise<{ known: LoadWorkerData['known']; schedules: Map<string, ScheduleConfig[]> }> {
  const schedules = new Map<string, ScheduleConfig[]>();
  if (previous?.digests === undefined) return { known: [], schedules };
  for (const [i, schedule] of previous.schedules.entries()) {
    const list = schedules.get(schedule.source.file);
    if (list) list.push(schedule);
    else schedules.set(schedule.source.file, [schedule]);
    if (i % GROUP_SLICE === GROUP_SLICE - 1) await nextTurn();
  }
  const known: LoadWorkerData['known'] = [];
  for (const [file, digest] of previous.digests) {
    const list = schedules.get(file) ?? [];
    known.push({ file, digest, count: list.length, ids: list.map(({ id }) => id).join('\n') });
    // A file holds at most MAX_SCHEDULES_PER_FILE: one per turn.
    await nextTurn();
  }
  return { known, schedules };
}
