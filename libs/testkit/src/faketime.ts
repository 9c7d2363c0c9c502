import { existsSync } from 'node:fs';

/** Debian's libfaketime (`apt-get install faketime`): it shifts or steps one process's wall clock. */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

/** Environment that makes libfaketime shift one process's wall clock by `offsetMs` (its monotonic clock untouched). */
export function skewedClockEnv(offsetMs: number): Record<string, string> {
  if (!existsSync(LIBFAKETIME))
    throw new Error(`clock skew needs Debian's libfaketime (${LIBFAKETIME}): apt-get install faketime`);
  const seconds = (offsetMs / 1000).toFixed(3);
  return {
    LD_PRELOAD: LIBFAKETIME,
    FAKETIME: offsetMs >= 0 ? `+${seconds}` : seconds,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
  };
}
