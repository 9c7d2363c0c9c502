import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Polls a config file or directory for changes by content (not mtime or
 * inotify): a Kubernetes ConfigMap update swaps a symlinked directory, which
 * watchers miss, but the content hash always changes. Calls `onChange` once
 * per new content (a change it fails on is handed to `onError`, not retried);
 * the timer is unref'd.
 */
export class ConfigWatcher {
  readonly #path: string;
  readonly #intervalMs: number;
  readonly #onChange: () => Promise<void>;
  readonly #onError: (error: unknown) => void;
  #lastHash: string | undefined;
  #timer: NodeJS.Timeout | undefined;
  #busy = false;

  constructor(
    configPath: string,
    intervalMs: number,
    onChange: () => Promise<void>,
    onError: (error: unknown) => void,
  ) {
    this.#path = configPath;
    this.#intervalMs = intervalMs;
    this.#onChange = onChange;
    this.#onError = onError;
  }

  async start(): Promise<void> {
    this.#lastHash = await this.#hash();
    this.#timer = setInterval(() => void this.#poll(), this.#intervalMs).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #poll(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      const hash = await this.#hash();
      if (hash !== this.#lastHash) {
        this.#lastHash = hash;
        await this.#onChange();
      }
    } catch (error) {
      // The poll runs from a timer: a rejection would be unhandled and end the process.
      this.#onError(error);
    } finally {
      this.#busy = false;
    }
  }

  async #hash(): Promise<string> {
    const digest = createHash('sha256');
    try {
      const files = (await stat(this.#path)).isDirectory()
        ? (await readdir(this.#path))
            .filter((name) => /\.ya?ml$/.test(name) && !name.startsWith('.'))
            .sort()
            .map((name) => path.join(this.#path, name))
        : [this.#path];
      for (const file of files) digest.update(file).update(await readFile(file));
    } catch (error) {
      digest.update(`unreadable: ${String(error)}`);
    }
    return digest.digest('hex');
  }
}
