/**
 * Runs `work` while a 1 ms timer watches the event loop: its result, and the longest the loop
 * went without running the timer (a stall of the caller's own code, GC, or waiting for a core).
 */
export async function withLoopWatch<T>(work: () => Promise<T>): Promise<{ result: T; longestWaitMs: number }> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  try {
    const result = await work();
    return { result, longestWaitMs: Math.max(longest, performance.now() - last) };
  } finally {
    clearInterval(timer);
  }
}
