/**
 * An implementation running in a process of its own (impl-worker.ts), driven over IPC by the
 * benchmarks (redlock-bench.ts, cost-bench.ts): each reads the nodes' counters around a request,
 * and the CPU the worker reports is the implementation's alone.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { WorkerAnswer, WorkerRequest } from './impl-worker.ts';
import type { WorkerImpl } from './implementations.ts';

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Every worker started and not yet closed: closeAllProcesses ends them, also after an error or Ctrl-C. */
const open = new Set<ImplProcess>();

/** A worker with `instances` instances of `impl` on `urls`: requests go over IPC and come back with what the loops measured. */
export class ImplProcess {
  readonly #child: ChildProcess;
  readonly #pending = new Map<number, { resolve: (result: unknown) => void; reject: (error: Error) => void }>();
  #nextId = 1;

  private constructor(child: ChildProcess) {
    this.#child = child;
    child.on('message', (answer: WorkerAnswer) => {
      const pending = this.#pending.get(answer.id);
      this.#pending.delete(answer.id);
      if (answer.ok) pending?.resolve(answer.result);
      else pending?.reject(new Error(answer.error));
    });
    child.once('exit', (code, signal) => {
      for (const { reject } of this.#pending.values()) reject(new Error(`impl-worker exited (${code ?? signal})`));
      this.#pending.clear();
    });
  }

  static async start(impl: WorkerImpl, urls: readonly string[], instances: number): Promise<ImplProcess> {
    const child = fork(new URL('./impl-worker.ts', import.meta.url), {
      execArgv: process.execArgv,
      env: { ...process.env, BENCH_IMPL: impl, BENCH_URLS: JSON.stringify(urls), BENCH_INSTANCES: String(instances) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const started = new ImplProcess(child);
    open.add(started);
    // The worker says `ready` (id 0) once its clients are connected.
    await new Promise((resolve, reject) => started.#pending.set(0, { resolve, reject }));
    return started;
  }

  request<T>(request: DistributiveOmit<WorkerRequest, 'id'>): Promise<T> {
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (result: unknown) => void, reject });
      this.#child.send({ ...request, id });
    });
  }

  /** Ends the worker (it closes its clients when the IPC channel goes) and waits for it to exit. */
  readonly close = async (): Promise<void> => {
    open.delete(this);
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.#child.once('exit', resolve));
    this.#child.disconnect();
    await exited;
  };
}

/** Closes every worker still open. */
export async function closeAllProcesses(): Promise<void> {
  await Promise.all([...open].map((worker) => worker.close()));
}
