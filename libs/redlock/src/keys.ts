/**
 * Every Redis key the library touches is built here. All keys of one resource
 * share the hash tag `{resource}`, so each script call stays in one slot when a
 * node is a Redis Cluster.
 */
export function resourceKeys(prefix: string, resource: string, claim?: string) {
  const base = `${prefix}:{${resource}}`;
  return {
    lock: `${base}:lock`,
    fence: `${base}:fence`,
    claim: `${base}:claim:${claim ?? ''}`,
    waiters: `${base}:waiters`,
  };
}
