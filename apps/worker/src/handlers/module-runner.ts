// Runs inside a worker thread: imports the schedule's module and calls its export once.
// Only Node built-ins here: this file is loaded by Node directly, outside any bundler.
import { parentPort, workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';

/** What the parent sends when starting the thread. */
export interface ModuleRunnerInput {
  modulePath: string;
  exportName: string;
  context: { schedule: string; tick: string; tickMs: number; fence: number; jobId: string; attempt: number; payload: unknown };
}

/** Messages from the parent. */
export type ToRunner = { type: 'abort'; reason: string };

/** Messages to the parent. */
export type FromRunner =
  | { type: 'log'; level: 'debug' | 'info' | 'warn' | 'error'; msg: string; fields: Record<string, unknown> }
  | { type: 'done'; ok: true }
  | { type: 'done'; ok: false; error: { name: string; message: string; stack: string | undefined } };

const port = parentPort;
if (!port) throw new Error('module-runner must run in a worker thread');
const input = workerData as ModuleRunnerInput;
const controller = new AbortController();
port.on('message', (message: ToRunner) => {
  if (message.type === 'abort') controller.abort(new DOMException(message.reason, 'AbortError'));
});

const post = (message: FromRunner): void => port.postMessage(message);

/** Fields as plain data (what structured clone and JSON both accept). */
function plain(fields: unknown): Record<string, unknown> {
  if (fields === null || typeof fields !== 'object') return {};
  try {
    const text = JSON.stringify(fields, (_key, value: unknown) => (value instanceof Error ? { name: value.name, message: value.message } : typeof value === 'bigint' ? String(value) : value));
    return text === undefined ? {} : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    return { fields: '(not serializable)' };
  }
}

type LogCall = (first: unknown, second?: unknown) => void;
const level =
  (name: 'debug' | 'info' | 'warn' | 'error'): LogCall =>
  (first, second) => {
    // Both logger.info('message', { fields }) and pino's logger.info({ fields }, 'message').
    if (typeof first === 'string') post({ type: 'log', level: name, msg: first, fields: plain(second) });
    else post({ type: 'log', level: name, msg: typeof second === 'string' ? second : '', fields: plain(first) });
  };
const logger = { debug: level('debug'), info: level('info'), warn: level('warn'), error: level('error') };

function describe(error: unknown): { name: string; message: string; stack: string | undefined } {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { name: 'Error', message: String(error), stack: undefined };
}

try {
  const loaded = (await import(pathToFileURL(input.modulePath).href)) as Record<string, unknown>;
  const fn = loaded[input.exportName];
  if (typeof fn !== 'function') {
    throw new TypeError(`module ${input.modulePath} has no function export "${input.exportName}" (found ${fn === undefined ? 'nothing' : typeof fn})`);
  }
  await (fn as (context: unknown) => unknown)({ ...input.context, signal: controller.signal, logger });
  post({ type: 'done', ok: true });
} catch (error) {
  post({ type: 'done', ok: false, error: describe(error) });
}
