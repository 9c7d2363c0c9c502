/**
 * Every Redis key the library touches is named here. All keys of one resource
 * share the hash tag `{resource}`, so each script call stays in one slot when a
 * node is a Redis Cluster. Scripts receive only the key base of each resource
 * and append the suffixes below (one argument per resource instead of four);
 * the tests read keys through `resourceKeys`, so a script that drifted from
 * these names fails them.
 */
export function resourceBase(prefix: string, resource: string): string {
  return `${prefix}:{${resource}}:`;
}

/** The keys of one resource, as the scripts build them from its base. */
export function resourceKeys(prefix: string, resource: string, claim?: string) {
  const base = resourceBase(prefix, resource);
  return {
    lock: `${base}lock`,
    fence: `${base}fence`,
    claim: `${base}claim:${claim ?? ''}`,
    waiters: `${base}waiters`,
  };
}
