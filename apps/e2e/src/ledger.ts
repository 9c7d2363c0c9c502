import { readFileSync } from 'node:fs';

/** What a run of the ledger job writes: `start`, a `beat` every 50 ms while it works, `end`. */
export type LedgerEvent = 'start' | 'beat' | 'end';

/** One line of the ledger file, in the order the kernel appended it. */
export interface LedgerLine {
  schedule: string;
  /** The tick, ISO time (as the worker passes it in TICKWARDEN_TICK). */
  tick: string;
  fence: number;
  attempt: number;
  event: LedgerEvent;
  pid: number;
  /** 1-based line number in the file. */
  line: number;
}

/** One run: the lines written under one fencing token (one attempt holding the lease). */
export interface LedgerRun {
  schedule: string;
  tick: string;
  fence: number;
  attempt: number;
  ended: boolean;
}

/** A run that wrote after a run with a greater fence had started: the two overlapped. */
export interface Overlap {
  schedule: string;
  staleFence: number;
  newerFence: number;
  /** The stale run's line that proves it. */
  line: number;
}

/** A run that started with a fence not greater than the previous run's on its schedule. */
export interface FenceRegression {
  schedule: string;
  previousFence: number;
  fence: number;
  line: number;
}

/** What the ledger proves about safety. */
export interface LedgerCheck {
  runs: LedgerRun[];
  /** `schedule tick` keys of ticks with at least one started run. */
  ticksRun: Set<string>;
  /** `schedule tick` keys completed (an `end` line) more than once by the same attempt number: two jobs for one tick. */
  duplicateCompletions: string[];
  /**
   * `schedule tick` keys completed again by a later attempt: BullMQ re-ran a job whose
   * completion was lost with its worker (killed between the handler's end and the job's
   * completion). At-least-once by design; downstream deduplicates by job id or fence.
   */
  rerunsAfterCompletion: string[];
  overlaps: Overlap[];
  fenceRegressions: FenceRegression[];
  /** Lines that do not parse (a torn write would show here). */
  malformed: { line: number; text: string }[];
}

const EVENTS = new Set<string>(['start', 'beat', 'end']);

/** The key the suites use for one tick of one schedule. */
export function tickKey(schedule: string, tick: string | number): string {
  return `${schedule} ${typeof tick === 'number' ? new Date(tick).toISOString() : tick}`;
}

export function parseLedger(text: string): { lines: LedgerLine[]; malformed: { line: number; text: string }[] } {
  const lines: LedgerLine[] = [];
  const malformed: { line: number; text: string }[] = [];
  text.split('\n').forEach((raw, index) => {
    if (raw === '') return;
    const [schedule, tick, fence, attempt, event, pid, ...rest] = raw.split(' ');
    const parsed = { fence: Number(fence), attempt: Number(attempt), pid: Number(pid) };
    const ok = schedule && tick && event && EVENTS.has(event) && rest.length === 0 && Object.values(parsed).every(Number.isSafeInteger);
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
 * schedule, once a run with fence F has started, any line from a run with a
 * smaller fence is a stale writer (the two runs overlapped), and every new
 * run's fence must be greater than the previous run's.
 */
export function checkLedger(parsed: ReturnType<typeof parseLedger>): LedgerCheck {
  const runs = new Map<string, LedgerRun>();
  /** Per schedule, the greatest fence a run started with. */
  const latestStart = new Map<string, number>();
  const completions = new Map<string, number[]>();
  const overlaps: Overlap[] = [];
  const fenceRegressions: FenceRegression[] = [];
  const staleReported = new Set<string>();
  for (const entry of parsed.lines) {
    const runKey = `${entry.schedule} ${entry.fence}`;
    const latest = latestStart.get(entry.schedule);
    if (entry.event === 'start') {
      if (latest !== undefined && entry.fence <= latest) fenceRegressions.push({ schedule: entry.schedule, previousFence: latest, fence: entry.fence, line: entry.line });
      else latestStart.set(entry.schedule, entry.fence);
      runs.set(runKey, { schedule: entry.schedule, tick: entry.tick, fence: entry.fence, attempt: entry.attempt, ended: false });
      continue;
    }
    if (latest !== undefined && entry.fence < latest && !staleReported.has(runKey)) {
      staleReported.add(runKey);
      overlaps.push({ schedule: entry.schedule, staleFence: entry.fence, newerFence: latest, line: entry.line });
    }
    const run = runs.get(runKey);
    if (entry.event === 'end' && run && !run.ended) {
      run.ended = true;
      const key = tickKey(entry.schedule, entry.tick);
      completions.set(key, [...(completions.get(key) ?? []), entry.attempt]);
    }
  }
  const all = [...runs.values()];
  return {
    runs: all,
    ticksRun: new Set(all.map((run) => tickKey(run.schedule, run.tick))),
    duplicateCompletions: [...completions].filter(([, attempts]) => new Set(attempts).size < attempts.length).map(([key]) => key),
    rerunsAfterCompletion: [...completions].filter(([, attempts]) => new Set(attempts).size === attempts.length && attempts.length > 1).map(([key]) => key),
    overlaps,
    fenceRegressions,
    malformed: parsed.malformed,
  };
}
