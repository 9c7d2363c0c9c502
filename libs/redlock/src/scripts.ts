import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** A Lua script as sent to a node: its source and the SHA1 that EVALSHA names it by. */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  readonly sha: string;
}

// From the package root, so the same path works from src/ (sources) and from dist/ (the build): the .lua files stay in src/.
const luaFile = (path: string): string => readFileSync(new URL(`../src/scripts/${path}.lua`, import.meta.url), 'utf8');

/** A script with each `-- @include <name>` line replaced by `includes/<name>.lua`: Lua scripts cannot import. */
function load(name: string): LuaScript {
  const source = luaFile(name).replace(/^-- @include (\w+)$/gm, (_, include: string) =>
    luaFile(`includes/${include}`).trimEnd(),
  );
  return Object.freeze({ name, source, sha: createHash('sha1').update(source).digest('hex') });
}

export const scripts = Object.freeze({
  acquire: load('acquire'),
  claim: load('claim'),
  extend: load('extend'),
  leave: load('leave'),
  mark: load('mark'),
  release: load('release'),
  start: load('start'),
  time: load('time'),
});

/** A node's answer for one resource, decoded from the scripts' integer codes (the one place they are mapped). */
/** `acquired`: set by this call; `refreshed`: the lock already held the caller's value (both are grants). */
/** `early`: the node's clock has not reached the acquire's not-before time. */
/** `handed`: a release handed the lock to the caller's value, with a fence of its own (acquire.lua). */
/** `behind`: an earlier claim is not started (the acquire's `after`); `passed`: the fence reached the acquire's limit. */
export type AcquireVote =
  'acquired' | 'refreshed' | 'handed' | 'taken' | 'claimed' | 'stale' | 'queued' | 'early' | 'behind' | 'passed';
export type ExtendVote = 'extended' | 'reestablished' | 'taken' | 'gone';
export type ReleaseVote = 'released' | 'not-held';
/** `started` by this start id, or the value (or start) holding the claim instead. */
export type StartVote = 'started' | { holder: string };
/** `claimed`: the claim holds the caller's value; `not-held` (a drop only): it holds another, or nothing; else its holder. */
export type ClaimVote = 'claimed' | 'not-held' | { holder: string };

// The one place the scripts' integer codes are mapped (switches: the lookups sit on every reply's path).
function acquireVote(code: unknown): AcquireVote {
  switch (Number(code)) {
    case 1:
      return 'acquired';
    case 2:
      return 'refreshed';
    case 3:
      return 'handed';
    case 0:
      return 'taken';
    case -1:
      return 'claimed';
    case -2:
      return 'stale';
    case -4:
      return 'queued';
    case -5:
      return 'early';
    case -6:
      return 'behind';
    case -7:
      return 'passed';
    default:
      throw unknownCode('acquire', code);
  }
}

function extendVote(code: unknown): ExtendVote {
  switch (Number(code)) {
    case 1:
      return 'extended';
    case 2:
      return 'reestablished';
    case 0:
      return 'taken';
    case -3:
      return 'gone';
    default:
      throw unknownCode('extend', code);
  }
}

function releaseVote(code: unknown): ReleaseVote {
  switch (Number(code)) {
    case 1:
      return 'released';
    case 0:
      return 'not-held';
    default:
      throw unknownCode('release', code);
  }
}

function unknownCode(script: string, code: unknown): Error {
  return new Error(`${script}.lua returned unknown code ${String(code)}`);
}

/**
 * Decodes acquire.lua's reply (a code per resource, or a pair {code, detail}):
 * one vote per resource, the highest stored fence a `stale`, `passed` or `handed`
 * vote reported, for `claimed` votes the lease value holding the claim, for
 * `handed` votes the fence the handoff set, for `stale` and `passed` votes the stored
 * fence, apart, for a start's `acquired` vote the fence before it ('' for none), and for a grant
 * that revoked another holder how long that holder's lock had left (each undefined when there are
 * none).
 */
export function decodeAcquire(
  reply: unknown,
  count: number,
): {
  votes: AcquireVote[];
  maxFence: number;
  claimHolders: (string | undefined)[] | undefined;
  handedFences: (number | undefined)[] | undefined;
  storedFences: (number | undefined)[] | undefined;
  passedFences: (number | undefined)[] | undefined;
  grantedBefore: string[] | undefined;
  revokedMs: (number | undefined)[] | undefined;
} {
  const entries = reply as unknown[];
  let maxFence = 0;
  let claimHolders: (string | undefined)[] | undefined;
  let handedFences: (number | undefined)[] | undefined;
  let storedFences: (number | undefined)[] | undefined;
  let passedFences: (number | undefined)[] | undefined;
  let grantedBefore: string[] | undefined;
  let revokedMs: (number | undefined)[] | undefined;
  const votes = new Array<AcquireVote>(count);
  for (let i = 0; i < count; i++) {
    const entry = entries[i];
    if (!Array.isArray(entry)) {
      votes[i] = acquireVote(entry);
      continue;
    }
    const vote = acquireVote(entry[0]);
    if (vote === 'claimed') (claimHolders ??= [])[i] = String(entry[1]);
    else if (vote === 'acquired') {
      (grantedBefore ??= [])[i] = String(entry[1]);
      if (entry[2] !== undefined && entry[2] !== null) (revokedMs ??= [])[i] = Number(entry[2]);
    } else maxFence = Math.max(maxFence, Number(entry[1]));
    if (vote === 'handed') (handedFences ??= [])[i] = Number(entry[1]);
    else if (vote === 'stale') (storedFences ??= [])[i] = Number(entry[1]);
    else if (vote === 'passed') (passedFences ??= [])[i] = Number(entry[1]);
    votes[i] = vote;
  }
  return { votes, maxFence, claimHolders, handedFences, storedFences, passedFences, grantedBefore, revokedMs };
}

/** Decodes start.lua's reply: per resource `started`, or the value holding the claim. */
export function decodeStart(reply: unknown, count: number): StartVote[] {
  const entries = reply as unknown[];
  const votes = new Array<StartVote>(count);
  for (let i = 0; i < count; i++) {
    const entry = entries[i];
    if (Array.isArray(entry) && Number(entry[0]) === -1) votes[i] = { holder: String(entry[1]) };
    else if (Number(entry) === 1) votes[i] = 'started';
    else throw unknownCode('start', entry);
  }
  return votes;
}

/** A value that only rises, with a tag (mark.lua; Redlock.raiseMark). */
export interface Mark {
  value: number;
  tag: string;
}

/** Decodes mark.lua's reply: per resource the mark as it stands, undefined where there is none. */
export function decodeMark(reply: unknown, count: number): (Mark | undefined)[] {
  const entries = reply as unknown[];
  const marks = new Array<Mark | undefined>(count);
  for (let i = 0; i < count; i++) {
    const entry = String(entries[i] ?? '');
    const bar = entry.indexOf('|');
    const value = Number(entry.slice(0, bar));
    if (entry === '') marks[i] = undefined;
    else if (bar > 0 && Number.isSafeInteger(value)) marks[i] = { value, tag: entry.slice(bar + 1) };
    else throw unknownCode('mark', entry);
  }
  return marks;
}

/** Decodes claim.lua's reply: per resource `claimed`, `not-held`, or the value holding the claim. */
export function decodeClaim(reply: unknown, count: number): ClaimVote[] {
  const entries = reply as unknown[];
  const votes = new Array<ClaimVote>(count);
  for (let i = 0; i < count; i++) {
    const entry = entries[i];
    if (Array.isArray(entry) && Number(entry[0]) === -1) votes[i] = { holder: String(entry[1]) };
    else if (Number(entry) === 1) votes[i] = 'claimed';
    else if (Number(entry) === 0) votes[i] = 'not-held';
    else throw unknownCode('claim', entry);
  }
  return votes;
}

/** One vote per resource, from a reply of one code per resource. */
function decodeCodes<V>(reply: unknown, count: number, vote: (code: unknown) => V): V[] {
  const codes = reply as unknown[];
  const votes = new Array<V>(count);
  for (let i = 0; i < count; i++) votes[i] = vote(codes[i]);
  return votes;
}

export const decodeExtend = (reply: unknown, count: number): ExtendVote[] => decodeCodes(reply, count, extendVote);
export const decodeRelease = (reply: unknown, count: number): ReleaseVote[] => decodeCodes(reply, count, releaseVote);
