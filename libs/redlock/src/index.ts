export type { Claim, ClaimBatchOptions, ClaimRequest, ClaimResult } from './claims.ts';
export { systemClock, systemRandom, type Clock, type RandomSource } from './clock.ts';
export {
  AcquireAbortedError,
  ClaimAlreadyGrantedError,
  ClaimStartedError,
  ErrorCode,
  FencePassedError,
  HoldLimitReachedError,
  InvalidSettingsError,
  LeaseExpiredError,
  LeaseLostError,
  LockTakenError,
  NodeTimeoutError,
  QuorumUnavailableError,
  RedlockError,
  isStartedClaim,
  type ClaimHolders,
  type NodeCause,
} from './errors.ts';
export { resourceKeys } from './keys.ts';
export type { AcquireRequest, BatchResult, Lease, ReleaseResult, ReleaseTarget } from './lease.ts';
export { LeaseWatchdog } from './lease-watchdog.ts';
export { IoredisLockNode, LOCK_CLIENT_OPTIONS, type LockNode, type NodeSubscriber } from './lock-node.ts';
export {
  Redlock,
  type AcquireBatchOptions,
  type AcquireOptions,
  type NodeInput,
  type NodeOperation,
  type RedlockEvents,
} from './redlock.ts';
export { ReferenceClock, type NodeTime, type NodeTimeSource } from './reference-clock.ts';
export { scripts, type LuaScript, type Mark } from './scripts.ts';
export { DEFAULT_SETTINGS, type CallSettings, type RedlockSettings } from './settings.ts';
