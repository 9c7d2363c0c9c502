// A module handler's call, as a process of its own: `node module-runner.(ts|js) <module path> <export name>`,
// spawned by runModule (module.ts) through the command path - behind the gate, in the run's own
// process group, which the command guard SIGKILLs at the lease deadline even while the worker is paused.
// It reads the run from the TICKWARDEN_* variables and the payload (JSON) from stdin, imports the
// module, calls the export once, reports on fd 4 (one JSON line per record, see RunnerReport),
// and exits: whatever the module left running (timers, sockets) ends with the process.
// Only Node built-ins here: Node loads this file directly (type stripping for the .ts source).
import { writeSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** The fd of the report channel: a pipe the worker opens next to the gate's (fd 3, closed before the exec). */
export const REPORT_FD = 4;

/** One line on the report channel. */
export type RunnerReport =
  | { type: 'log'; level: 'debug' | 'info' | 'warn' | 'error'; msg: string; fields: Record<string, unknown> }
  | { type: 'done'; ok: true }
  /** The call threw or rejected (`crashed`: an exception escaped it, from a timer or a listener, and ended the process). */
  | { type: 'done'; ok: false; crashed?: boolean; error: { name: string; message: string; stack: string | undefined } };

/** Fields of a log record longer than this as JSON are replaced by a note, characters. */
const MAX_FIELDS_CHARS = 256 * 1024;

let reported = false;

/** Writes one record to the report channel: synchronously (it is complete when the process exits, records stay in order). */
function report(message: RunnerReport): void {
  const bytes = Buffer.from(`${JSON.stringify(message)}\n`, 'utf8');
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += writeSync(REPORT_FD, bytes, offset);
    } catch (error) {
      // EAGAIN: the worker has not read yet; anything else (EPIPE: the worker is gone) ends the reporting.
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') return;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
}

function finish(message: Extract<RunnerReport, { type: 'done' }>, exitCode: number): never {
  if (!reported) {
    reported = true;
    report(message);
  }
  process.exit(exitCode);
}

/** Fields as plain JSON data. */
function plain(fields: unknown): Record<string, unknown> {
  if (fields === null || typeof fields !== 'object') return {};
  try {
    const text = JSON.stringify(fields, (_key, value: unknown) =>
      value instanceof Error
        ? { name: value.name, message: value.message }
        : typeof value === 'bigint'
          ? String(value)
          : value,
    );
    if (text === undefined) return {};
    if (text.length > MAX_FIELDS_CHARS) return { fields: `(${text.length} characters of JSON: too large)` };
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { fields: '(not serializable)' };
  }
}

type LogCall = (first: unknown, second?: unknown) => void;
const level =
  (name: 'debug' | 'info' | 'warn' | 'error'): LogCall =>
  (first, second) => {
    // Both logger.info('message', { fields }) and pino's logger.info({ fields }, 'message').
    if (typeof first === 'string') report({ type: 'log', level: name, msg: first, fields: plain(second) });
    else report({ type: 'log', level: name, msg: typeof second === 'string' ? second : '', fields: plain(first) });
  };
const logger = { debug: level('debug'), info: level('info'), warn: level('warn'), error: level('error') };

function describe(error: unknown): { name: string; message: string; stack: string | undefined } {
  if (error instanceof Error) return { name: error.name, message: error.message, stack: error.stack };
  return { name: 'Error', message: String(error), stack: undefined };
}

// SIGTERM is the worker's abort (to the whole group); SIGKILL follows after the kill grace.
// A signal listener does not keep the process alive: a call waiting for nothing but its signal would
// end the process (an unsettled top-level await, exit 13). The worker decides when a call ends (an
// abort, the lease's end): until the call settles, this timer keeps the process alive.
setInterval(() => undefined, 2 ** 31 - 1);
const controller = new AbortController();
process.on('SIGTERM', () =>
  controller.abort(new DOMException('the run was aborted: the worker sent SIGTERM', 'AbortError')),
);
process.on('uncaughtException', (error) => {
  // A module that listens for these itself handles them (Node calls every listener).
  if (process.listenerCount('uncaughtException') > 1) return;
  finish({ type: 'done', ok: false, crashed: true, error: describe(error) }, 1);
});

const [modulePath, exportName] = process.argv.slice(2);
const env = process.env;
try {
  if (modulePath === undefined || exportName === undefined)
    throw new Error('usage: module-runner <module path> <export name>');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const input = Buffer.concat(chunks).toString('utf8');
  const tick = env['TICKWARDEN_TICK'] ?? '';
  const context = {
    schedule: env['TICKWARDEN_SCHEDULE'] ?? '',
    tick,
    tickMs: Date.parse(tick),
    fence: Number(env['TICKWARDEN_FENCE']),
    jobId: env['TICKWARDEN_JOB_ID'] ?? '',
    attempt: Number(env['TICKWARDEN_ATTEMPT']),
    payload: input === '' ? null : (JSON.parse(input) as unknown),
  };
  const loaded = (await import(pathToFileURL(modulePath).href)) as Record<string, unknown>;
  const fn = loaded[exportName];
  if (typeof fn !== 'function') {
    throw new TypeError(
      `module ${modulePath} has no function export "${exportName}" (found ${fn === undefined ? 'nothing' : typeof fn})`,
    );
  }
  await (fn as (context: unknown) => unknown)({ ...context, signal: controller.signal, logger });
  finish({ type: 'done', ok: true }, 0);
} catch (error) {
  finish({ type: 'done', ok: false, error: describe(error) }, 0);
}
