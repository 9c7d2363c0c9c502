import { readFileSync } from 'node:fs';

/** What a run of a ledger handler writes: `start`, a `beat` every 50 ms while it works, `end`. */
export type LedgerEvent = 'start' | 'beat' | 'end';

/** One line of the ledger file, in the order the kernel appended it. */
export interface LedgerLine {
  schedule: string;
  /** The tick, ISO time (as the worker passes it: TICKWARDEN_TICK, the module's `tick`, X-Tickwarden-Tick). */
  tick: string;
  fence: number;
  /** The attempt as the handler knows it; 0 when it cannot (the http handler is not told its attempt). */
  attempt: number;
  event: LedgerEvent;
  pid: number;
  /** Wall-clock time of the write, ms (the writer's clock: a worker's, or the chaos harness's for http). */
  wallMs: number;
  /** 1-based line number in the file. */
  line: number;
}

/** One run: the lines written under one fencing token of one tick (one attempt holding the lease). */
export interface LedgerRun {
  schedule: string;
  tick: string;
  fence: number;
  /** 0 when unknown (see `LedgerLine.attempt`) and not resolved by `CheckOptions.attemptOf`. */
  attempt: number;
  ended: boolean;
  /** Wall-clock ms of its `start` and of its last line. */
  firstMs: number;
  lastMs: number;
}

/** A run that wrote after a run with a greater fence on the same lease had started: the two overlapped. */
export interface RunOverlap {
  schedule: string;
  /** The lease both runs held: the schedule, or `schedule tick` for `overlap: allow` (one lease per tick). */
  resource: string;
  staleFence: number;
  newerFence: number;
  /** The stale run's line that proves it. */
  line: number;
}

/** A run that started with a fence not greater than the previous run's on its lease. */
export interface FenceRegression {
  schedule: string;
  resource: string;
  previousFence: number;
  fence: number;
  line: number;
}

/** What the ledger proves about safety. */
export interface LedgerCheck {
  runs: LedgerRun[];
  /** `schedule tick` keys of ticks with at least one started run. */
  ticksRun: Set<string>;
  /** `schedule tick` -> the wall-clock ms of the tick's first `start`. */
  firstStartMs: Map<string, number>;
  /** `schedule tick` keys completed (an `end` line) more than once by the same attempt number: two jobs for one tick. */
  duplicateCompletions: string[];
  /** `schedule tick` keys started more than once by the same attempt number (ended or not): two jobs for one tick. */
  duplicateStarts: string[];
  /**
   * `schedule tick` keys completed again by a later attempt: BullMQ re-ran a job whose
   * completion was lost with its worker (killed between the handler's end and the job's
   * completion). At-least-once by design; downstream deduplicates by job id or fence.
   */
  rerunsAfterCompletion: string[];
  overlaps: RunOverlap[];
  fenceRegressions: FenceRegression[];
  /** Lines that do not parse (a torn write would show here). */
  malformed: { line: number; text: string }[];
}

export interface CheckOptions {
  /**
   * The lease a schedule's runs hold: the schedule itself (`skip`, `cancel-previous`: one lease
   * for all its runs, the default) or one per tick (`allow`: return `schedule tick`).
   */
  resourceOf?: (schedule: string, tick: string) => string;
  /** The attempt of a run whose handler could not write it (attempt 0): from the worker's logs. */
  attemptOf?: (schedule: string, tick: string, fence: number) => number | undefined;
}

const EVENTS = new Set<string>(['start', 'beat', 'end']);

/** The key the suites use for one tick of one schedule. */
export function tickKey(schedule: string, tick: string | number): string {
  return `${schedule} ${typeof tick === 'number' ? new Date(tick).toISOString() : tick}`;
}

/** `schedule` and tick epoch ms of a `schedule tick` key. */
export function splitTickKey(key: string): { schedule: string; tickMs: number } {
  const space = key.lastIndexOf(' ');
  return { schedule: key.slice(0, space), tickMs: Date.parse(key.slice(space + 1)) };
}

export function parseLedger(text: string): { lines: LedgerLine[]; malformed: { line: number; text: string }[] } {
  const lines: LedgerLine[] = [];
  const malformed: { line: number; text: string }[] = [];
  text.split('\n').forEach((raw, index) => {
    if (raw === '') return;
    const [schedule, tick, fence, attempt, event, pid, wallMs, ...rest] = raw.split(' ');
    const parsed = { fence: Number(fence), attempt: Number(attempt), pid: Number(pid), wallMs: Number(wallMs) };
    const ok =
      schedule &&
      tick &&
      !Number.isNaN(Date.parse(tick)) &&
      event &&
      EVENTS.has(event) &&
      wallMs &&
      rest.length === 0 &&
      Object.values(parsed).every(Number.isSafeInteger);
    if (!ok) malformed.push({ line: index + 1, text: raw });
    else lines.push({ schedule, tick, event: event as LedgerEvent, ...parsed, line: index + 1 });
  });
  return { lines, malformed };
}

export function readLedger(file: string): ReturnType<typeof parseLedger> {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  return parseLedger(text);
}

/**
 * Checks the ledger the way a fencing-aware downstream store would: per
 * lease (a schedule's, or a tick's for `allow`), once a run with fence F has
 * started, any line from a run with a smaller fence is a stale writer (the
 * two runs overlapped), and every new run's fence must be greater than the
 * previous run's. Per schedule, whatever its overlap policy, a run of a later
 * tick has a greater fence than every run of an earlier tick (`tickOrderRegressions`):
 * a store that keeps the highest token per schedule accepts each tick's writes.
 */
export function checkLedger(parsed: ReturnType<typeof parseLedger>, options: CheckOptions = {}): LedgerCheck {
  const resourceOf = options.resourceOf ?? ((schedule: string) => schedule);
  const runs = new Map<string, LedgerRun>();
  /** Per resource, the greatest fence a run started with. */
  const latestStart = new Map<string, number>();
  const completions = new Map<string, number[]>();
  const starts = new Map<string, number[]>();
  const firstStartMs = new Map<string, number>();
  const overlaps: RunOverlap[] = [];
  const fenceRegressions: FenceRegression[] = [];
  const staleReported = new Set<string>();
  for (const entry of parsed.lines) {
    const runKey = `${entry.schedule} ${entry.tick} ${entry.fence}`;
    const key = tickKey(entry.schedule, entry.tick);
    const resource = resourceOf(entry.schedule, entry.tick);
    const latest = latestStart.get(resource);
    if (entry.event === 'start') {
      if (latest !== undefined && entry.fence <= latest)
        fenceRegressions.push({
          schedule: entry.schedule,
          resource,
          previousFence: latest,
          fence: entry.fence,
          line: entry.line,
        });
      else latestStart.set(resource, entry.fence);
      const attempt =
        entry.attempt > 0 ? entry.attempt : (options.attemptOf?.(entry.schedule, entry.tick, entry.fence) ?? 0);
      runs.set(runKey, {
        schedule: entry.schedule,
        tick: entry.tick,
        fence: entry.fence,
        attempt,
        ended: false,
        firstMs: entry.wallMs,
        lastMs: entry.wallMs,
      });
      starts.set(key, [...(starts.get(key) ?? []), attempt]);
      const first = firstStartMs.get(key);
      if (first === undefined || entry.wallMs < first) firstStartMs.set(key, entry.wallMs);
      continue;
    }
    if (latest !== undefined && entry.fence < latest && !staleReported.has(runKey)) {
      staleReported.add(runKey);
      overlaps.push({
        schedule: entry.schedule,
        resource,
        staleFence: entry.fence,
        newerFence: latest,
        line: entry.line,
      });
    }
    const run = runs.get(runKey);
    if (run) run.lastMs = Math.max(run.lastMs, entry.wallMs);
    if (entry.event === 'end' && run && !run.ended) {
      run.ended = true;
      completions.set(key, [...(completions.get(key) ?? []), run.attempt]);
    }
  }
  const all = [...runs.values()];
  fenceRegressions.push(...tickOrderRegressions(parsed.lines));
  const repeated = (attempts: number[]): boolean => new Set(attempts).size < attempts.length;
  return {
    runs: all,
    ticksRun: new Set(all.map((run) => tickKey(run.schedule, run.tick))),
    firstStartMs,
    duplicateCompletions: [...completions].filter(([, attempts]) => repeated(attempts)).map(([key]) => key),
    duplicateStarts: [...starts].filter(([, attempts]) => repeated(attempts)).map(([key]) => key),
    rerunsAfterCompletion: [...completions]
      .filter(([, attempts]) => !repeated(attempts) && attempts.length > 1)
      .map(([key]) => key),
    overlaps,
    fenceRegressions,
    malformed: parsed.malformed,
  };
}

/** Per schedule, the starts whose fence is not above every fence a run of an earlier tick started with (resource `<schedule> by tick`). */
function tickOrderRegressions(lines: readonly LedgerLine[]): FenceRegression[] {
  const bySchedule = Map.groupBy(
    lines.filter((line) => line.event === 'start'),
    (line) => line.schedule,
  );
  const regressions: FenceRegression[] = [];
  for (const [schedule, starts] of bySchedule) {
    const byTick = [...Map.groupBy(starts, (start) => Date.parse(start.tick))].sort(([a], [b]) => a - b);
    let earlier = -Infinity;
    for (const [, ofTick] of byTick) {
      for (const start of ofTick)
        if (start.fence <= earlier)
          regressions.push({
            schedule,
            resource: `${schedule} by tick`,
            previousFence: earlier,
            fence: start.fence,
            line: start.line,
          });
      earlier = Math.max(earlier, ...ofTick.map((start) => start.fence));
    }
  }
  return regressions;
}
