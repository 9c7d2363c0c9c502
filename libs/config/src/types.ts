import type { Overlap } from '@tickwarden/contracts';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type HttpRedirects = 'none' | 'same-origin';
/** A value read at run time from a mounted Secret (`TICKWARDEN_SECRETS_DIR/<secret>/<key>`), never written in a schedule file. */
export interface SecretRef {
  secret: string;
  key: string;
}
/** A header or environment value: as written, or from a Secret. */
export type ConfigValue = string | SecretRef;

export type HandlerConfig =
  | {
      kind: 'http';
      url: string;
      method: HttpMethod;
      headers: Record<string, ConfigValue>;
      timeoutMs: number;
      redirects: HttpRedirects;
    }
  | { kind: 'command'; argv: string[]; cwd: string | undefined; env: Record<string, ConfigValue>; killGraceMs: number }
  | { kind: 'module'; path: string; exportName: string; killGraceMs: number };

export type BackoffType = 'fixed' | 'exponential';

/** One validated schedule, every default applied and every duration in milliseconds. */
/**
 * How much of a schedule's history the queue Redis keeps, per kind (tick outcomes, run results,
 * control actions): the newest `keep` entries younger than `maxAgeMs` (tick outcomes also as long
 * as exactly-once needs them).
 */
export interface HistoryRetention {
  keep: number;
  maxAgeMs: number;
}

export interface ScheduleConfig {
  /** `${team}/${name}`, unique across all files. */
  id: string;
  team: string;
  name: string;
  /** The cron expression as written (5 fields, or 6 with seconds; croner syntax). */
  cron: string;
  /** IANA time zone the cron expression is evaluated in, as written (default `UTC`). */
  timezone: string;
  handler: HandlerConfig;
  /** Any JSON value (default `null`). */
  payload: unknown;
  overlap: Overlap;
  leaseTtlMs: number;
  maxRuntimeMs: number | undefined;
  startDeadlineMs: number | undefined;
  catchUpMs: number;
  jitterMs: number;
  attempts: number;
  backoff: { type: BackoffType; delayMs: number };
  paused: boolean;
  history: HistoryRetention;
  queue: string;
  /** Where the schedule is defined: its file and the 1-based line of its list item. */
  source: { file: string; line: number };
}

export interface TickwardenConfig {
  /** Every schedule of every file, in file order and then in the order written. */
  schedules: ScheduleConfig[];
  /** The files read, in the order read (sorted by name for a directory). */
  files: string[];
  /**
   * Each file's text's SHA-256 (as the loaders read it): a reload given this config as `previous`
   * (loadConfigOffThread) keeps the schedules of the files whose text is the same.
   */
  digests?: ReadonlyMap<string, string>;
}

/** One problem in a configuration file; `line` and `column` are 1-based. */
export interface ConfigError {
  file: string;
  line: number;
  column: number;
  /** The field path inside the file, e.g. `['schedules', 0, 'cron']`; empty for file-level problems. */
  path: (string | number)[];
  message: string;
}

export type ConfigResult = { ok: true; config: TickwardenConfig } | { ok: false; errors: ConfigError[] };
