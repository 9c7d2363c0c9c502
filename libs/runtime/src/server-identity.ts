import type { ConnectionOptions } from 'node:tls';
import { redactUrl } from '@tickwarden/config';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redisOptionsFor } from './redis-tls.ts';

/** A Redis server the process uses, named as its operator would find it (the variable, and the entry of a list). */
export interface NamedServer {
  name: string;
  url: string;
}

/** How long the start-up identity check waits for each server, ms: a server down then is left unchecked, not waited for. */
export const IDENTITY_TIMEOUT_MS = 2_000;

/**
 * Servers that are one Redis server under several names: groups of two or more names whose
 * servers report the same `run_id` (a host name, an address and a proxy for one server look
 * independent; its run_id does not). Servers without a run_id (unreachable) are left out.
 */
export function sameServers(runIds: ReadonlyMap<string, string | undefined>): string[][] {
  const byRunId = new Map<string, string[]>();
  for (const [name, runId] of runIds)
    if (runId !== undefined) byRunId.set(runId, [...(byRunId.get(runId) ?? []), name]);
  return [...byRunId.values()].filter((names) => names.length > 1);
}

/** The server's `run_id` (`INFO server`): it changes when the server restarts, or another takes its place (a failover). */
export async function serverRunId(client: Redis): Promise<string | undefined> {
  return /^run_id:(\w+)/m.exec(await client.info('server'))?.[1];
}

/** The `run_id` of `INFO server`, or undefined when the server does not answer in time. */
async function runIdOf(
  url: string,
  tls: ConnectionOptions | undefined,
  timeoutMs: number,
): Promise<string | undefined> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    ...redisOptionsFor(url, tls),
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await serverRunId(client);
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

/**
 * Asks every server its `run_id` (in parallel, each within `timeoutMs`) and returns what makes the
 * deployment unsafe, as messages naming the servers: two lock nodes that are one server (a quorum
 * on fewer servers than it counts), or a queue Redis that is a lock node. `unchecked`: the names
 * that did not answer, for the caller to log.
 */
export async function checkServerIdentities(
  servers: readonly NamedServer[],
  tls: ConnectionOptions | undefined,
  timeoutMs = IDENTITY_TIMEOUT_MS,
): Promise<{ problems: string[]; unchecked: string[] }> {
  const runIds = new Map(
    await Promise.all(servers.map(async (server) => [server.name, await runIdOf(server.url, tls, timeoutMs)] as const)),
  );
  const urls = new Map(servers.map((server) => [server.name, redactUrl(server.url)]));
  const problems = sameServers(runIds).map(
    (names) =>
      `${names.map((name) => `${name} (${urls.get(name) ?? ''})`).join(' and ')} are one Redis server (run_id ${runIds.get(names[0] as string) ?? ''}): lock nodes must be independent servers, and the queue Redis must not be one of them`,
  );
  return { problems, unchecked: [...runIds].filter(([, runId]) => runId === undefined).map(([name]) => name) };
}

/**
 * The start-up check of scheduler and worker: warns about a single lock node allowed on purpose,
 * logs (error) every server that is another under a second name, and warns about the servers it
 * could not ask. False when the process must not start.
 */
export async function verifyServers(
  env: { lockNodes: readonly string[]; queueRedis: string; lockAllowSingle: boolean },
  tls: ConnectionOptions | undefined,
  logger: Logger,
): Promise<boolean> {
  if (env.lockAllowSingle && env.lockNodes.length === 1)
    logger.warn('one lock node (TICKWARDEN_LOCK_ALLOW_SINGLE=1): no fault tolerance, for development only');
  const servers = [
    ...env.lockNodes.map((url, i) => ({ name: `TICKWARDEN_LOCK_NODES entry ${i + 1}`, url })),
    { name: 'TICKWARDEN_QUEUE_REDIS', url: env.queueRedis },
  ];
  const { problems, unchecked } = await checkServerIdentities(servers, tls);
  for (const problem of problems) logger.error(problem);
  if (unchecked.length > 0)
    logger.warn({ unchecked }, 'could not check that these Redis servers are independent (no answer at start)');
  return problems.length === 0;
}
