/**
 * The bounds a configuration must stay within. Team files are written by many hands and read by
 * every replica and worker: each bound keeps what one file can cost (memory, CPU, Redis state,
 * how long a timer waits) small, and is reported as a config error naming file, line and field.
 */

const KIB = 1024;
const MIB = 1024 * KIB;

/** The longest duration accepted anywhere: timers cannot wait longer than 2^31-1 ms (~24.8 days). */
export const MAX_DURATION_MS = 24 * 86_400_000;
/**
 * The longest `catchUp` and `startDeadline`: whether a tick already ran is kept (its claim on the
 * lock nodes, its publish marker in the queue Redis) for the longer of the two plus a margin, and
 * both stay bounded so that state does (per-second schedules keep one entry per tick).
 */
export const MAX_TICK_WINDOW_MS = 86_400_000;
/** The longest `jitter`: a delay meant to spread load, not to postpone a run by days. */
export const MAX_JITTER_MS = 3_600_000;
/** The largest `attempts`: each attempt may hold a worker for `maxRuntime`. */
export const MAX_ATTEMPTS = 100;
/** The longest `backoff.delay`; with `exponential`, the longest wait between attempts is at most MAX_DURATION_MS too. */
export const MAX_BACKOFF_DELAY_MS = 3_600_000;
/** The largest `payload`, as JSON (UTF-8 bytes): it is copied into every job of the schedule. */
export const MAX_PAYLOAD_BYTES = 64 * KIB;
/** The largest team file (UTF-8 bytes), checked before it is parsed: the parser's memory grows with the text. */
export const MAX_FILE_BYTES = 4 * MIB;
/** The most schedules in one file: one team's file cannot take all of MAX_SCHEDULES. */
export const MAX_SCHEDULES_PER_FILE = 10_000;
/** The most schedules in the whole configuration: every replica plans each of them. */
export const MAX_SCHEDULES = 100_000;

/**
 * The most entries a schedule's history keeps of each kind (tick outcomes, run results, control
 * actions): each entry is a few hundred bytes in the queue Redis, kept per schedule.
 */
export const MAX_HISTORY_KEEP = 1000;
/** The longest a history entry is kept (not a timer: `keep` bounds what it costs). */
export const MAX_HISTORY_AGE_MS = 90 * 86_400_000;

/** `65536` -> `64 KiB`, `4194304` -> `4 MiB`, `1000` -> `1000 bytes`: how a byte limit reads in a message. */
export function formatBytes(bytes: number): string {
  if (bytes >= MIB && bytes % MIB === 0) return `${bytes / MIB} MiB`;
  if (bytes >= KIB && bytes % KIB === 0) return `${bytes / KIB} KiB`;
  return `${bytes} bytes`;
}
