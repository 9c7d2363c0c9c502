import type { LockNode } from './lock-node.ts';
import type { LuaScript } from './scripts.ts';

/**
 * One script call for `keys.length` resources: one key per resource, `args` the
 * per-resource arguments in order; the reply holds one entry per resource, in order (the
 * script may send one code for all: CallCoalescer gives each caller its entries).
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

/** Receives node `index`'s part of the reply (`ok`: one entry per resource of the call), or its error. */
export type ReplyHandler = (index: number, ok: boolean, value: unknown) => void;

/** One caller's share of a merged call: its slice of each node's reply. */
interface Member {
  from: number;
  to: number;
  onReply: ReplyHandler;
}

interface Group {
  /** The first call: its script, header and timeout are the group's. */
  call: ScriptCall;
  members: Member[];
  /** Every member's keys and per-resource arguments, made when a second call joins (a lone call sends its own). */
  merged?: { keys: string[]; args: string[] };
}

/**
 * Merges the script calls made in one turn of the event loop into one call
 * per node: calls of the same script with the same shared arguments and
 * timeout (concurrent acquires, releases, extensions) become one EVALSHA per
 * node, and each caller gets its slice of the reply. Redis runs one script
 * instead of many and the client parses one reply. Sending waits for
 * `setImmediate`, which runs once the replies and messages already read in
 * this turn are handled - the callers they woke up have all submitted by then,
 * and a handoff already heard (ReleaseNotifier) is not held up behind this
 * process's next writes - without waiting for another poll for I/O (a lone
 * call goes out in the same turn). Callers measure validity from before they
 * submit, so the wait only makes validity more conservative. Nothing is merged
 * when a node is a Redis Cluster: a merged call would span hash slots.
 */
export class CallCoalescer {
  readonly #nodes: readonly LockNode[];
  readonly #merges: boolean;
  /** This turn's groups, in the order they opened (a full one stays; a call of its shape opens another). */
  #groups: Group[] = [];
  readonly #flushNow = (): void => this.#flush();

  constructor(nodes: readonly LockNode[]) {
    this.#nodes = nodes;
    this.#merges = !nodes.some((node) => node.singleSlot === true);
  }

  /** Queues `call`; `onReply` gets each node's part of the reply (or its error) once, in any order. */
  submit(call: ScriptCall, onReply: ReplyHandler): void {
    const member = { from: 0, to: call.keys.length, onReply };
    if (!this.#merges) return this.#send({ call, members: [member] });
    const groups = this.#groups;
    // The newest group of this shape: a turn opens only a few, so a scan beats building a key.
    let group: Group | undefined;
    for (let i = groups.length - 1; i >= 0 && !group; i--) if (sameShape(groups[i] as Group, call)) group = groups[i];
    if (group && size(group) + call.keys.length <= call.maxResources) join(group, call, member);
    else if (groups.push({ call, members: [member] }) === 1) setImmediate(this.#flushNow);
  }

  /**
   * Sends `call` unmerged to the nodes at `indices` only; `onReply` gets positions in `indices`
   * (a call that only some nodes need, such as a failed attempt's cleanup).
   */
  submitTo(indices: readonly number[], call: ScriptCall, onReply: ReplyHandler): void {
    this.#send({ call, members: [{ from: 0, to: call.keys.length, onReply }] }, indices);
  }

  #flush(): void {
    // A new array rather than emptying the long-lived one: each turn's groups die young.
    const groups = this.#groups;
    this.#groups = [];
    for (const group of groups) this.#send(group);
  }

  /** Sends `group` as one call to every node (or those at `indices`) and hands each member its entries of each reply. */
  #send({ call, members, merged }: Group, indices?: readonly number[]): void {
    const keys = merged?.keys ?? call.keys;
    const resourceArgs = merged?.args ?? call.args;
    const args = call.header.length === 0 ? resourceArgs : [...call.header, ...resourceArgs];
    const nodes = indices?.map((index) => this.#nodes[index] as LockNode) ?? this.#nodes;
    nodes.forEach((node, i) => {
      run(node, call, keys, args).then(
        (raw) => {
          // One entry per resource, or the entry alone: for one resource, or one code for every
          // resource (the scripts' includes/reply.lua).
          if (keys.length > 1 && !Array.isArray(raw)) {
            for (const { from, to, onReply } of members) onReply(i, true, Array(to - from).fill(raw));
            return;
          }
          const entries = keys.length === 1 ? [raw] : (raw as unknown[]);
          if (members.length === 1) members[0]?.onReply(i, true, entries);
          else for (const { from, to, onReply } of members) onReply(i, true, entries.slice(from, to));
        },
        (error: unknown) => {
          for (const { onReply } of members) onReply(i, false, error);
        },
      );
    });
  }
}

/** Whether `call` may join `group`: the same script, timeout, batch limit and shared arguments. */
function sameShape({ call: first }: Group, call: ScriptCall): boolean {
  if (
    first.script !== call.script ||
    first.timeoutMs !== call.timeoutMs ||
    first.maxResources !== call.maxResources ||
    first.header.length !== call.header.length
  )
    return false;
  for (let i = 0; i < call.header.length; i++) if (first.header[i] !== call.header[i]) return false;
  return true;
}

/** Resources in `group` so far. */
function size(group: Group): number {
  return (group.merged?.keys ?? group.call.keys).length;
}

/** Adds `call` to `group`, after the calls already in it. */
function join(group: Group, call: ScriptCall, member: Member): void {
  const merged = (group.merged ??= { keys: [...group.call.keys], args: [...group.call.args] });
  member.from = merged.keys.length;
  member.to = member.from + call.keys.length;
  merged.keys.push(...call.keys);
  merged.args.push(...call.args);
  group.members.push(member);
}

/** `node.run`, with a synchronous throw (a custom LockNode's) turned into that node's error, not an uncaught one. */
function run(node: LockNode, call: ScriptCall, keys: readonly string[], args: readonly string[]): Promise<unknown> {
  try {
    return node.run(call.script, keys, args, call.timeoutMs);
  } catch (error) {
    return Promise.reject(error);
  }
}
