import net from 'node:net';

/** Loopback address every kit server binds to; test traffic never leaves it. */
export const LOOPBACK = '127.0.0.1';

/** Ports the kit never hands out, because a Redis it did not start may listen there. */
const RESERVED_PORTS = new Set([6379]);

/**
 * Asks the kernel for a free loopback port. The port is released before it is
 * used, so callers must retry on EADDRINUSE; ephemeral ports are never 6379.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = net.createServer();
      server.once('error', reject);
      server.listen(0, LOOPBACK, () => {
        const address = server.address();
        server.close(() =>
          typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
        );
      });
    });
    if (!RESERVED_PORTS.has(port)) return port;
  }
}
