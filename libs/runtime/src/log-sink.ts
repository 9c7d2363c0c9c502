import { write, writeSync } from 'node:fs';

/** The most one write takes from the queue, in UTF-16 units (a line's length): a few pipe buffers. */
const MAX_WRITE_UNITS = 256 * 1024;
/** A full pipe (EAGAIN: its reader is behind) is tried again after this, ms. */
const FULL_RETRY_MS = 10;
/** At exit a full pipe is waited for at most this long, ms: a stalled reader must not keep the process. */
const EXIT_WAIT_MS = 2_000;
/** The most the queue holds, in UTF-16 units (about 32 MB of heap): a reader that stopped must not exhaust the memory. */
export const MAX_QUEUED_UNITS = 16 * 1024 * 1024;

/**
 * A process's log destination: pino's lines queue here and go out with one `fs.write` at a time,
 * off the event loop, each taking everything queued meanwhile (up to MAX_WRITE_UNITS). So a slow
 * reader of the pipe never holds up the event loop, and a busy event loop drains its backlog in
 * a few big writes: a stream that writes a fixed few KB per completed write (pino's own, async)
 * lets a burst of lines pile up in the heap, since completions run only between a busy loop's
 * turns. The lines are joined once, when written (never appended to a growing string). At exit,
 * what is still queued is written synchronously. A line that would take the queue past its bound (the
 * reader stopped reading) is dropped and counted; once the queue has drained, a warning line
 * says how many were dropped.
 */
export class LogSink {
  readonly #fd: number;
  #queue: string[] = [];
  #queuedUnits = 0;
  #writing = false;
  /** Set once the reader is gone (EPIPE) or the fd failed: lines are dropped from then on. */
  #closed = false;
  readonly #maxQueuedUnits: number;
  /** Lines dropped since the queue was last empty. */
  #dropped = 0;

  constructor(fd: number, options: { maxQueuedUnits?: number } = {}) {
    this.#fd = fd;
    this.#maxQueuedUnits = options.maxQueuedUnits ?? MAX_QUEUED_UNITS;
    process.once('exit', () => this.flushSync());
  }

  /** pino's destination interface. */
  write(line: string): boolean {
    if (this.#closed) return true;
    if (this.#queuedUnits + line.length > this.#maxQueuedUnits) {
      this.#dropped++;
      return true;
    }
    this.#queue.push(line);
    this.#queuedUnits += line.length;
    if (!this.#writing) this.#next();
    return true;
  }

  /** Writes whatever is queued now, blocking (at exit; a write in flight finishes on its own). */
  flushSync(): void {
    if (this.#dropped > 0) this.#tellDropped();
    const giveUpAt = performance.now() + EXIT_WAIT_MS;
    while (!this.#closed && this.#queue.length > 0) {
      const chunk = Buffer.from(this.#take(), 'utf8');
      for (let from = 0; from < chunk.length && !this.#closed;) {
        try {
          from += writeSync(this.#fd, chunk, from);
        } catch (error) {
          const failure = error as NodeJS.ErrnoException;
          if (failure.code !== 'EAGAIN' || performance.now() > giveUpAt) this.#fail(failure);
          else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, FULL_RETRY_MS);
        }
      }
    }
  }

  #next(): void {
    if (this.#queue.length === 0 && this.#dropped > 0) this.#tellDropped();
    this.#writing = this.#queue.length > 0 && !this.#closed;
    if (this.#writing) this.#send(Buffer.from(this.#take(), 'utf8'));
  }

  /** Queues a warning (pino's JSON, level 40) with the count of lines dropped while the queue was full. */
  #tellDropped(): void {
    const line = `${JSON.stringify({ level: 40, time: Date.now(), dropped: this.#dropped, msg: 'log lines dropped: stdout was not read fast enough' })}\n`;
    this.#dropped = 0;
    this.#queue.push(line);
    this.#queuedUnits += line.length;
  }

  #send(chunk: Buffer): void {
    write(this.#fd, chunk, 0, chunk.length, null, (error, written) => {
      if (error?.code === 'EAGAIN') setTimeout(() => this.#send(chunk), FULL_RETRY_MS);
      else if (error) {
        this.#fail(error);
        this.#writing = false;
      } else if (written < chunk.length) this.#send(chunk.subarray(written));
      else this.#next();
    });
  }

  /** The queue's head, up to MAX_WRITE_UNITS (at least one line), as one string. */
  #take(): string {
    if (this.#queuedUnits <= MAX_WRITE_UNITS) {
      const lines = this.#queue;
      this.#queue = [];
      this.#queuedUnits = 0;
      return lines.join('');
    }
    let count = 0;
    let units = 0;
    while (
      count < this.#queue.length &&
      (count === 0 || units + (this.#queue[count] as string).length <= MAX_WRITE_UNITS)
    )
      units += (this.#queue[count++] as string).length;
    this.#queuedUnits -= units;
    return this.#queue.splice(0, count).join('');
  }

  /** The reader went away (EPIPE: nobody to tell) or the fd failed (told on stderr): no more writes. */
  #fail(error: NodeJS.ErrnoException): void {
    this.#closed = true;
    this.#queue = [];
    this.#queuedUnits = 0;
    if (error.code !== 'EPIPE')
      process.stderr.write(`log output failed, further log lines are dropped: ${error.message}\n`);
  }
}
