/**
 * The command guard: a sidecar process, one per worker process, spawned by
 * CommandGuard (command-guard.ts) with a pipe to the worker. It stops command
 * runs from outliving their leases when the worker cannot see to it itself:
 * - the worker is gone: stdin reaches EOF (the worker exited, crashed or was
 *   SIGKILLed; only the worker holds the pipe's write end) -> SIGKILL every
 *   watched process group at once, then exit;
 * - the worker is paused or stuck: a group's kill time passes without the
 *   worker moving it (it does after each lease extension) -> SIGKILL that group.
 *
 * stdin, one line each: `watch <pgid> <killAtMs>` | `unwatch <pgid>`, where
 * killAtMs is on CLOCK_MONOTONIC (process.hrtime), shared by every process of
 * the host. stdout: `ready <pid>` once, then `killed <pgid> <lateMs>` per
 * deadline kill. Groups are signalled by id only (kill(-pgid)), never by name.
 * Node built-ins only: it starts fast, and runs as .ts (type stripping) or as
 * built .js alike.
 */
import readline from 'node:readline';

/** setTimeout's longest delay; a later kill time is simply re-armed when the timer fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;
const killAt = new Map<number, number>();
let timer: NodeJS.Timeout | undefined;

function report(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** A group this guard may kill: never 0, 1 or -1 (kill() would reach far more), nor its own or the worker's group. */
function isCommandGroup(pgid: number): boolean {
  return Number.isSafeInteger(pgid) && pgid > 1 && pgid !== process.pid && pgid !== process.ppid;
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // ESRCH: the group is gone already. EPERM: not ours; nothing more a guard can do.
  }
}

function expire(): void {
  const now = monotonicMs();
  for (const [pgid, at] of killAt) {
    if (at > now) continue;
    killGroup(pgid);
    killAt.delete(pgid);
    report(`killed ${pgid} ${Math.round(now - at)}`);
  }
  arm();
}

function arm(): void {
  clearTimeout(timer);
  if (killAt.size === 0) return;
  const next = Math.min(...killAt.values());
  timer = setTimeout(expire, Math.min(MAX_TIMER_MS, Math.max(0, Math.ceil(next - monotonicMs()))));
}

function onLine(line: string): void {
  const [verb, id, at] = line.trim().split(' ');
  const pgid = Number(id);
  if (!isCommandGroup(pgid)) return;
  if (verb === 'watch' && Number.isFinite(Number(at))) killAt.set(pgid, Number(at));
  else if (verb === 'unwatch') killAt.delete(pgid);
  arm();
}

function workerGone(): void {
  for (const pgid of killAt.keys()) killGroup(pgid);
  process.exit(0);
}

readline.createInterface({ input: process.stdin }).on('line', onLine).on('close', workerGone);
process.stdin.on('error', workerGone);
// Reports to a worker that is gone fail with EPIPE: nothing to do about them.
process.stdout.on('error', () => undefined);
// A terminal's Ctrl-C or hangup reaches the worker's whole group: the guard leaves only with the worker (EOF).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
report(`ready ${process.pid}`);
