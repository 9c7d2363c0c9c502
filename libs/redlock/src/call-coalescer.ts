import type { LockNode } from './lock-node.ts';
import type { LuaScript } from './scripts.ts';

/**
 * One script call for `keys.length` resources: one key per resource, `args` the
 * per-resource arguments in order; the reply holds one entry per resource, in order.
 */
export interface ScriptCall {
  script: LuaScript;
  /** Arguments shared by every resource of the call (the head of ARGV). */
  header: readonly string[];
  keys: readonly string[];
  args: readonly string[];
  timeoutMs: number;
  /** At most this many resources per merged call (the caller's `maxBatchSize`). */
  maxResources: number;
}

/** Receives node `index`'s part of the reply (`ok`), or its error. */
export type ReplyHandler = (index: number, ok: boolean, value: unknown) => void;

/** One caller's share of a merged call: its slice of each node's reply. */
interface Member {
  from: number;
  to: number;
  onReply: ReplyHandler;
}

interface Group {
  call: ScriptCall & { keys: string[]; args: string[] };
  members: Member[];
}

/**
 * Merges the script calls made in one cascade of promise callbacks into one
 * call per node: calls of the same script with the same shared arguments and
 * timeout (concurrent acquires, releases, extensions) become one EVALSHA per
 * node, and each caller gets its slice of the reply. Redis runs one script
 * instead of many and the client parses one reply. Sending waits for
 * `process.nextTick`, which runs once the promise callbacks of the current
 * turn are done - the callers that one reply woke up have all submitted by
 * then - without waiting for another turn of the event loop (a lone call goes
 * out as soon as it would unmerged). Callers measure validity from before they
 * submit, so the wait only makes validity more conservative. Nothing is merged
 * when a node is a Redis Cluster: a merged call would span hash slots.
 */
export class CallCoalescer {
  readonly #nodes: readonly LockNode[];
  readonly #merges: boolean;
  #open = new Map<string, Group>();
  #full: Group[] = [];
  #scheduled = false;

  constructor(nodes: readonly LockNode[]) {
    this.#nodes = nodes;
    this.#merges = !nodes.some((node) => node.singleSlot === true);
  }

  /** Queues `call`; `onReply` gets each node's part of the reply (or its error) once, in any order. */
  submit(call: ScriptCall, onReply: ReplyHandler): void {
    if (!this.#merges) {
      const args = [...call.header, ...call.args];
      this.#nodes.forEach((node, i) =>
        run(node, call, call.keys, args).then(
          (raw) => onReply(i, true, raw),
          (error: unknown) => onReply(i, false, error),
        ),
      );
      return;
    }
    const key = `${call.script.name}\n${call.timeoutMs}\n${call.maxResources}\n${call.header.join('\n')}`;
    let group = this.#open.get(key);
    if (group && group.call.keys.length + call.keys.length > call.maxResources) {
      this.#full.push(group);
      group = undefined;
    }
    if (!group) {
      group = { call: { ...call, keys: [], args: [] }, members: [] };
      this.#open.set(key, group);
    }
    const from = group.call.keys.length;
    group.members.push({ from, to: from + call.keys.length, onReply });
    group.call.keys.push(...call.keys);
    group.call.args.push(...call.args);
    if (!this.#scheduled) {
      this.#scheduled = true;
      process.nextTick(() => this.#flush());
    }
  }

  #flush(): void {
    const groups = [...this.#full, ...this.#open.values()];
    this.#full = [];
    this.#open = new Map();
    this.#scheduled = false;
    for (const { call, members } of groups) {
      const args = [...call.header, ...call.args];
      const whole = members.length === 1;
      this.#nodes.forEach((node, i) => {
        run(node, call, call.keys, args).then(
          (raw) => {
            for (const { from, to, onReply } of members)
              onReply(i, true, whole ? raw : (raw as unknown[]).slice(from, to));
          },
          (error: unknown) => {
            for (const { onReply } of members) onReply(i, false, error);
          },
        );
      });
    }
  }
}

/** `node.run`, with a synchronous throw (a custom LockNode's) turned into that node's error, not an uncaught one. */
function run(node: LockNode, call: ScriptCall, keys: readonly string[], args: readonly string[]): Promise<unknown> {
  try {
    return node.run(call.script, keys, args, call.timeoutMs);
  } catch (error) {
    return Promise.reject(error);
  }
}
