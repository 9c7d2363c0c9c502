import type { Readable } from 'node:stream';
import type { RunContext } from '../run-context.ts';

/** Output caps per run: lines logged (all streams together), and bytes per line. */
export interface OutputLimits {
  maxLines: number;
  maxLineBytes: number;
}

export const DEFAULT_OUTPUT_LIMITS: Readonly<OutputLimits> = Object.freeze({ maxLines: 1000, maxLineBytes: 4096 });

export type OutputStream = 'stdout' | 'stderr' | 'log';
export type OutputLevel = 'debug' | 'info' | 'warn' | 'error';

/**
 * A run's output in the logs, one record per line, capped: after `maxLines`
 * lines one "output truncated" record, then nothing; a line longer than
 * `maxLineBytes` is cut (and marked `lineTruncated`).
 */
export class OutputLog {
  readonly #context: RunContext;
  readonly #limits: OutputLimits;
  lines = 0;
  #truncated = false;

  constructor(context: RunContext, limits: OutputLimits = DEFAULT_OUTPUT_LIMITS) {
    this.#context = context;
    this.#limits = limits;
  }

  /** Logs one line (already split), cutting it to the byte cap. */
  write(stream: OutputStream, text: string, level: OutputLevel = 'info', fields: Record<string, unknown> = {}): void {
    const bytes = Buffer.from(text, 'utf8');
    const cut = bytes.length > this.#limits.maxLineBytes;
    this.#line(stream, cut ? bytes.subarray(0, this.#limits.maxLineBytes) : bytes, cut, level, fields);
  }

  #line(
    stream: OutputStream,
    bytes: Buffer,
    cut: boolean,
    level: OutputLevel = 'info',
    fields: Record<string, unknown> = {},
  ): void {
    if (this.lines >= this.#limits.maxLines) {
      if (!this.#truncated) {
        this.#truncated = true;
        this.#context.logger.warn(
          { stream, maxLines: this.#limits.maxLines },
          `output truncated: more than ${this.#limits.maxLines} lines; the rest is dropped`,
        );
      }
      return;
    }
    this.lines++;
    const text = bytes.toString('utf8').replace(/\r$/, '');
    this.#context.logger[level]({ ...fields, stream, ...(cut ? { lineTruncated: true } : {}) }, text);
  }

  /** Splits a byte stream into lines; a line longer than the cap is cut and the rest of it dropped. Resolves at its end. */
  follow(stream: Readable, name: OutputStream): Promise<void> {
    const max = this.#limits.maxLineBytes;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let cut = false;
    const append = (part: Buffer): void => {
      if (pendingBytes >= max) {
        cut ||= part.length > 0;
        return;
      }
      const room = max - pendingBytes;
      if (part.length > room) cut = true;
      const kept = part.subarray(0, room);
      pending.push(kept);
      pendingBytes += kept.length;
    };
    const flush = (): void => {
      this.#line(name, Buffer.concat(pending), cut);
      pending = [];
      pendingBytes = 0;
      cut = false;
    };
    return new Promise((resolve) => {
      stream.on('data', (chunk: Buffer | string) => {
        const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
        let start = 0;
        for (let newline = bytes.indexOf(10, start); newline !== -1; newline = bytes.indexOf(10, start)) {
          append(bytes.subarray(start, newline));
          flush();
          start = newline + 1;
        }
        if (start < bytes.length) append(bytes.subarray(start));
      });
      const end = (): void => {
        if (pendingBytes > 0 || cut) flush();
        resolve();
      };
      stream.once('end', end);
      stream.once('close', end);
      stream.once('error', end);
    });
  }
}
