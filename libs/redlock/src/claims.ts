import type { CallSettings, RedlockSettings } from './settings.ts';
import type { ScriptCall } from './call-coalescer.ts';
import {
  ClaimAlreadyGrantedError,
  InvalidSettingsError,
  LockTakenError,
  QuorumUnavailableError,
  type NodeCause,
  type RedlockError,
} from './errors.ts';
import { resourceBase } from './keys.ts';
import type { LockNode } from './lock-node.ts';
import type { NodeReply, RoundSpec } from './quorum-round.ts';
import { decodeClaim, scripts, type ClaimVote } from './scripts.ts';
import type { Clock } from './clock.ts';

/** One claim to record (claim.lua): a claim id on a resource, for a value. */
export interface ClaimRequest {
  resource: string;
  /** The claim id: granted once, to one value, for the claim retention. */
  claim: string;
  /** Take over a claim held by this value (its holders on some nodes count) instead of a fresh random value. */
  value?: string | undefined;
}

/** A claim a quorum of nodes holds for `value`. */
export interface Claim {
  readonly resource: string;
  readonly claim: string;
  readonly value: string;
}

/** Result per claim of a batch. */
export type ClaimResult =
  { resource: string; ok: true; claim: Claim } | { resource: string; ok: false; error: RedlockError };

/** Options of a claim batch: call settings (`claimRetentionMs` is the retention), and a signal that ends the retries. */
export type ClaimBatchOptions = Partial<CallSettings> & { signal?: AbortSignal | undefined };

/** What the claims need of a Redlock. */
export interface ClaimNodes {
  readonly nodes: readonly LockNode[];
  readonly settings: Readonly<Pick<RedlockSettings, 'keyPrefix' | 'clock' | 'random'>> & { readonly quorum: number };
  newValue(): string;
  round<T>(call: ScriptCall, spec: Omit<RoundSpec<T>, 'timeoutMs' | 'lateError'>): Promise<NodeReply<T>[]>;
}

interface Contender {
  request: ClaimRequest & { value: string };
  supplied: boolean;
  result?: ClaimResult;
  causes?: Map<string, NodeCause>;
  holders?: Map<string, number>;
}

/**
 * Records claims with one script call per node per attempt (claim.lua), no lock: a claim holding
 * the contender's value on a quorum is granted; one holding another value on a quorum is
 * ClaimAlreadyGrantedError (its holder: a started claim's `<value>|<start id>` too). A split among
 * contenders (none on a quorum) is retried after the retry delay, a value made up here first
 * taking back what it recorded, so that another attempt can win; a supplied value (a takeover)
 * never takes anything back: it may be the claim's owner's. Out of retries: LockTakenError when
 * the claim is held elsewhere on too many nodes, else QuorumUnavailableError, each with the
 * claim's holders.
 */
export async function claimBatch(
  ctx: ClaimNodes,
  requests: readonly ClaimRequest[],
  s: CallSettings,
  signal: AbortSignal | undefined,
): Promise<ClaimResult[]> {
  if (requests.some((r) => r.claim === '')) throw new InvalidSettingsError('claim', 'a claim id must not be empty');
  if (requests.some((r) => r.value?.includes('|')))
    throw new InvalidSettingsError('value', 'a claim value must not contain "|"');
  const contenders: Contender[] = requests.map((request) => ({
    request: { ...request, value: request.value ?? ctx.newValue() },
    supplied: request.value !== undefined,
  }));
  for (let attempt = 1; ; attempt++) {
    await claimAttempt(
      ctx,
      contenders.filter((c) => !c.result),
      s,
    );
    const left = contenders.filter((c) => !c.result);
    if (left.length === 0) break;
    if (attempt > s.retryCount || signal?.aborted) {
      for (const c of left) c.result = { resource: c.request.resource, ok: false, error: failure(ctx, c, attempt) };
      break;
    }
    await sleep(ctx.settings.clock, s.retryDelayMs + s.retryJitterMs * ctx.settings.random.fraction(), signal);
  }
  return contenders.map((c) => c.result as ClaimResult);
}

/** One attempt: a claim on a quorum is granted, one another value holds on a quorum is refused, the rest stay open. */
async function claimAttempt(ctx: ClaimNodes, open: readonly Contender[], s: CallSettings): Promise<void> {
  const { quorum } = ctx.settings;
  const ours = open.map(() => 0);
  const others = open.map(() => new Map<string, number>());
  // Settled early only once each claim is ours or another's on a quorum: a failure names every node's holder.
  const replies = await ctx.round<ClaimVote[]>(claimCall(ctx, open, String(s.claimRetentionMs), s), {
    decode: (raw) => decodeClaim(raw, open.length),
    decided: (reply) => {
      if (!reply.ok) return false;
      let settled = true;
      reply.reply.forEach((vote, i) => {
        if (vote === 'claimed') ours[i] = (ours[i] ?? 0) + 1;
        else if (vote !== 'not-held') count(others[i] as Map<string, number>, vote.holder);
        if ((ours[i] ?? 0) < quorum && !atLeast(others[i] as Map<string, number>, quorum)) settled = false;
      });
      return settled;
    },
  });
  open.forEach((c, i) => {
    const { resource, claim, value } = c.request;
    if ((ours[i] ?? 0) >= quorum) {
      c.result = { resource, ok: true, claim: { resource, claim, value } };
      return;
    }
    c.holders = others[i] as Map<string, number>;
    c.causes = new Map();
    for (const reply of replies) {
      const vote = reply.ok ? reply.reply[i] : reply.error;
      if (vote instanceof Error) c.causes.set(reply.node.id, vote);
      else if (vote !== 'claimed') c.causes.set(reply.node.id, 'claimed');
    }
    for (const [holder, held] of c.holders)
      if (held >= quorum)
        c.result = { resource, ok: false, error: new ClaimAlreadyGrantedError(resource, claim, holder, c.causes) };
  });
  // A value made up here is ours alone: what a failed attempt recorded goes (compare-and-delete on every node).
  const dropped = open.filter((c) => !c.supplied && !c.result?.ok);
  if (dropped.length > 0) await ctx.round(claimCall(ctx, dropped, '', s), { decode: (raw) => raw });
}

function claimCall(ctx: ClaimNodes, contenders: readonly Contender[], retention: string, s: CallSettings): ScriptCall {
  return {
    script: scripts.claim,
    header: [retention],
    keys: contenders.map((c) => resourceBase(ctx.settings.keyPrefix, c.request.resource)),
    args: contenders.flatMap((c) => [c.request.claim, c.request.value]),
    timeoutMs: s.nodeTimeoutMs,
    maxResources: s.maxBatchSize,
  };
}

function count(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** Whether one of the counts reaches `quorum`. */
function atLeast(counts: ReadonlyMap<string, number>, quorum: number): boolean {
  for (const held of counts.values()) if (held >= quorum) return true;
  return false;
}

function failure(ctx: ClaimNodes, c: Contender, attempts: number): RedlockError {
  const { resource } = c.request;
  const causes = c.causes ?? new Map<string, NodeCause>();
  const held = [...causes.values()].filter((cause) => cause === 'claimed').length;
  const { quorum } = ctx.settings;
  if (held > ctx.nodes.length - quorum) return new LockTakenError(resource, causes, attempts, c.holders);
  return new QuorumUnavailableError(resource, 'claim', causes, quorum, c.holders);
}

function sleep(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clock.clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
