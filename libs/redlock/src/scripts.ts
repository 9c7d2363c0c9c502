import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** A Lua script as sent to a node: its source and the SHA1 that EVALSHA names it by. */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
  /** Reply entries per resource (the reply is a flat array, resource after resource). */
  readonly replyWidth: number;
}

function load(name: string, replyWidth: number): LuaScript {
  // From the package root, so the same path works from src/ (sources) and from dist/ (the build): the .lua files stay in src/.
  const source = readFileSync(new URL(`../src/scripts/${name}.lua`, import.meta.url), 'utf8');
  return Object.freeze({ name, source, sha: createHash('sha1').update(source).digest('hex'), replyWidth });
}

export const scripts = Object.freeze({
  acquire: load('acquire', 2),
  extend: load('extend', 1),
  release: load('release', 1),
  revoke: load('revoke', 1),
});

/** A node's answer for one resource, decoded from the scripts' integer codes (the one place they are mapped). */
export type AcquireVote = 'acquired' | 'taken' | 'claimed' | 'stale' | 'queued';
export type ExtendVote = 'extended' | 'reestablished' | 'taken' | 'gone';
export type ReleaseVote = 'released' | 'not-held';
export type RevokeVote = 'revoked' | 'free' | 'claimed';

const ACQUIRE_CODES: Readonly<Record<number, AcquireVote>> = { 1: 'acquired', 0: 'taken', [-1]: 'claimed', [-2]: 'stale', [-4]: 'queued' };
const EXTEND_CODES: Readonly<Record<number, ExtendVote>> = { 1: 'extended', 2: 'reestablished', 0: 'taken', [-3]: 'gone' };
const RELEASE_CODES: Readonly<Record<number, ReleaseVote>> = { 1: 'released', 0: 'not-held' };
const REVOKE_CODES: Readonly<Record<number, RevokeVote>> = { 1: 'revoked', 0: 'free', 2: 'claimed' };

function decode<T>(table: Readonly<Record<number, T>>, code: unknown, script: string): T {
  const vote = table[Number(code)];
  if (vote === undefined) throw new Error(`${script}.lua returned unknown code ${String(code)}`);
  return vote;
}

/**
 * Decodes acquire.lua's flat reply: one vote per resource, the highest fence the
 * node reported, and for `claimed` votes the lease value holding the claim.
 */
export function decodeAcquire(reply: unknown, count: number): { votes: AcquireVote[]; maxFence: number; claimHolders: (string | undefined)[] } {
  const flat = reply as unknown[];
  let maxFence = 0;
  const claimHolders: (string | undefined)[] = [];
  const votes = Array.from({ length: count }, (_, i) => {
    const vote = decode(ACQUIRE_CODES, flat[2 * i], 'acquire');
    if (vote === 'claimed') claimHolders[i] = String(flat[2 * i + 1]);
    else maxFence = Math.max(maxFence, Number(flat[2 * i + 1]));
    return vote;
  });
  return { votes, maxFence, claimHolders };
}

export function decodeExtend(reply: unknown, count: number): ExtendVote[] {
  return Array.from({ length: count }, (_, i) => decode(EXTEND_CODES, (reply as unknown[])[i], 'extend'));
}

export function decodeRelease(reply: unknown, count: number): ReleaseVote[] {
  return Array.from({ length: count }, (_, i) => decode(RELEASE_CODES, (reply as unknown[])[i], 'release'));
}

export function decodeRevoke(reply: unknown, count: number): RevokeVote[] {
  return Array.from({ length: count }, (_, i) => decode(REVOKE_CODES, (reply as unknown[])[i], 'revoke'));
}
