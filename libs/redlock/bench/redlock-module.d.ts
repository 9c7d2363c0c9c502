/**
 * node-redlock 5.0.0-beta.2 ships `dist/index.d.ts` but its package.json
 * `exports` has no `types` condition, so TypeScript (module resolution
 * `nodenext`) cannot reach it. This declares the slice the bench uses, with
 * the ioredis 6 client type (its own types name the ioredis 5 classes).
 */
declare module 'redlock' {
  import type { EventEmitter } from 'node:events';
  import type { Cluster, Redis } from 'ioredis';

  export interface Settings {
    readonly driftFactor: number;
    readonly retryCount: number;
    readonly retryDelay: number;
    readonly retryJitter: number;
    readonly automaticExtensionThreshold: number;
  }

  export class ExecutionError extends Error {
    readonly attempts: readonly Promise<unknown>[];
  }

  export class ResourceLockedError extends Error {}

  export class Lock {
    readonly resources: string[];
    readonly value: string;
    expiration: number;
    release(): Promise<unknown>;
    extend(duration: number): Promise<Lock>;
  }

  export default class Redlock extends EventEmitter {
    constructor(clients: Iterable<Redis | Cluster>, settings?: Partial<Settings>);
    /** Its Lua scripts as it sends them (the cost bench loads them itself). */
    readonly scripts: Readonly<
      Record<'acquireScript' | 'extendScript' | 'releaseScript', { readonly value: string; readonly hash: string }>
    >;
    acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock>;
    release(lock: Lock, settings?: Partial<Settings>): Promise<unknown>;
    quit(): Promise<void>;
  }
}
