/** Lets the event loop run timers and I/O before the rest of a long piece of work (slice by slice). */
export const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
