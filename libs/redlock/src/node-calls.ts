import type { Clock } from './clock.ts';
import { NodeTimeoutError } from './errors.ts';
import type { LockNode } from './lock-node.ts';
import type { LuaScript } from './scripts.ts';

/** One node's outcome of one script call, its reply decoded once. */
export type NodeReply<T> = { node: LockNode; ok: true; reply: T } | { node: LockNode; ok: false; error: Error };

/** Runs a script on one node, settling within `timeoutMs` (a late reply is dropped, never applied to the result). */
export function callNode<T>(
  node: LockNode,
  script: LuaScript,
  keys: readonly string[],
  args: readonly string[],
  decode: (raw: unknown) => T,
  timeoutMs: number,
  clock: Clock,
): Promise<NodeReply<T>> {
  return new Promise((resolve) => {
    const timer = clock.setTimeout(() => resolve({ node, ok: false, error: new NodeTimeoutError(timeoutMs) }), timeoutMs);
    node.run(script, keys, args, timeoutMs).then(
      (raw) => {
        clock.clearTimeout(timer);
        try {
          resolve({ node, ok: true, reply: decode(raw) });
        } catch (error) {
          resolve({ node, ok: false, error: error as Error });
        }
      },
      (error: unknown) => {
        clock.clearTimeout(timer);
        resolve({ node, ok: false, error: error instanceof Error ? error : new Error(String(error)) });
      },
    );
  });
}

/**
 * Resolves with the replies gathered so far as soon as `decided(replies)` says
 * the outcome cannot change, or when every node has answered or timed out.
 * Stragglers keep running; their replies are not waited for.
 */
export function gather<T>(calls: readonly Promise<NodeReply<T>>[], decided: (replies: readonly NodeReply<T>[]) => boolean): Promise<NodeReply<T>[]> {
  return new Promise((resolve) => {
    const replies: NodeReply<T>[] = [];
    let done = false;
    for (const call of calls) {
      void call.then((reply) => {
        if (done) return;
        replies.push(reply);
        if (replies.length === calls.length || decided(replies)) {
          done = true;
          resolve(replies.slice());
        }
      });
    }
    if (calls.length === 0) resolve([]);
  });
}

/** Counts of one resource's votes across the replies so far. */
export class Tally<V extends string> {
  /** Per node id: its vote, or the error it answered with. */
  readonly votes = new Map<string, V | Error>();

  constructor(replies: readonly NodeReply<readonly V[]>[], index: number) {
    for (const r of replies) this.votes.set(r.node.id, r.ok ? (r.reply[index] as V) : r.error);
  }

  count(...wanted: V[]): number {
    let count = 0;
    for (const vote of this.votes.values()) if (!(vote instanceof Error) && wanted.includes(vote)) count++;
    return count;
  }

  /** Per node id, why it did not vote one of `wanted` (its error or its vote). */
  causesExcept(...wanted: V[]): Map<string, V | Error> {
    const causes = new Map<string, V | Error>();
    for (const [node, vote] of this.votes) if (vote instanceof Error || !wanted.includes(vote)) causes.set(node, vote);
    return causes;
  }
}
