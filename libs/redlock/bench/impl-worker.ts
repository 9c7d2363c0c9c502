/**
 * One implementation of the Redlock benchmarks in a process of its own, forked (impl-process.ts)
 * by redlock-bench.ts and cost-bench.ts with `BENCH_IMPL` (its name), `BENCH_URLS` (the nodes,
 * JSON) and `BENCH_INSTANCES` (one, or one per contender, each with its own clients). It runs the
 * loops the parent asks for over IPC and answers with what they measured; the parent reads the
 * nodes' counters around each request. This process's CPU is measured here, so that it is the
 * implementation's alone.
 */
import {
  closeAll,
  concurrentLoops,
  contentionRound,
  isWorkerImpl,
  makeAdapter,
  sequentialCycles,
  warmUp,
  type Adapter,
  type ContentionRow,
} from './implementations.ts';

/** A request from the parent: `id` comes back with the answer. */
export type WorkerRequest = { id: number } & (
  | { op: 'warm-up'; key: string; cycles: number; ttlMs: number }
  | { op: 'sequential'; key: string; cycles: number; ttlMs: number }
  | { op: 'concurrent'; keyBase: string; ms: number; loops: number; ttlMs: number }
  | { op: 'batch-acquire'; keyBase: string; size: number; ttlMs: number }
  | { op: 'batch-release' }
  | { op: 'contention'; key: string; row: ContentionRow; ms: number }
);

export type WorkerAnswer = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

/** This process's CPU while `work` runs, µs (user + system, and each), with its result. */
async function withCpu<T>(work: () => Promise<T>): Promise<T & { cpuUs: number; userUs: number; systemUs: number }> {
  const before = process.cpuUsage();
  const result = await work();
  const { user, system } = process.cpuUsage(before);
  return { ...result, cpuUs: user + system, userUs: user, systemUs: system };
}

async function main(): Promise<void> {
  const impl = process.env['BENCH_IMPL'] ?? '';
  if (!isWorkerImpl(impl)) throw new Error(`BENCH_IMPL: unknown implementation "${impl}"`);
  const urls = JSON.parse(process.env['BENCH_URLS'] ?? '[]') as string[];
  const instances = Number(process.env['BENCH_INSTANCES'] ?? 1);
  const adapters: Adapter[] = await Promise.all(Array.from({ length: instances }, () => makeAdapter(impl, urls)));
  const first = adapters[0] as Adapter;
  let batch: Awaited<ReturnType<Adapter['batch']>> | undefined;

  const handle = async (request: WorkerRequest): Promise<unknown> => {
    switch (request.op) {
      case 'warm-up': {
        const { key, cycles, ttlMs } = request;
        await Promise.all(adapters.map((adapter, i) => warmUp(adapter, `${key}:${i}`, ttlMs)));
        for (let i = 0; i < cycles; i++) await (await first.acquire(key, ttlMs)).release();
        return {};
      }
      case 'sequential':
        return withCpu(() => sequentialCycles(first, request.key, request.cycles, request.ttlMs));
      case 'concurrent':
        return withCpu(async () => {
          const start = performance.now();
          const loops = await concurrentLoops(first, request.keyBase, request.ms, request.loops, request.ttlMs);
          return { ...loops, seconds: (performance.now() - start) / 1000 };
        });
      case 'batch-acquire': {
        const resources = Array.from({ length: request.size }, (_, i) => `${request.keyBase}:${i}`);
        batch = await first.batch(resources, request.ttlMs);
        const start = performance.now();
        await batch.acquire();
        return { acquired: batch.acquired, ms: performance.now() - start };
      }
      case 'batch-release': {
        const start = performance.now();
        await batch?.release();
        return { ms: performance.now() - start };
      }
      case 'contention':
        return withCpu(() => contentionRound(adapters, request.key, request.row, request.ms));
    }
  };

  process.on('message', (request: WorkerRequest) => {
    handle(request).then(
      (result) => process.send?.({ id: request.id, ok: true, result } satisfies WorkerAnswer),
      (error: unknown) => process.send?.({ id: request.id, ok: false, error: String(error) } satisfies WorkerAnswer),
    );
  });
  // The parent gone (done, or killed): close the clients and leave.
  process.once('disconnect', () => void closeAll().finally(() => process.exit(0)));
  process.send?.({ id: 0, ok: true, result: 'ready' } satisfies WorkerAnswer);
}

await main();
