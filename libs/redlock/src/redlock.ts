import { EventEmitter } from 'node:events';
import type { Cluster, Redis } from 'ioredis';
import {
  AcquireAbortedError,
  ClaimAlreadyGrantedError,
  ClaimStartedError,
  FencePassedError,
  LeaseExpiredError,
  LeaseLostError,
  LockTakenError,
  QuorumUnavailableError,
  InvalidSettingsError,
  NodeTimeoutError,
  type ClaimHolders,
  type NodeCause,
  type RedlockError,
} from './errors.ts';
import { CallCoalescer, type ReplyHandler, type ScriptCall } from './call-coalescer.ts';
import { claimBatch, type ClaimBatchOptions, type ClaimNodes, type ClaimRequest, type ClaimResult } from './claims.ts';
import { handedLease, lostAttempt, type Handoff } from './handoff.ts';
import { inboxChannel, releaseChannel, resourceBase } from './keys.ts';
import type { AcquireRequest, BatchResult, Lease, ReleaseResult, ReleaseTarget } from './lease.ts';
import { LeaseWatchdog } from './lease-watchdog.ts';
import { IoredisLockNode, type LockNode } from './lock-node.ts';
import { causesExcept, countVotes, runRound, type NodeReply, type RoundSpec } from './quorum-round.ts';
import { median, timeAtSend, type NodeTime } from './reference-clock.ts';
import { ReleaseNotifier, type ReleaseListener } from './release-notifier.ts';
import {
  decodeAcquire,
  decodeExtend,
  decodeMark,
  decodeRelease,
  decodeStart,
  scripts,
  type AcquireVote,
  type Mark,
  type ReleaseVote,
} from './scripts.ts';
import {
  checkTtl,
  driftMs,
  resolveSettings,
  validateCallSettings,
  type CallSettings,
  type RedlockSettings,
} from './settings.ts';

/** A node as the constructor accepts it: a client, a URL, or a custom {@link LockNode}. */
export type NodeInput = Redis | Cluster | string | LockNode;

/** Options of one acquire; any call setting may be overridden too. */
export interface AcquireOptions extends Partial<CallSettings>, Pick<AcquireRequest, 'fence' | 'after'> {
  claim?: string | undefined;
  value?: string | undefined;
  /** See {@link AcquireRequest.start}: `value` takes the lock and starts `claim` in the same call. */
  start?: string | undefined;
  /** Cancels waiting between attempts (an attempt in flight settles within `nodeTimeoutMs`). */
  signal?: AbortSignal | undefined;
  /**
   * Takes the lock from whoever holds it, in the same script step (overlap
   * cancel-previous): the fence is raised as for any grant, so the revoked
   * holder can neither extend nor re-establish, and its watchdog aborts it at
   * its next extension. Its validity may still run for up to one TTL from its
   * last extension: a new holder must not act before that unless it knows the
   * old one stopped. A claim granted to another value still wins.
   */
  revoke?: boolean | undefined;
  /**
   * Each node grants only once its own clock reads at least this wall time (ms
   * since the epoch); earlier it answers `early` and changes nothing. With
   * `revoke`, a client whose clock runs ahead can neither take the lock nor
   * cancel its holder before its time.
   */
  notBeforeMs?: number | undefined;
}

/** Options of a batch acquire: call settings, plus the signal, `revoke` and `notBeforeMs` of {@link AcquireOptions}. */
export type AcquireBatchOptions = Partial<CallSettings> & Pick<AcquireOptions, 'signal' | 'revoke' | 'notBeforeMs'>;

/** What a node was asked to do when it failed (`leave`: an acquire that gave up left the waiters' queue). */
export type NodeOperation = 'acquire' | 'claim' | 'extend' | 'release' | 'start' | 'leave' | 'mark';

/** Hooks for logs and metrics: the library itself prints nothing. */
export interface RedlockEvents {
  /** A node failed or timed out during an operation. */
  nodeError: [{ node: string; operation: NodeOperation; error: Error }];
  acquired: [{ resource: string; fence: number; attempts: number; elapsedMs: number; validityMs: number }];
  extended: [{ resource: string; elapsedMs: number; validityMs: number; reestablishedOn: string[] }];
  extensionFailed: [{ resource: string; elapsedMs: number; error: RedlockError }];
  /** The watchdog aborted a routine; `validityLeftMs` is what was left of the lease at that moment. */
  aborted: [{ resource: string; reason: RedlockError; validityLeftMs: number }];
  /**
   * A held lease's release (`hold`, `using`) failed on so many nodes that it may still block a
   * quorum: others may find it held until it lapses there, about `validityMs` from now.
   */
  unreleased: [{ resource: string; fence: number; released: string[]; validityMs: number }];
}

/** The votes by which a node set the lock for the contender with the attempt's fence (and recorded its claim). */
const GRANTS: ReadonlySet<AcquireVote> = new Set(['acquired', 'refreshed']);
/** The votes by which a node refused the lock to a waiter that is queued there (a handoff comes after them). */
const REFUSALS: ReadonlySet<AcquireVote> = new Set(['taken', 'queued']);

/** A start's request as acquire.lua needs it: a claim, a value, and no "|" in the start id. */
function validStart(r: AcquireRequest): boolean {
  return r.claim !== undefined && r.value !== undefined && r.start !== '' && !r.start?.includes('|');
}

/** A fence range as acquire.lua needs it: integers, `below` above `from`. */
function validFence(fence: NonNullable<AcquireRequest['fence']>): boolean {
  const { from, below } = fence;
  return (
    Number.isSafeInteger(from) && from > 0 && (below === undefined || (Number.isSafeInteger(below) && below > from))
  );
}

function validAfter(after: NonNullable<AcquireRequest['after']>): boolean {
  return (
    after.claim !== '' &&
    Number.isFinite(after.untilMs) &&
    (after.fence === undefined || (Number.isSafeInteger(after.fence) && after.fence > 0))
  );
}

/**
 * What a failed attempt's cleanup releases of a contender (release.lua, mode '2'): its lock while
 * `fence` is still current, and for a start its claim put back from started to its value and the
 * fence to what it was before the grant (`before`, as the node said: '' for none).
 */
function releaseSet(
  c: Contender,
  fence: string,
  before: string | undefined,
): Pick<Lease, 'resource' | 'value'> & { fence: string; claim?: string } {
  const { resource, value, claim, start } = c.request;
  if (start === undefined || claim === undefined) return { resource, value, fence };
  return { resource, value, fence, claim: before === undefined ? `${claim}|${start}` : `${claim}|${start}|${before}` };
}

/** A count per item, all 0, in a packed array (`new Array(n).fill(0)` makes a holey one). */
function zeros(n: number): number[] {
  const counts: number[] = [];
  for (let i = 0; i < n; i++) counts.push(0);
  return counts;
}

/** Whether `object` has no own enumerable property (without the array Object.keys would make). */
function isEmpty(object: object): boolean {
  for (const key in object) if (Object.hasOwn(object, key)) return false;
  return true;
}

/** The value holding a claim on the most nodes (of a refusal: there is one). */
function mostHolder(counts: ReadonlyMap<string, number> | undefined): string {
  let best = ['', 0] as [string, number];
  for (const entry of counts ?? []) if (entry[1] > best[1]) best = entry;
  return best[0];
}

/** The value that holds a claim on at least `quorum` nodes, if one does. */
function quorumHolder(counts: ReadonlyMap<string, number> | undefined, quorum: number): string | undefined {
  for (const [value, count] of counts ?? []) if (count >= quorum) return value;
  return undefined;
}

/** One resource inside an acquire attempt. */
interface Contender {
  request: AcquireRequest & { value: string };
  /** The caller gave the value (a takeover): it may be its owner's live lease on the nodes (see #releaseFailed). */
  supplied: boolean;
  result?: BatchResult<Lease>;
  /** Set when an attempt fails it (an acquire that fails has made at least one attempt). */
  lastCauses?: Map<string, NodeCause>;
  /** Values holding the claim in the last attempt, with their node counts (see ClaimHolders). */
  lastClaimHolders?: ClaimHolders | undefined;
  /** Set for a waiter the lock may be handed to (acquireBatch says which): what nodes handed it. */
  handoff: HandoffState | undefined;
  /** The next fencing token to propose, for a request with a `fence` range. */
  fence?: number;
}

/** A waiter's handoffs: by node what it handed, and when each node last refused it (see Handoff.since). */
interface HandoffState {
  readonly ttlMs: number;
  readonly handed: Map<number, Handoff>;
  readonly refusedAt: number[];
  /** By node, the fence of a handoff given back (its message may still come, late): not taken again. */
  readonly givenBack: number[];
  /** The acquire's start: no node queued it before. */
  readonly started: number;
  /** True while an attempt runs: a handoff heard then is decided with the attempt's votes. */
  attempting: boolean;
  attempts: number;
  settings: CallSettings;
  /** Ends the acquire's wait, if it waits. */
  wake(): void;
}

/**
 * The replies an attempt's round gets after it was decided: kept until the attempt knows what to do
 * with them (`handle`), then handed over as they come.
 */
class LateReplies<T> {
  #kept: NodeReply<T>[] = [];
  #handler: ((reply: NodeReply<T>) => void) | undefined;

  readonly add = (reply: NodeReply<T>): void => {
    if (this.#handler) this.#handler(reply);
    else this.#kept.push(reply);
  };

  handle(handler: (reply: NodeReply<T>) => void): void {
    this.#handler = handler;
    for (const reply of this.#kept.splice(0)) handler(reply);
  }
}

/** An acquire that listens for releases of its resources while it waits (see #listen). */
interface Waiting {
  /**
   * Since the last attempt began: `release` when a release for one of its open contenders was
   * published, `subscribed` when its subscription took effect (its next retry is due then).
   */
  woken: 'release' | 'subscribed' | undefined;
  /** Ends the wait in progress, if any. */
  notify: (() => void) | undefined;
  stop(): void;
}

/**
 * Redlock over N independent Redis masters: leases that a quorum grants, with
 * fencing tokens, claim-once acquisition, batch calls and a watchdog.
 */
export class Redlock extends EventEmitter<RedlockEvents> {
  readonly nodes: readonly LockNode[];
  readonly settings: Readonly<RedlockSettings> & { quorum: number };
  /** Highest fencing token seen on any node: proposals start above it (and above the wall clock). */
  #fenceFloor = 0;
  readonly #calls: CallCoalescer;
  readonly #notifier: ReleaseNotifier;
  /** The channel this instance's queued waiters hear their turns on. */
  readonly #inbox: string;
  /** Waiters the lock may be handed to, by lease value, while their acquire runs. */
  readonly #handoffWaiters = new Map<string, Contender>();
  /** Values whose acquire failed while they may still be queued: a handoff to one is given back. */
  readonly #gaveUp = new Map<string, { resource: string; until: number }>();
  /** What claims.ts needs of this instance. */
  readonly #claimNodes: ClaimNodes;

  constructor(nodes: readonly NodeInput[], settings: Partial<RedlockSettings> = {}) {
    super();
    this.settings = resolveSettings(nodes.length, settings);
    this.nodes = nodes.map((node) =>
      typeof node === 'string'
        ? IoredisLockNode.fromUrl(node)
        : 'run' in node
          ? node
          : new IoredisLockNode(node, false),
    );
    this.#calls = new CallCoalescer(this.nodes);
    this.#claimNodes = {
      nodes: this.nodes,
      settings: this.settings,
      newValue: () => this.#newValue(),
      round: (call, spec) => this.#round(call, 'claim', spec),
    };
    this.#inbox = inboxChannel(this.settings.keyPrefix, this.settings.random.bytes(10).toString('hex'));
    // A contender that loops comes back within a retry delay: its channel stays subscribed that long.
    this.#notifier = new ReleaseNotifier(
      this.nodes,
      this.settings.clock,
      this.settings.quorum,
      this.settings.retryDelayMs + this.settings.retryJitterMs,
      (node, value, fence) => this.#heardHandoff(node, value, fence),
    );
  }

  /**
   * One script call on every node (merged with same-shaped calls made alongside it), or unmerged
   * on the nodes at `only`, judged by `spec`. Node errors are emitted as `nodeError` events under
   * `operation`, also those of replies that come after the round was decided.
   */
  async #round<T>(
    call: ScriptCall,
    operation: NodeOperation | undefined,
    spec: Omit<RoundSpec<T>, 'timeoutMs' | 'lateError'>,
    only?: readonly number[],
  ): Promise<NodeReply<T>[]> {
    const emit = (node: LockNode, error: Error): void => {
      if (operation !== undefined && this.listenerCount('nodeError') > 0)
        this.emit('nodeError', { node: node.id, operation, error });
    };
    const nodes = only?.map((index) => this.nodes[index] as LockNode) ?? this.nodes;
    const send = (onReply: ReplyHandler): void =>
      only ? this.#calls.submitTo(only, call, onReply) : this.#calls.submit(call, onReply);
    const replies = await runRound(nodes, this.settings.clock, send, {
      ...spec,
      timeoutMs: call.timeoutMs,
      lateError: emit,
    });
    for (const reply of replies) if (!reply.ok) emit(reply.node, reply.error);
    return replies;
  }

  get quorum(): number {
    return this.settings.quorum;
  }

  #callSettings(overrides: Partial<CallSettings>): CallSettings {
    if (isEmpty(overrides)) return this.settings;
    const defined = Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined));
    const merged = { ...this.settings, ...defined };
    if (Object.keys(defined).length > 0) validateCallSettings(merged);
    return merged;
  }

  #newValue(): string {
    return this.settings.random.bytes(20).toString('hex');
  }

  /**
   * An integer, so that it goes to the nodes as plain decimal digits (acquire.lua compares tokens as
   * such): the wall clock (`wall`, or read now), or above the highest fence seen.
   */
  #nextProposal(wall: number = this.settings.clock.wallMicros()): number {
    return Math.max(Math.floor(wall), this.#fenceFloor + 1);
  }

  /**
   * Acquires one lease. Throws LockTakenError, QuorumUnavailableError, ClaimAlreadyGrantedError,
   * ClaimStartedError (with a `start`) or AcquireAbortedError.
   */
  async acquire(resource: string, ttlMs: number, options: AcquireOptions = {}): Promise<Lease> {
    const { claim, value, start, fence, after, ...batchOptions } = options;
    const [result] = await this.acquireBatch([{ resource, claim, value, start, fence, after }], ttlMs, batchOptions);
    if (!result) throw new Error('unreachable: one request gives one result');
    if (!result.ok) throw result.error;
    return result.lease;
  }

  /**
   * Acquires many independent leases with one script call per node per attempt;
   * resources that lost a split vote or met errors are retried together.
   */
  async acquireBatch(
    requests: readonly AcquireRequest[],
    ttlMs: number,
    options: AcquireBatchOptions = {},
  ): Promise<BatchResult<Lease>[]> {
    checkTtl(ttlMs);
    const { signal, revoke = false, notBeforeMs, ...overrides } = options;
    const s = this.#callSettings(overrides);
    if (requests.length > s.maxBatchSize)
      return this.#inChunks(requests, s.maxBatchSize, (chunk) => this.acquireBatch(chunk, ttlMs, options));
    // acquire.lua reads an empty claim id as "no claim".
    if (requests.some((r) => r.claim === '')) throw new InvalidSettingsError('claim', 'a claim id must not be empty');
    // A started claim's value holds '|' (see startedClaim): no acquire may supply one.
    if (requests.some((r) => r.value?.includes('|')))
      throw new InvalidSettingsError('value', 'a lease value must not contain "|"');
    if (requests.some((r) => r.start !== undefined && !validStart(r)))
      throw new InvalidSettingsError('start', 'a start needs a claim id, a value and a start id without "|"');
    if (requests.some((r) => r.fence !== undefined && !validFence(r.fence)))
      throw new InvalidSettingsError('fence', 'expected a positive safe integer `from`, and `below` above it');
    if (requests.some((r) => r.after !== undefined && !validAfter(r.after)))
      throw new InvalidSettingsError('after', 'expected a claim id, a time and, if any, a positive integer fence');
    const { clock, random } = this.settings;
    const started = clock.now();
    // Waiters queue by a ticket taken once per acquire: every node orders them alike.
    const queues = s.yieldToWaiters && !revoke;
    // Waiters the lock may be handed to: a value of its own, no claim or start, notifications, no not-before, no fence
    // limit (a handoff carries the releaser's fence on: acquire.lua).
    const handsOff = queues && s.wakeOnRelease && notBeforeMs === undefined;
    let waiting: Waiting | undefined;
    const contenders: Contender[] = requests.map((request) => {
      const value = request.value ?? this.#newValue();
      const c: Contender = {
        request: { ...request, value },
        supplied: request.value !== undefined,
        ...(request.fence === undefined ? {} : { fence: request.fence.from }),
        handoff:
          handsOff && request.value === undefined && request.claim === undefined && request.fence?.below === undefined
            ? {
                ttlMs,
                handed: new Map(),
                refusedAt: [],
                givenBack: [],
                started,
                attempting: false,
                attempts: 0,
                settings: s,
                wake: () => waiting?.notify?.(),
              }
            : undefined,
      };
      if (c.handoff) this.#handoffWaiters.set(value, c);
      return c;
    });
    // One wall-clock reading for the ticket and the first proposal: mostly the same number, converted to digits once.
    const arrived = clock.wallMicros();
    const ticket = queues ? String(arrived) : '';
    let retriesLeft = s.retryCount;
    let staleRounds = 0;
    /** When the next counted retry is due (a notification brings an attempt forward, uncounted). */
    let dueAt: number | undefined;
    try {
      for (let attempt = 1; ; attempt++) {
        const open = contenders.filter((c) => !c.result);
        if (signal?.aborted) {
          for (const c of open)
            c.result = {
              resource: c.request.resource,
              ok: false,
              error: new AcquireAbortedError(c.request.resource, signal.reason),
            };
          break;
        }
        if (waiting) waiting.woken = undefined;
        const attemptStarted = clock.now();
        const willRetry = retriesLeft > 0;
        const { staleOnly } = await this.#attempt(open, ttlMs, s, {
          attempt,
          willRetry,
          revoke,
          notBeforeMs,
          acquireStarted: started,
          wall: attempt === 1 ? arrived : undefined,
          ticket: queues && willRetry ? ticket : '',
          mayBeQueued: queues && attempt > 1,
        });
        const pending = contenders.filter((c) => !c.result);
        if (pending.length === 0) break;
        // A proposal below a node's fence is not contention: propose again at once, above what was seen.
        if (staleOnly && staleRounds++ < s.retryCount + 3) continue;
        if (retriesLeft <= 0) {
          for (const c of pending)
            c.result = { resource: c.request.resource, ok: false, error: this.#acquireFailure(c, attempt) };
          break;
        }
        // Subscribed only now that it has to wait (see ReleaseNotifier.listen for releases in between).
        if (!waiting && s.wakeOnRelease) waiting = this.#listen(pending, queues, attemptStarted, s.nodeTimeoutMs);
        // A release brings an attempt forward, uncounted; the retry after subscribing (a release may have
        // gone unheard) is the next counted one, so an acquire never makes more attempts, nor waits longer.
        if (!waiting?.woken) {
          dueAt ??= clock.now() + s.retryDelayMs + s.retryJitterMs * random.fraction();
          // A handoff settles its contender and ends the wait; the others wait on for the same retry.
          do await this.#wait(dueAt - clock.now(), signal, waiting);
          while (!waiting?.woken && !signal?.aborted && clock.now() < dueAt && contenders.some((c) => !c.result));
        }
        if (contenders.every((c) => c.result)) break;
        if (waiting?.woken === 'release') continue;
        retriesLeft--;
        dueAt = undefined;
      }
    } finally {
      waiting?.stop();
      for (const c of contenders) if (c.handoff) this.#endHandoff(c);
    }
    // Gave up while queued (aborted, or the claim went to another): leave now rather than hold the
    // others up until the place expires. Exhausted acquires left with their last attempt.
    const gaveUp = contenders.filter(
      (c) =>
        ticket !== '' &&
        c.result?.ok === false &&
        (c.result.error instanceof AcquireAbortedError ||
          c.result.error instanceof ClaimAlreadyGrantedError ||
          c.result.error instanceof ClaimStartedError),
    );
    if (gaveUp.length > 0) this.#leave(gaveUp, s);
    return contenders.map((c) => c.result as BatchResult<Lease>);
  }

  /** One attempt for the open contenders; releases what a failed contender got before returning (its own fresh value only). */
  async #attempt(
    open: Contender[],
    ttlMs: number,
    s: CallSettings,
    round: {
      attempt: number;
      willRetry: boolean;
      revoke: boolean;
      notBeforeMs: number | undefined;
      acquireStarted: number;
      /** The wall clock to propose from (the acquire's start, on its first attempt), else read now. */
      wall: number | undefined;
      /** The acquire's queue ticket, '' when this attempt does not queue. */
      ticket: string;
      /** A retry of an acquire that queues: a grant leaves the queue. */
      mayBeQueued: boolean;
    },
  ): Promise<{ staleOnly: boolean }> {
    const { attempt, willRetry, revoke, notBeforeMs, acquireStarted, wall, ticket, mayBeQueued } = round;
    const { clock, keyPrefix, quorum } = this.settings;
    const n = this.nodes.length;
    const proposal = this.#nextProposal(wall);
    const proposalText = ticket !== '' && proposal === wall ? ticket : String(proposal);
    // Only an acquire that will retry waits: its mark and queue place last until its next attempt is late.
    const waits = willRetry && (ticket !== '' || s.wakeOnRelease);
    const waitMs = waits ? Math.ceil(s.retryDelayMs + s.retryJitterMs) + s.nodeTimeoutMs : 0;
    // acquire.lua's layouts: a plain call (no claim, no value supplied, none of the options) sends a
    // header of four and three arguments per resource; others add the claim retention and the options
    // up to the last one set, and send five per resource.
    const header = [
      String(ttlMs),
      String(waitMs),
      String(Math.max(s.fenceRetentionMs, ttlMs)),
      s.wakeOnRelease ? this.#inbox : '',
    ];
    const options = [
      mayBeQueued ? '1' : '',
      revoke ? '1' : '',
      notBeforeMs === undefined ? '' : String(Math.ceil(notBeforeMs)),
    ];
    while (options.at(-1) === '') options.pop();
    const plain =
      options.length === 0 &&
      open.every(
        (c) => c.request.claim === undefined && !c.supplied && c.fence === undefined && c.request.after === undefined,
      );
    if (!plain) header.push(String(s.claimRetentionMs), ...options);
    const fenceOf = (c: Contender): string => (c.fence === undefined ? proposalText : String(c.fence));
    const keys: string[] = [];
    const args: string[] = [];
    for (const c of open) {
      const { request, supplied } = c;
      keys.push(resourceBase(keyPrefix, request.resource));
      if (plain) args.push(request.value, proposalText, ticket);
      else {
        const { fence, after } = request;
        args.push(request.value, fenceOf(c), ticket, request.claim ?? '', supplied ? '0' : '1', request.start ?? '');
        args.push(fence?.below === undefined ? '' : String(fence.below));
        if (after)
          args.push(
            after.claim,
            String(Math.floor(after.untilMs)),
            after.fence === undefined ? '' : String(after.fence),
          );
        else args.push('', '', '');
      }
    }
    const acquired = zeros(open.length);
    const handedVotes = zeros(open.length);
    /** Per contender whose claim a node reported held: nodes per value holding it (created on the first such vote). */
    const claimedBy: (Map<string, number> | undefined)[] = [];
    /**
     * How the claim refuses contender i: on how many nodes, against how many it takes to settle it.
     * A claim is granted to another once one value holds it on a quorum; a start is refused once
     * too many nodes refuse it, whoever holds the claim there (startClaim's rule).
     */
    const claimRefusal = (i: number): { count: number; settles: number } => {
      const counts = [...(claimedBy[i]?.values() ?? [])];
      return (open[i] as Contender).request.start === undefined
        ? { count: Math.max(0, ...counts), settles: quorum }
        : { count: counts.reduce((sum, c) => sum + c, 0), settles: n - quorum + 1 };
    };
    /** Per node reply that had `claimed` votes: the value holding each claim (created on the first). */
    let claimHoldersOf: Map<readonly AcquireVote[], (string | undefined)[]> | undefined;
    /** Per node reply that had `handed` votes: the fence each handoff set. */
    let handedFencesOf: Map<readonly AcquireVote[], (number | undefined)[]> | undefined;
    /** Per node reply that granted starts: the fence before each grant, for a failed attempt's cleanup to put back. */
    let grantedBeforeOf: Map<readonly AcquireVote[], string[]> | undefined;
    /** Per contender with a fence range: the highest fence a `stale` vote reported, and a `passed` one (only a vote). */
    const storedFence: number[] = [];
    const passedFence: number[] = [];
    /** Per contender: the longest a revoked holder's lock had left on a node that granted it (see Lease.revokedMs). */
    const revokedLeft: number[] = [];
    let answered = 0;
    const late = new LateReplies<readonly AcquireVote[]>();
    for (const c of open)
      if (c.handoff) {
        c.handoff.attempting = true;
        c.handoff.attempts = attempt;
      }
    const start = clock.now();
    const replies = await this.#round(
      { script: scripts.acquire, header, keys, args, timeoutMs: s.nodeTimeoutMs, maxResources: s.maxBatchSize },
      'acquire',
      {
        late: late.add,
        decode: (raw) => {
          const { votes, maxFence, claimHolders, handedFences, storedFences, passedFences, grantedBefore, revokedMs } =
            decodeAcquire(raw, open.length);
          revokedMs?.forEach((ms, i) => {
            if (ms !== undefined && ms > (revokedLeft[i] ?? 0)) revokedLeft[i] = ms;
          });
          if (grantedBefore) (grantedBeforeOf ??= new Map()).set(votes, grantedBefore);
          if (maxFence > this.#fenceFloor) this.#fenceFloor = maxFence;
          storedFences?.forEach((fence, i) => {
            if (fence !== undefined && fence > (storedFence[i] ?? 0)) storedFence[i] = fence;
          });
          passedFences?.forEach((fence, i) => {
            if (fence !== undefined && fence > (passedFence[i] ?? 0)) passedFence[i] = fence;
          });
          if (claimHolders) (claimHoldersOf ??= new Map()).set(votes, claimHolders);
          if (handedFences) (handedFencesOf ??= new Map()).set(votes, handedFences);
          return votes;
        },
        decided: (reply) => {
          answered++;
          if (reply.ok) {
            const holders = claimHoldersOf?.get(reply.reply);
            reply.reply.forEach((vote, i) => {
              if (GRANTS.has(vote)) acquired[i] = (acquired[i] ?? 0) + 1;
              else if (vote === 'handed') handedVotes[i] = (handedVotes[i] ?? 0) + 1;
              const holder = holders?.[i];
              if (holder === undefined) return;
              const counts = (claimedBy[i] ??= new Map());
              counts.set(holder, (counts.get(holder) ?? 0) + 1);
            });
          }
          const silent = n - answered;
          // On the last attempt, a contender that can no longer win is decided once it is also known
          // whether its claim is granted elsewhere (one value on a quorum): the nodes still silent may
          // tell, and down nodes, which answer first, must not make it a QuorumUnavailableError. Earlier
          // attempts settle at once (a retry follows): a hung node must not hold up the winners of
          // the batch for a node timeout per attempt.
          const claimKnown = (i: number): boolean => {
            const { count, settles } = claimRefusal(i);
            return count >= settles || count + silent < settles;
          };
          return acquired.every(
            (count, i) =>
              count >= quorum ||
              (handedVotes[i] ?? 0) >= quorum ||
              (lostAttempt(count, handedVotes[i] ?? 0, silent, quorum) && (willRetry || claimKnown(i))),
          );
        },
      },
    );
    const end = clock.now();
    // A node that granted stored our proposal: it counts as seen, like the fences nodes report, so
    // this client's next proposal is above it whatever its clock says or the nodes forget.
    if (open.some((c, i) => c.fence === undefined && (acquired[i] ?? 0) > 0) && proposal > this.#fenceFloor)
      this.#fenceFloor = proposal;
    // Keys were set no earlier than `start`: they outlive `start + ttl - drift` on any node whose clock drifts within bounds.
    const validUntil = start + ttlMs - driftMs(ttlMs, s.driftFactor);
    const validity = validUntil - end;
    // What the votes say of handoffs matters to an attempt that did not win, or found some.
    open.forEach((c, i) => {
      if (c.handoff && ((acquired[i] ?? 0) < quorum || c.handoff.handed.size > 0))
        this.#noteHandoffVotes(c.handoff, i, replies, start, handedFencesOf);
    });

    const failed: Contender[] = [];
    let staleOnly = true;
    open.forEach((c, i) => {
      const { request } = c;
      // `decided` counted the grants of every reply the round accepted: those in `replies`.
      const granted = (acquired[i] ?? 0) >= quorum && validity > s.minValidityMs;
      if (!granted && c.handoff && this.#settleHandoff(c)) {
        // Handed on a quorum: what this attempt set with its own fence is given back.
        for (const reply of replies)
          if (reply.ok && GRANTS.has(reply.reply[i] as AcquireVote))
            void this.#releaseOn(reply.node, [{ ...request, fence: fenceOf(c) }], s);
        return;
      }
      if (granted) {
        c.result = {
          resource: request.resource,
          ok: true,
          lease: {
            resource: request.resource,
            value: request.value,
            fence: c.fence ?? proposal,
            ttlMs,
            validUntil,
            claim: request.claim,
            ...(revokedLeft[i] === undefined ? {} : { revokedMs: revokedLeft[i] }),
          },
        };
        if (this.listenerCount('acquired') > 0)
          this.emit('acquired', {
            resource: request.resource,
            fence: c.fence ?? proposal,
            attempts: attempt,
            elapsedMs: end - acquireStarted,
            validityMs: validity,
          });
        return;
      }
      failed.push(c);
      if (c.handoff) this.#giveBackHanded(c.handoff, i, request, replies, handedFencesOf, s);
      c.lastCauses = causesExcept(replies, i, ['acquired', 'refreshed']) as Map<string, NodeCause>;
      c.lastClaimHolders = claimedBy[i];
      // Granted = one other value holds the claim on a quorum. Claims split among contenders of a failed round are released: retry.
      const holder = request.claim === undefined ? undefined : quorumHolder(claimedBy[i], quorum);
      if (request.start !== undefined) {
        const refusal = claimRefusal(i);
        if (refusal.count >= refusal.settles)
          c.result = {
            resource: request.resource,
            ok: false,
            error: new ClaimStartedError(
              request.resource,
              request.claim as string,
              mostHolder(claimedBy[i]),
              c.lastCauses,
            ),
          };
      } else if (request.claim !== undefined && holder !== undefined) {
        c.result = {
          resource: request.resource,
          ok: false,
          error: new ClaimAlreadyGrantedError(request.resource, request.claim, holder, c.lastCauses),
        };
      }
      if (!c.result && c.fence !== undefined) this.#nextFence(c, i, replies, storedFence[i], passedFence[i]);
      if (!(countVotes(replies, i, 'stale') > 0 && countVotes(replies, i, 'acquired', 'refreshed', 'stale') >= quorum))
        staleOnly = false;
    });
    if (failed.length > 0)
      await this.#releaseFailed(
        failed,
        open,
        replies,
        late,
        fenceOf,
        s,
        (reply, i) => grantedBeforeOf?.get(reply)?.[i],
      );
    else late.handle(() => undefined);
    // Handoffs heard while the attempt ran are decided now.
    for (const c of open)
      if (c.handoff) {
        c.handoff.attempting = false;
        if (!c.result) this.#settleHandoff(c);
      }
    return { staleOnly: failed.length > 0 && staleOnly };
  }

  /**
   * What an attempt's votes say of a waiter's handoffs: a node that voted `handed` holds the lock for
   * it with the fence it reports, set or refreshed after the attempt began; one that refused it set
   * nothing for it before then (a handoff it tells of later came after); one that granted it afresh
   * holds no handoff for it any more.
   */
  #noteHandoffVotes(
    h: HandoffState,
    i: number,
    replies: readonly NodeReply<readonly AcquireVote[]>[],
    start: number,
    handedFencesOf: Map<readonly AcquireVote[], (number | undefined)[]> | undefined,
  ): void {
    for (const reply of replies) {
      if (!reply.ok) continue;
      const node = this.nodes.indexOf(reply.node);
      const vote = reply.reply[i] as AcquireVote;
      const fence = handedFencesOf?.get(reply.reply)?.[i];
      if (vote === 'handed' && fence !== undefined) h.handed.set(node, { fence, since: start });
      else if (REFUSALS.has(vote)) h.refusedAt[node] = start;
      else if (GRANTS.has(vote)) h.handed.delete(node);
    }
  }

  /**
   * After a failed attempt, the nodes that voted `handed` make no lease (another fence, or too
   * few): each is given back as a failed attempt's cleanup, which reserves the lock for the first
   * waiter, so the next attempt takes it afresh with one fence everywhere rather than find the same
   * handoffs again until it gives up.
   */
  #giveBackHanded(
    h: HandoffState,
    i: number,
    request: Pick<Lease, 'resource' | 'value'>,
    replies: readonly NodeReply<readonly AcquireVote[]>[],
    handedFencesOf: Map<readonly AcquireVote[], (number | undefined)[]> | undefined,
    s: CallSettings,
  ): void {
    for (const reply of replies) {
      const fence = reply.ok && reply.reply[i] === 'handed' ? handedFencesOf?.get(reply.reply)?.[i] : undefined;
      if (fence === undefined) continue;
      const node = this.nodes.indexOf(reply.node);
      h.handed.delete(node);
      h.givenBack[node] = fence;
      void this.#releaseOn(reply.node, [{ ...request, fence: String(fence) }], s);
    }
  }

  /** A node told a waiter's inbox it handed the lock to `value` (ReleaseNotifier). */
  #heardHandoff(node: number, value: string, fence: number): void {
    if (fence > this.#fenceFloor) this.#fenceFloor = fence;
    const c = this.#handoffWaiters.get(value);
    const h = c?.handoff;
    if (c && h) {
      if (fence <= (h.givenBack[node] ?? 0)) return;
      h.handed.set(node, { fence, since: h.refusedAt[node] ?? h.started });
      if (!c.result && !h.attempting) this.#settleHandoff(c);
      return;
    }
    // Handed to an acquire that has failed since: given back, so it blocks nobody for its ttl.
    const gave = this.#gaveUp.get(value);
    const target = this.nodes[node];
    if (gave && target)
      void this.#releaseOn(target, [{ resource: gave.resource, value, fence: String(fence) }], this.settings, '3');
  }

  /** Settles a waiter whose handoffs make a lease (handedLease) with validity left; true when it did. */
  #settleHandoff(c: Contender): boolean {
    const h = c.handoff as HandoffState;
    const { clock, quorum } = this.settings;
    const handed = handedLease(h.handed, quorum);
    if (!handed) return false;
    const validUntil = handed.since + h.ttlMs - driftMs(h.ttlMs, h.settings.driftFactor);
    const now = clock.now();
    // Too little left (a waiter paused past its ttl): its next attempt finds the lock handed and refreshes it.
    if (validUntil - now <= h.settings.minValidityMs) return false;
    const { resource, value } = c.request;
    c.result = {
      resource,
      ok: true,
      lease: { resource, value, fence: handed.fence, ttlMs: h.ttlMs, validUntil, claim: undefined },
    };
    if (this.listenerCount('acquired') > 0)
      this.emit('acquired', {
        resource,
        fence: handed.fence,
        attempts: h.attempts,
        elapsedMs: now - h.started,
        validityMs: validUntil - now,
      });
    h.wake();
    return true;
  }

  /**
   * Ends a waiter's handoffs with its acquire. Failed, it gives back what nodes handed it, and a
   * handoff heard later (a node that still had it queued) is given back as it comes.
   */
  #endHandoff(c: Contender): void {
    const { resource, value } = c.request;
    this.#handoffWaiters.delete(value);
    if (c.result?.ok) return;
    const h = c.handoff as HandoffState;
    for (const [node, { fence }] of h.handed) {
      const target = this.nodes[node];
      if (target) void this.#releaseOn(target, [{ resource, value, fence: String(fence) }], h.settings, '3');
    }
    const now = this.settings.clock.now();
    for (const [gone, { until }] of this.#gaveUp) {
      if (until > now) break;
      this.#gaveUp.delete(gone);
    }
    // Its queue places last a wait past its last attempt (see #attempt's waitMs).
    const { retryDelayMs, retryJitterMs, nodeTimeoutMs } = h.settings;
    this.#gaveUp.set(value, { resource, until: now + retryDelayMs + retryJitterMs + 2 * nodeTimeoutMs });
  }

  /**
   * Releases what failed contenders of an attempt got, each only while the resource's fence is still
   * the attempt's proposal (nobody granted since). A value the library made up is released on every
   * node, with the claims it recorded: acquire.lua never refreshes such a value (a takeover by value
   * may share it by now), so a lock holding it with this fence was set by this attempt. A value the caller supplied (a takeover) only where this attempt set it
   * (`acquired`), claims kept: where the lock already held it (`refreshed`) it may be its owner's
   * live lease and claim - a failed takeover must not take either away, nor leave what it set afresh
   * to block others for a TTL. The fence check covers the race in between: another holder of the
   * same value that refreshed the lock after this attempt set it has raised the fence.
   */
  async #releaseFailed(
    failed: readonly Contender[],
    open: readonly Contender[],
    replies: readonly NodeReply<readonly AcquireVote[]>[],
    late: LateReplies<readonly AcquireVote[]>,
    fenceOf: (c: Contender) => string,
    s: CallSettings,
    beforeOf: (reply: readonly AcquireVote[], i: number) => string | undefined,
  ): Promise<void> {
    const madeUp = failed.filter((c) => !c.supplied);
    const supplied = failed.filter((c) => c.supplied);
    const { granted, errored, silent } = this.#whereSet(madeUp, open, replies);
    const cleanUp = (only: readonly number[]) =>
      this.#releaseValues(
        madeUp.map((c) => ({ ...c.request, fence: fenceOf(c) })),
        true,
        s,
        only,
      );
    // What a supplied value's attempt set afresh where its vote came (`acquired`), with the claim a
    // start moved put back (see releaseSet); a start's late grant too, so that a later claim waits
    // for this one there (acquire.lua, After).
    const releaseFresh = (reply: NodeReply<readonly AcquireVote[]>, starts = false): Promise<void> | undefined => {
      if (!reply.ok) return undefined;
      const fresh = supplied.filter(
        (c) => reply.reply[open.indexOf(c)] === 'acquired' && (!starts || c.request.start !== undefined),
      );
      return fresh.length > 0
        ? this.#releaseOn(
            reply.node,
            fresh.map((c) => releaseSet(c, fenceOf(c), beforeOf(reply.reply, open.indexOf(c)))),
            s,
          )
        : undefined;
    };
    // Where no node granted, only nodes whose vote is unknown may hold anything: cleaned up in the
    // background (those that errored now, the silent ones once their late vote shows a grant),
    // since waiting for the nodes the round was decided without would cost most failed attempts (a
    // waiter's) a round trip. Fence-checked, a cleanup is harmless whenever it lands.
    late.handle((reply) => {
      const index = this.nodes.indexOf(reply.node);
      if (granted.length === 0 && silent.includes(index) && this.#mayHaveSet(madeUp, open, reply))
        void cleanUp([index]);
      void releaseFresh(reply, true);
    });
    if (granted.length === 0 && errored.length > 0) void cleanUp(errored);
    await Promise.all([
      granted.length > 0 ? cleanUp([...granted, ...errored, ...silent].sort((a, b) => a - b)) : undefined,
      ...replies.map((reply) => releaseFresh(reply)),
    ]);
  }

  /**
   * Where the attempt that `replies` judged may have set a lock or claim of `contenders`: the
   * nodes that granted one (`granted`), and those whose vote is unknown: an error or a timeout
   * (`errored`), or no reply yet when the round was decided (`silent`). Any other vote (taken,
   * queued, claimed, stale, early) means the node set nothing for them, so no cleanup need go there.
   */
  #whereSet(
    contenders: readonly Contender[],
    open: readonly Contender[],
    replies: readonly NodeReply<readonly AcquireVote[]>[],
  ): { granted: number[]; errored: number[]; silent: number[] } {
    const where = { granted: [] as number[], errored: [] as number[], silent: [] as number[] };
    if (contenders.length === 0) return where;
    this.nodes.forEach((node, n) => {
      const reply = replies.find((r) => r.node === node);
      if (!reply) where.silent.push(n);
      else if (!reply.ok) where.errored.push(n);
      else if (this.#mayHaveSet(contenders, open, reply)) where.granted.push(n);
    });
    return where;
  }

  /** Whether `reply` (an error, or a vote that grants) leaves it possible that its node set something for `contenders`. */
  #mayHaveSet(
    contenders: readonly Contender[],
    open: readonly Contender[],
    reply: NodeReply<readonly AcquireVote[]>,
  ): boolean {
    return !reply.ok || contenders.some((c) => GRANTS.has(reply.reply[open.indexOf(c)] as AcquireVote));
  }

  /**
   * One fence-checked release call on one node (no claims dropped): release.lua's '2', a failed
   * attempt cleaning up, or '3', a handoff given back unused. Its error is emitted, never thrown.
   */
  async #releaseOn(
    node: LockNode,
    leases: readonly (Pick<Lease, 'resource' | 'value'> & { fence: string; claim?: string })[],
    s: CallSettings,
    mode: '2' | '3' = '2',
  ): Promise<void> {
    const { keyPrefix, clock } = this.settings;
    const keys = leases.map((lease) => resourceBase(keyPrefix, lease.resource));
    const args = [mode, ...leases.flatMap((lease) => [lease.value, lease.claim ?? '', lease.fence])];
    let timer: unknown;
    const timeout = new Promise<never>(
      (_, reject) => (timer = clock.setTimeout(() => reject(new NodeTimeoutError(s.nodeTimeoutMs)), s.nodeTimeoutMs)),
    );
    try {
      await Promise.race([node.run(scripts.release, keys, args, s.nodeTimeoutMs), timeout]);
    } catch (error) {
      if (this.listenerCount('nodeError') > 0)
        this.emit('nodeError', { node: node.id, operation: 'release', error: error as Error });
    } finally {
      clock.clearTimeout(timer);
    }
  }

  /**
   * A contender with a fence range after a failed attempt: its next proposal is above the highest
   * fence a `stale` node reported (`stored`); it fails with FencePassedError once that reaches the
   * limit, or too many nodes answered `passed` for the rest to make a quorum. A node or two that
   * answered `passed` (a later claim's attempt raised their fence, and may have failed) only
   * refuse this attempt: the others may still grant it.
   */
  #nextFence(
    c: Contender,
    i: number,
    replies: readonly NodeReply<readonly AcquireVote[]>[],
    stored = 0,
    highest = stored,
  ): void {
    const below = c.request.fence?.below ?? Infinity;
    c.fence = Math.max(c.fence ?? 0, stored + 1);
    if (c.fence < below && countVotes(replies, i, 'passed') <= this.nodes.length - this.quorum) return;
    const { resource } = c.request;
    const causes = c.lastCauses ?? new Map<string, NodeCause>();
    c.result = { resource, ok: false, error: new FencePassedError(resource, Math.max(stored, highest), causes) };
  }

  #acquireFailure(c: Contender, attempts: number): RedlockError {
    const { resource } = c.request;
    const causes = c.lastCauses ?? new Map<string, NodeCause>();
    const blocked = [...causes.values()].filter(
      (cause) =>
        cause === 'taken' ||
        cause === 'queued' ||
        cause === 'claimed' ||
        cause === 'early' ||
        cause === 'behind' ||
        cause === 'passed',
    ).length;
    if (blocked > this.nodes.length - this.quorum)
      return new LockTakenError(resource, causes, attempts, c.lastClaimHolders);
    return new QuorumUnavailableError(resource, 'acquire', causes, this.quorum, c.lastClaimHolders);
  }

  /** Takes the contenders out of their resources' queues (leave.lua), in the background: errors are emitted as `nodeError`. */
  #leave(contenders: readonly Contender[], s: CallSettings): void {
    const { keyPrefix } = this.settings;
    const call = {
      script: scripts.leave,
      header: [],
      keys: contenders.map((c) => resourceBase(keyPrefix, c.request.resource)),
      args: contenders.map((c) => c.request.value),
      timeoutMs: s.nodeTimeoutMs,
      maxResources: s.maxBatchSize,
    };
    void this.#round(call, 'leave', { decode: (raw) => raw });
  }

  /**
   * Listens for releases of the contenders' resources since `since`: queued contenders on the
   * inbox (a release names their value when it is their turn), others on the resources' channels.
   */
  #listen(contenders: readonly Contender[], queues: boolean, since: number, timeoutMs: number): Waiting {
    const { keyPrefix } = this.settings;
    const waiting: Waiting = { woken: undefined, notify: undefined, stop: () => undefined };
    const listening = contenders.map((c) => {
      const listener: ReleaseListener = {
        id: queues ? c.request.value : undefined,
        wake: (cause) => {
          if (c.result) return;
          // A release outranks a subscription: it is heard, the retry it brings forward is not counted.
          if (waiting.woken !== 'release') waiting.woken = cause;
          waiting.notify?.();
        },
      };
      return { channel: queues ? this.#inbox : releaseChannel(keyPrefix, c.request.resource), listener };
    });
    waiting.stop = () => {
      for (const { channel, listener } of listening) this.#notifier.unlisten(channel, listener);
    };
    for (const { channel, listener } of listening) this.#notifier.listen(channel, listener, since, timeoutMs);
    return waiting;
  }

  /** Waits `ms`, or until `waiting` is woken or `signal` aborts. */
  #wait(ms: number, signal: AbortSignal | undefined, waiting: Waiting | undefined): Promise<void> {
    const { clock } = this.settings;
    return new Promise((resolve) => {
      const done = (): void => {
        clock.clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        if (waiting) waiting.notify = undefined;
        resolve();
      };
      const timer = clock.setTimeout(done, Math.max(0, ms));
      signal?.addEventListener('abort', done, { once: true });
      if (waiting) waiting.notify = done;
    });
  }

  /**
   * Extends a lease (compare-and-extend; with `reestablish`, nodes that lost the
   * key get it back). Needs a quorum before the current validity ends. Throws
   * LeaseExpiredError, LeaseLostError (a majority reports it gone or taken) or
   * QuorumUnavailableError; the lease stays valid until its old `validUntil` then.
   */
  async extend(lease: Lease, ttlMs: number = lease.ttlMs, overrides: Partial<CallSettings> = {}): Promise<Lease> {
    const [result] = await this.extendBatch([lease], ttlMs, overrides);
    if (!result) throw new Error('unreachable: one lease gives one result');
    if (!result.ok) throw result.error;
    return result.lease;
  }

  /** Extends many leases with one script call per node. */
  async extendBatch(
    leases: readonly Lease[],
    ttlMs?: number,
    overrides: Partial<CallSettings> = {},
  ): Promise<BatchResult<Lease>[]> {
    const s = this.#callSettings(overrides);
    if (leases.length > s.maxBatchSize)
      return this.#inChunks(leases, s.maxBatchSize, (chunk) => this.extendBatch(chunk, ttlMs, overrides));
    const { clock, keyPrefix, quorum } = this.settings;
    const n = this.nodes.length;
    const start = clock.now();
    const results: BatchResult<Lease>[] = new Array(leases.length);
    const live: number[] = [];
    leases.forEach((lease, i) => {
      if (ttlMs !== undefined) checkTtl(ttlMs);
      if (start >= lease.validUntil)
        results[i] = {
          resource: lease.resource,
          ok: false,
          error: new LeaseExpiredError(lease.resource, 'extend', start - lease.validUntil),
        };
      else live.push(i);
    });
    if (live.length === 0) return results;
    const ttlOf = (lease: Lease) => ttlMs ?? lease.ttlMs;
    const keys: string[] = [];
    const args: string[] = [];
    let longestTtl = 0;
    for (const i of live) {
      const lease = leases[i] as Lease;
      keys.push(resourceBase(keyPrefix, lease.resource));
      args.push(lease.value, String(lease.fence), String(ttlOf(lease)));
      longestTtl = Math.max(longestTtl, ttlOf(lease));
    }
    const header = [s.reestablish ? '1' : '0', String(Math.max(s.fenceRetentionMs, longestTtl))];
    const good = zeros(live.length);
    let answered = 0;
    const replies = await this.#round(
      { script: scripts.extend, header, keys, args, timeoutMs: s.nodeTimeoutMs, maxResources: s.maxBatchSize },
      'extend',
      {
        decode: (raw) => decodeExtend(raw, live.length),
        decided: (reply) => {
          answered++;
          if (reply.ok)
            reply.reply.forEach(
              (vote, j) => (vote === 'extended' || vote === 'reestablished') && (good[j] = (good[j] ?? 0) + 1),
            );
          return good.every((count) => count >= quorum || count + (n - answered) < quorum);
        },
      },
    );
    const end = clock.now();
    live.forEach((i, j) => {
      const lease = leases[i] as Lease;
      const ttl = ttlOf(lease);
      let error: RedlockError | undefined;
      const causes = () => causesExcept(replies, j, ['extended', 'reestablished']) as Map<string, NodeCause>;
      if (countVotes(replies, j, 'taken', 'gone') >= quorum)
        error = new LeaseLostError(lease.resource, 'a majority reports the value gone or held by another', causes());
      else if (countVotes(replies, j, 'extended', 'reestablished') < quorum)
        error = new QuorumUnavailableError(lease.resource, 'extend', causes(), quorum);
      else if (end >= lease.validUntil) error = new LeaseExpiredError(lease.resource, 'extend', end - lease.validUntil);
      if (error) {
        results[i] = { resource: lease.resource, ok: false, error };
        this.emit('extensionFailed', { resource: lease.resource, elapsedMs: end - start, error });
        return;
      }
      // Extending never shortens: keep the later of the old and the new validity.
      const validUntil = Math.max(lease.validUntil, start + ttl - driftMs(ttl, s.driftFactor));
      results[i] = { resource: lease.resource, ok: true, lease: { ...lease, ttlMs: ttl, validUntil } };
      if (this.listenerCount('extended') > 0) {
        const reestablishedOn = replies.filter((r) => r.ok && r.reply[j] === 'reestablished').map((r) => r.node.id);
        this.emit('extended', {
          resource: lease.resource,
          elapsedMs: end - start,
          validityMs: validUntil - end,
          reestablishedOn,
        });
      }
    });
    return results;
  }

  /**
   * Releases a lease: one best-effort compare-and-delete on every node, in parallel. Never throws,
   * never retries. With its `fence` (a Lease as acquire or extend returns it), a node deletes the
   * lock only while that fence is still the resource's: a takeover by the same value since (a new
   * grant, a higher fence) keeps it.
   */
  async release(lease: ReleaseTarget, overrides: Partial<CallSettings> = {}): Promise<ReleaseResult> {
    const [result] = await this.releaseBatch([lease], overrides);
    return result as ReleaseResult;
  }

  /** Releases leases by resource and value (a lease known only from a job's data is enough), fence-checked as release is. */
  releaseBatch(leases: readonly ReleaseTarget[], overrides: Partial<CallSettings> = {}): Promise<ReleaseResult[]> {
    const s = this.#callSettings(overrides);
    if (leases.length > s.maxBatchSize)
      return this.#inChunks(leases, s.maxBatchSize, (chunk) => this.releaseBatch(chunk, overrides));
    return this.#releaseValues(leases, false, s);
  }

  /** Runs `call` on chunks of at most `size` items in parallel; results in input order. */
  async #inChunks<I, R>(items: readonly I[], size: number, call: (chunk: readonly I[]) => Promise<R[]>): Promise<R[]> {
    const chunks = Array.from({ length: Math.ceil(items.length / size) }, (_, i) =>
      items.slice(i * size, (i + 1) * size),
    );
    return (await Promise.all(chunks.map(call))).flat();
  }

  /**
   * Releases by value (and, with `fence`, only while the resource's fence is still that: see
   * release.lua), on every node or on those at `only` (the others are known to hold none of them).
   * `cleanup`: a failed attempt's (its claims are dropped too, its queue places kept).
   */
  async #releaseValues(
    leases: readonly { resource: string; value: string; claim?: string | undefined; fence?: string | number }[],
    cleanup: boolean,
    s: CallSettings,
    only?: readonly number[],
  ): Promise<ReleaseResult[]> {
    const { keyPrefix } = this.settings;
    // Without claims to drop or fences to check, release.lua takes the values alone.
    const plain = !cleanup && leases.every((lease) => lease.fence === undefined);
    const keys: string[] = [];
    const args: string[] = [];
    for (const lease of leases) {
      keys.push(resourceBase(keyPrefix, lease.resource));
      if (plain) args.push(lease.value);
      else args.push(lease.value, lease.claim ?? '', lease.fence === undefined ? '' : String(lease.fence));
    }
    const header = plain ? [] : [cleanup ? '1' : '0'];
    const { quorum } = this.settings;
    const n = this.nodes.length;
    const released = zeros(leases.length);
    // Nodes left out hold none of the leases: as good as answered `not-held`.
    let answered = n - (only?.length ?? n);
    // Decided like acquire and extend, so a slow minority does not hold up every release: once
    // each lease is released on a quorum (free for others) or no longer can be. Calls to one
    // node run in order, so this client's next call there lands after the release.
    const replies = await this.#round(
      { script: scripts.release, header, keys, args, timeoutMs: s.nodeTimeoutMs, maxResources: s.maxBatchSize },
      'release',
      {
        decode: (raw): ReleaseVote[] => decodeRelease(raw, leases.length),
        decided: (reply) => {
          answered++;
          if (reply.ok) reply.reply.forEach((vote, i) => vote === 'released' && (released[i] = (released[i] ?? 0) + 1));
          return released.every((count) => count >= quorum || count + (n - answered) < quorum);
        },
      },
      only,
    );
    const asked = only?.map((index) => this.nodes[index] as LockNode) ?? this.nodes;
    const unconfirmed =
      replies.length === asked.length
        ? []
        : asked.filter((node) => !replies.some((r) => r.node === node)).map((node) => node.id);
    return leases.map((lease, i) => {
      const result: ReleaseResult = {
        resource: lease.resource,
        released: [],
        failed: new Map(),
        unconfirmed: [...unconfirmed],
      };
      for (const r of replies) {
        const vote = r.ok ? r.reply[i] : r.error;
        if (vote === 'released') result.released.push(r.node.id);
        else result.failed.set(r.node.id, vote ?? 'not-held');
      }
      return result;
    });
  }

  /**
   * Records claims without taking any lock (claim.lua, see claims.ts): per request, the claim held
   * by a quorum for its value (a fresh one, or `value` to take over the claim of its holder), or why
   * not: ClaimAlreadyGrantedError (another value, or a start, holds it on a quorum), LockTakenError
   * (held elsewhere on too many nodes: a split), QuorumUnavailableError (too few answered).
   * `claimRetentionMs` is how long the nodes keep it.
   */
  claimBatch(requests: readonly ClaimRequest[], options: ClaimBatchOptions = {}): Promise<ClaimResult[]> {
    const { signal, ...overrides } = options;
    const s = this.#callSettings(overrides);
    if (requests.length > s.maxBatchSize)
      return this.#inChunks(requests, s.maxBatchSize, (chunk) => this.claimBatch(chunk, options));
    return claimBatch(this.#claimNodes, requests, s, signal);
  }

  /**
   * Marks a granted claim started by `start` (start.lua): resolves once a quorum of nodes holds it
   * started by this id. Each node moves a claim to one start id only, so at most one id ever
   * reaches a quorum, and no acquire can take a started claim over: a second publication of the
   * claim's work (the same lease value, another start id) cannot start it again. Retrying with the
   * same id is safe. `prior`: this start continues the work of that start id (a retry after it),
   * which it accepts where it finds it; where the claim is not started yet, this id starts it, and
   * `prior` arriving late is refused. `replaces`: a start id whose work did not run (its owner says
   * so: for the scheduler, a backfill that read the tick's run history): where that start holds the
   * claim, this one takes it. Throws ClaimStartedError when another start or value holds the claim
   * on too many nodes, QuorumUnavailableError when too few answered.
   */
  async startClaim(
    request: {
      resource: string;
      claim: string;
      value: string;
      start: string;
      prior?: string | undefined;
      replaces?: string | undefined;
    },
    overrides: Partial<CallSettings> = {},
  ): Promise<void> {
    const { resource, claim, value, start, prior = '', replaces = '' } = request;
    if (claim === '' || start === '' || [value, start, prior, replaces].some((part) => part.includes('|')))
      throw new InvalidSettingsError(
        'claim',
        'a start needs a claim id and a start id, and no "|" in the value or start ids',
      );
    const s = this.#callSettings(overrides);
    const { keyPrefix, quorum } = this.settings;
    const n = this.nodes.length;
    let started = 0;
    let refused = 0;
    const call = {
      script: scripts.start,
      header: [String(s.claimRetentionMs)],
      keys: [resourceBase(keyPrefix, resource)],
      args: [claim, value, start, prior, replaces],
      timeoutMs: s.nodeTimeoutMs,
      maxResources: s.maxBatchSize,
    };
    const replies = await this.#round(call, 'start', {
      decode: (raw) => decodeStart(raw, 1),
      decided: (reply) => {
        if (reply.ok && reply.reply[0] === 'started') started++;
        else if (reply.ok) refused++;
        return started >= quorum || refused > n - quorum;
      },
    });
    if (started >= quorum) return;
    const causes = new Map<string, NodeCause>();
    const holders = new Map<string, number>();
    for (const r of replies) {
      const vote = r.ok ? r.reply[0] : r.error;
      if (vote === 'started') continue;
      if (vote instanceof Error || vote === undefined) causes.set(r.node.id, vote ?? new Error('no vote'));
      else {
        causes.set(r.node.id, 'claimed');
        holders.set(vote.holder, (holders.get(vote.holder) ?? 0) + 1);
      }
    }
    if (refused <= n - quorum) throw new QuorumUnavailableError(resource, 'start', causes, quorum);
    throw new ClaimStartedError(resource, claim, mostHolder(holders), causes);
  }

  /**
   * Acquires `resource`, runs `routine` while a watchdog extends the lease every
   * `ttl * extendRatio`, and releases it afterwards. `signal` aborts before the
   * lease can lapse (its reason is a LeaseLostError or HoldLimitReachedError).
   * The routine's own result or error is returned or thrown as is.
   */
  async using<T>(
    resource: string,
    ttlMs: number,
    routine: (signal: AbortSignal, lease: Lease) => Promise<T>,
    options: AcquireOptions = {},
  ): Promise<T> {
    const lease = await this.acquire(resource, ttlMs, options);
    const { claim: _claim, value: _value, signal: _signal, fence: _fence, after: _after, ...overrides } = options;
    return this.hold(lease, routine, overrides);
  }

  /** Like {@link using}, for a lease already acquired (for example taken over by its value). */
  async hold<T>(
    lease: Lease,
    routine: (signal: AbortSignal, lease: Lease) => Promise<T>,
    overrides: Partial<CallSettings> = {},
  ): Promise<T> {
    const watchdog = new LeaseWatchdog(this, lease, this.#callSettings(overrides));
    try {
      watchdog.start();
      return await routine(watchdog.signal, lease);
    } finally {
      // Stop first: an extension landing after the release would re-establish the key.
      const last = await watchdog.stop();
      const { released, failed, unconfirmed } = await this.release(last, overrides);
      // Nodes that failed or did not answer may still hold it; those that answered `not-held` let it lapse already.
      const mayHold = unconfirmed.length + [...failed.values()].filter((cause) => cause !== 'not-held').length;
      const validityMs = last.validUntil - this.settings.clock.now();
      if (mayHold > this.nodes.length - this.quorum && validityMs > 0)
        this.emit('unreleased', { resource: last.resource, fence: last.fence, released, validityMs });
    }
  }

  /**
   * Which nodes answer a (no-op) script call within `nodeTimeoutMs` (the setting, or
   * the override: probe with the timeout your calls use), and whether they make a
   * quorum: for readiness probes.
   */
  async probe(
    overrides: Pick<Partial<CallSettings>, 'nodeTimeoutMs'> = {},
  ): Promise<{ quorum: boolean; reachable: string[]; unreachable: Map<string, Error> }> {
    const { nodeTimeoutMs, maxBatchSize } = this.#callSettings(overrides);
    const replies = await this.#round(
      {
        script: scripts.release,
        header: [],
        keys: [],
        args: [],
        timeoutMs: nodeTimeoutMs,
        maxResources: maxBatchSize,
      },
      undefined,
      { decode: (raw) => raw },
    );
    const reachable = replies.filter((r) => r.ok).map((r) => r.node.id);
    const unreachable = new Map(replies.flatMap((r) => (r.ok ? [] : [[r.node.id, r.error] as const])));
    return { quorum: reachable.length >= this.quorum, reachable, unreachable };
  }

  /**
   * The lock nodes' time: each node's TIME taken back to when the call was sent, the median of
   * those of the nodes that answered within `nodeTimeoutMs` - the time reference of decisions
   * other processes rely on (ReferenceClock). Undefined when fewer than a quorum answered.
   */
  async nodeTime(overrides: Pick<Partial<CallSettings>, 'nodeTimeoutMs'> = {}): Promise<NodeTime | undefined> {
    const { nodeTimeoutMs, maxBatchSize } = this.#callSettings(overrides);
    const { clock } = this.settings;
    const atMono = clock.now();
    const replies = await this.#round(
      { script: scripts.time, header: [], keys: [], args: [], timeoutMs: nodeTimeoutMs, maxResources: maxBatchSize },
      undefined,
      { decode: (raw) => timeAtSend(raw, clock.now() - atMono) },
    );
    const answers = replies.flatMap((reply) => (reply.ok ? [reply.reply] : []));
    if (answers.length < this.quorum) return undefined;
    const micros = median(answers.map((answer) => answer.micros));
    return { micros, atMono, roundTripMs: Math.max(...answers.map((answer) => answer.roundTripMs)) };
  }

  /**
   * Raises `resource`'s mark (mark.lua: a value that only rises, with a tag) to `value` on every
   * node, kept `keepMs` after it last rose. Resolves true when a quorum holds it or a higher one:
   * a later readMark then sees at least this value.
   */
  async raiseMark(
    resource: string,
    mark: Mark,
    keepMs: number,
    overrides: Pick<Partial<CallSettings>, 'nodeTimeoutMs'> = {},
  ): Promise<boolean> {
    checkTtl(keepMs);
    if (!Number.isSafeInteger(mark.value) || mark.tag.includes('|'))
      throw new InvalidSettingsError('mark', 'a mark is an integer value and a tag without "|"');
    const { answers } = await this.#markRound(resource, [String(mark.value), mark.tag], String(keepMs), overrides);
    return answers.filter((held) => held !== undefined && held.value >= mark.value).length >= this.quorum;
  }

  /**
   * `resource`'s mark: the highest a quorum of nodes answers (it holds every raise a quorum
   * took), undefined when none of them has one. Throws QuorumUnavailableError when fewer answer.
   */
  async readMark(
    resource: string,
    overrides: Pick<Partial<CallSettings>, 'nodeTimeoutMs'> = {},
  ): Promise<Mark | undefined> {
    // A read sends no value: the keep time (header) is not used.
    const { answers, causes } = await this.#markRound(resource, ['', ''], '1', overrides);
    if (answers.length < this.quorum)
      throw new QuorumUnavailableError(resource, 'read of the mark', causes, this.quorum);
    let highest: Mark | undefined;
    for (const mark of answers) if (mark && (!highest || mark.value > highest.value)) highest = mark;
    return highest;
  }

  /** One mark.lua call on every node: the marks of the nodes that answered until a quorum did, and why the others did not. */
  async #markRound(
    resource: string,
    args: readonly string[],
    keep: string,
    overrides: Pick<Partial<CallSettings>, 'nodeTimeoutMs'>,
  ): Promise<{ answers: (Mark | undefined)[]; causes: Map<string, NodeCause> }> {
    const { nodeTimeoutMs, maxBatchSize } = this.#callSettings(overrides);
    const call = {
      script: scripts.mark,
      header: [keep],
      keys: [resourceBase(this.settings.keyPrefix, resource)],
      args,
      timeoutMs: nodeTimeoutMs,
      maxResources: maxBatchSize,
    };
    let answered = 0;
    const replies = await this.#round(call, 'mark', {
      decode: (raw) => decodeMark(raw, 1),
      decided: (reply) => reply.ok && ++answered >= this.quorum,
    });
    const answers = replies.flatMap((reply) => (reply.ok ? [reply.reply[0]] : []));
    const causes = new Map<string, NodeCause>(replies.flatMap((r) => (r.ok ? [] : [[r.node.id, r.error] as const])));
    return { answers, causes };
  }

  /** Closes the clients the library opened from URLs. */
  async close(): Promise<void> {
    this.#notifier.close();
    await Promise.all(this.nodes.map((node) => node.close()));
  }
}
