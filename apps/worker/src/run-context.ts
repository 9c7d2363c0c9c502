import type { Logger } from 'pino';

/** What every handler receives for one attempt of one tick's job. */
export interface RunContext {
  /** `team/name`. */
  schedule: string;
  /** The tick, epoch ms. */
  tickMs: number;
  /** The fencing token of this attempt's lease grant: strictly greater than any earlier attempt's. */
  fence: number;
  /** The BullMQ job id (`<team>/<name>@<tick epoch ms>`): the same for every attempt of the tick, an idempotency key. */
  jobId: string;
  /** 1 for the first start, then 2, 3, ... (retries and stalled re-runs). */
  attempt: number;
  /** The schedule's payload, any JSON value. */
  payload: unknown;
  /** Aborts when the run must stop: lease lost, max runtime, worker shutdown, job cancelled. */
  signal: AbortSignal;
  /** The validity of this attempt's lease, kept current by the watchdog's extensions. */
  lease: LeaseValidity;
  /** A child logger carrying the run's fields (worker, schedule, tick, jobId, fence, attempt). */
  logger: Logger;
  /**
   * Awaited by the handler right before its work can begin (the program's gate opens, the request
   * is sent): the worker records the start in the job. A run stopped before this call did nothing,
   * so the worker puts its job back instead of failing it; when it rejects, the work must not begin.
   */
  started(): void | Promise<void>;
}

/**
 * What a handler knows of its run's lease: how long it stays valid, and when an
 * extension moved that end. Nothing of a run may outlive this validity.
 */
export interface LeaseValidity {
  /** Milliseconds until the lease's validity ends (negative once it ended). */
  msLeft(): number;
  /** Calls `listener` after each successful extension; returns the function that removes it. */
  onExtended(listener: () => void): () => void;
}

/** What a successful handler reports for the run's log line (status code, exit code, ...). */
export type RunDetails = Record<string, unknown>;

/** A handler failure: `details` go to the log line next to the message. */
export class HandlerError extends Error {
  readonly details: RunDetails;
  constructor(message: string, details: RunDetails = {}, options?: ErrorOptions) {
    super(message, options);
    this.name = 'HandlerError';
    this.details = details;
  }
}

export const tickIso = (context: Pick<RunContext, 'tickMs'>): string => new Date(context.tickMs).toISOString();
