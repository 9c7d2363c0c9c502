/**
 * node-redlock 5.0.0-beta.2 as the bench uses it (typed by `redlock-module.d.ts`;
 * the package itself is used as published, unpatched).
 */
import type { Redis } from 'ioredis';
import NodeRedlock, { ExecutionError, type Settings } from 'redlock';

export function newNodeRedlock(clients: readonly Redis[], settings: Partial<Settings>): NodeRedlock {
  return new NodeRedlock(clients, settings);
}

/** node-redlock's "no quorum within the retry window" error. */
export function isNodeRedlockExecutionError(error: unknown): boolean {
  return error instanceof ExecutionError;
}
