import { Cron } from 'croner';

/**
 * Time zones already found valid. Asking `Intl` costs a `DateTimeFormat`, about 20 KB of ICU memory
 * outside the JavaScript heap that garbage collection frees late: 10,000 schedules checked twice
 * each left 100 MB more resident memory behind. Only valid names are kept, so the set stays small.
 */
const knownTimeZones = new Set<string>();

/** True for a time zone `Intl` knows (IANA names such as `Europe/Berlin`, `UTC`, `Etc/GMT+1`). */
export function isTimeZone(name: string): boolean {
  // Offsets such as `+01:00` are not IANA names (and croner reads them differently).
  if (name === '' || /^[+-]/.test(name)) return false;
  if (knownTimeZones.has(name)) return true;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
  } catch {
    return false;
  }
  knownTimeZones.add(name);
  return true;
}

/** croner's nicknames (it also knows `@reboot`, which is no schedule). */
const NICKNAMES = ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'];

/**
 * Checks a cron expression the way the scheduler will run it: 5 fields, or 6 with seconds first
 * (croner syntax, including nicknames such as `@daily`), evaluated in `timezone`. Returns why it
 * is invalid, or `undefined` when it is fine. An expression that can never fire (`0 0 31 2 *`) is
 * invalid too.
 */
export function cronProblem(pattern: string, timezone: string): string | undefined {
  const trimmed = pattern.trim();
  if (trimmed.startsWith('@')) {
    if (!NICKNAMES.includes(trimmed.toLowerCase()))
      return `unknown nickname ${JSON.stringify(trimmed)}; expected one of ${NICKNAMES.join(', ')}`;
  } else {
    const fields = trimmed === '' ? 0 : trimmed.split(/\s+/).length;
    if (fields !== 5 && fields !== 6)
      return `expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got ${fields}`;
  }
  let job: Cron | undefined;
  try {
    // croner writes its defaults into the options object it is given: always a fresh literal.
    job = new Cron(pattern, { timezone, paused: true, mode: '5-or-6-parts' });
    if (job.nextRun() === null) return 'it never fires (no date matches it)';
    return undefined;
  } catch (error) {
    return (error instanceof Error ? error.message : String(error)).replace(/^CronPattern: /, '');
  } finally {
    job?.stop();
  }
}

/** Parsed patterns of `ticksAround`, by time zone and pattern; a worker asks about every job's schedule. */
const aroundCache = new Map<string, Cron>();
/** At most this many patterns stay parsed (then the cache starts over): one per distinct cron and zone of a config. */
const AROUND_CACHE_MAX = 10_000;

function parsed(pattern: string, timezone: string): Cron {
  const key = `${timezone} ${pattern}`;
  let cron = aroundCache.get(key);
  if (!cron) {
    if (aroundCache.size >= AROUND_CACHE_MAX) aroundCache.clear();
    cron = new Cron(pattern, { timezone, paused: true });
    aroundCache.set(key, cron);
  }
  return cron;
}

/**
 * The pattern's last tick strictly before `tickMs` and first strictly after it (epoch ms) in
 * `timezone`, each undefined when it has none. For a worker placing a run among its schedule's
 * (the tick before, which it may wait for; the next, whose runs pass it); the scheduler plans
 * ticks with its own shared patterns.
 */
export function ticksAround(
  pattern: string,
  timezone: string,
  tickMs: number,
): { previous: number | undefined; next: number | undefined } {
  const cron = parsed(pattern, timezone);
  return {
    previous: cron.previousRuns(1, new Date(tickMs))[0]?.getTime(),
    next: cron.nextRun(new Date(tickMs))?.getTime(),
  };
}

/**
 * The pattern's first tick strictly after `afterMs` (epoch ms) in `timezone`, or undefined when it
 * has none (a worker asking whether a `cancel-previous` run's successor is due).
 */
export function nextTickAfter(pattern: string, timezone: string, afterMs: number): number | undefined {
  return parsed(pattern, timezone).nextRun(new Date(afterMs))?.getTime();
}
