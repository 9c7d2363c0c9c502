import type { Logger } from 'pino';

/** What followNodeTime needs of a ReferenceClock (libs/redlock): wall time from the lock nodes. */
export interface TimeReference {
  /** How far the host's clock is off the lock nodes' time, ms; undefined before a first sample. */
  readonly offsetMs: number | undefined;
  sample(): Promise<boolean>;
  start(intervalMs: number, onSample: (sampled: boolean) => void): void;
  stop(): void;
}

/** The lock nodes' time is sampled this often, ms: between samples it moves on the monotonic clock. */
export const NODE_TIME_SAMPLE_MS = 2000;
/** A host clock off the lock nodes' time by more than this is logged, ms (the process decides on the nodes' time whatever it is). */
export const CLOCK_OFFSET_WARN_MS = 1000;
/** At start, the first sample is tried this long (the lock connections are opening), ms. */
const FIRST_SAMPLE_WAIT_MS = 3000;
const FIRST_SAMPLE_RETRY_MS = 100;

/** Whether an offset is beyond the bound: a change from `wasOff` is logged (undefined: no sample, no change). */
export function clockOffNow(wasOff: boolean, offsetMs: number | undefined, boundMs: number): boolean {
  return offsetMs === undefined ? wasOff : Math.abs(offsetMs) > boundMs;
}

/**
 * Makes a process decide on the lock nodes' time: takes a first sample (tried for a few
 * seconds), then one every NODE_TIME_SAMPLE_MS, and logs when the host's clock goes beyond
 * CLOCK_OFFSET_WARN_MS off it and when it is back. Without a first sample the reference is the
 * host's clock until one is taken, said at warn.
 */
export async function followNodeTime(reference: TimeReference, logger: Logger): Promise<void> {
  let off = false;
  let anchored = false;
  const report = (sampled: boolean): void => {
    if (sampled && !anchored) {
      anchored = true;
      logger.info(
        { clockOffsetMs: Math.round(reference.offsetMs ?? 0) },
        "wall time from the lock nodes: this process plans and judges ticks on the lock nodes' time",
      );
    }
    const now = clockOffNow(off, sampled ? reference.offsetMs : undefined, CLOCK_OFFSET_WARN_MS);
    if (now === off) return;
    off = now;
    const clockOffsetMs = Math.round(reference.offsetMs ?? 0);
    if (off)
      logger.warn(
        { clockOffsetMs, boundMs: CLOCK_OFFSET_WARN_MS },
        "this host's clock is off the lock nodes' time: this process goes on deciding on the lock nodes' time; fix the host's time sync",
      );
    else logger.info({ clockOffsetMs }, "this host's clock agrees with the lock nodes' time again");
  };
  const giveUpAt = performance.now() + FIRST_SAMPLE_WAIT_MS;
  let sampled = await reference.sample();
  while (!sampled && performance.now() < giveUpAt) {
    await new Promise((resolve) => setTimeout(resolve, FIRST_SAMPLE_RETRY_MS));
    sampled = await reference.sample();
  }
  if (!sampled)
    logger.warn(
      { waitedMs: FIRST_SAMPLE_WAIT_MS },
      "the lock nodes' time could not be read (no quorum answered): this process uses its host's clock until they answer",
    );
  report(sampled);
  reference.start(NODE_TIME_SAMPLE_MS, report);
}
