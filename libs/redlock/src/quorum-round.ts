import type { Clock } from './clock.ts';
import { NodeTimeoutError } from './errors.ts';
import type { ReplyHandler } from './call-coalescer.ts';
import type { LockNode } from './lock-node.ts';

/** One node's outcome of one script call, its reply decoded once. */
export type NodeReply<T> = { node: LockNode; ok: true; reply: T } | { node: LockNode; ok: false; error: Error };

/** How to judge one script call made on every node, in parallel. */
export interface RoundSpec<T> {
  decode: (raw: unknown) => T;
  timeoutMs: number;
  /** Called with each reply as it arrives; returning true settles the round early (the outcome cannot change). */
  decided?: (reply: NodeReply<T>) => boolean;
  /**
   * Gets the errors of nodes that were still silent when the round was decided
   * early (not after a timeout: those nodes already got a NodeTimeoutError). No
   * timer waits for them; their other replies are decoded only for `late`.
   */
  lateError?: (node: LockNode, error: Error) => void;
  /**
   * When given, gets those nodes' replies too (decoded), and their errors, as they come, and the
   * replies of nodes timed out: what a round decided without them may still need to know (a
   * failed attempt's cleanup; a request held up by the network still lands, and may grant).
   */
  late?: (reply: NodeReply<T>) => void;
}

/**
 * Sends one round (`send` hands node i's reply to the handler) and resolves with the
 * replies gathered when it is decided, when every node answered, or at the
 * timeout (one timer for the round: nodes still silent then, after the replies
 * already received are read, get a NodeTimeoutError). Errors after an early
 * decision go to `spec.lateError`, and with `spec.late` every reply after the decision, the
 * timed-out nodes' too.
 */
export function runRound<T>(
  nodes: readonly LockNode[],
  clock: Clock,
  send: (onReply: ReplyHandler) => void,
  spec: RoundSpec<T>,
): Promise<NodeReply<T>[]> {
  const { decode, timeoutMs, decided, lateError, late } = spec;
  const judge = (node: LockNode, error: Error | undefined, value: unknown): NodeReply<T> => {
    if (error) return { node, ok: false, error };
    try {
      return { node, ok: true, reply: decode(value) };
    } catch (error) {
      return { node, ok: false, error: error as Error };
    }
  };
  return new Promise((resolve) => {
    const replies: NodeReply<T>[] = [];
    let settled = false;
    let timedOut = false;
    const settle = (): void => {
      settled = true;
      clock.clearTimeout(timer);
      resolve(replies);
    };
    const timeOut = (): void => {
      if (settled) return;
      timedOut = true;
      const error = new NodeTimeoutError(timeoutMs);
      for (const node of nodes) if (!replies.some((r) => r.node === node)) replies.push({ node, ok: false, error });
      settle();
    };
    // Timers run before the event loop reads sockets: after a stall (a GC pause) longer than the
    // timeout, replies that arrived meanwhile are still unread. Judge after one poll phase.
    const timer = clock.setTimeout(() => setImmediate(timeOut), timeoutMs);
    const accept = (reply: NodeReply<T>): void => {
      replies.push(reply);
      if ((decided?.(reply) ?? false) || replies.length === nodes.length) settle();
    };
    send((i, ok, value) => {
      const node = nodes[i] as LockNode;
      const error = ok ? undefined : value instanceof Error ? value : new Error(String(value));
      if (!settled) return accept(judge(node, error, value));
      if (error && !timedOut) lateError?.(node, error);
      late?.(judge(node, error, value));
    });
  });
}

/** Per node id, the vote of resource `index` (or the node's error), for the nodes whose vote is not in `wanted`. */
export function causesExcept<V extends string>(
  replies: readonly NodeReply<readonly V[]>[],
  index: number,
  wanted: readonly V[],
): Map<string, V | Error> {
  const causes = new Map<string, V | Error>();
  for (const r of replies) {
    const vote = r.ok ? (r.reply[index] as V) : r.error;
    if (vote instanceof Error || !wanted.includes(vote)) causes.set(r.node.id, vote);
  }
  return causes;
}

/** How many nodes voted one of `wanted` for resource `index`. */
export function countVotes<V extends string>(
  replies: readonly NodeReply<readonly V[]>[],
  index: number,
  ...wanted: V[]
): number {
  let count = 0;
  for (const r of replies) if (r.ok && wanted.includes(r.reply[index] as V)) count++;
  return count;
}
