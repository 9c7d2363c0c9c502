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

/** The channel a lock node publishes a resource's releases on when someone waits for it (release.lua). */
export function releaseChannel(prefix: string, resource: string): string {
  return `${resourceBase(prefix, resource)}released`;
}

/** The channel one Redlock instance hears its queued waiters' turns on (release.lua names the waiter). */
export function inboxChannel(prefix: string, id: string): string {
  return `${prefix}:inbox:${id}`;
}

/** The keys of one resource, as the scripts build them from its base. */
export function resourceKeys(prefix: string, resource: string, claim?: string, waiter?: string) {
  const base = resourceBase(prefix, resource);
  return {
    lock: `${base}lock`,
    fence: `${base}fence`,
    claim: `${base}claim:${claim ?? ''}`,
    waiters: `${base}waiters`,
    /** A value that only rises, with a tag (mark.lua). */
    mark: `${base}mark`,
    queue: `${base}queue`,
    /** A waiter's record while it waits, its `handed` mark after a handoff (waiters.lua). */
    waiter: `${base}waiter:${waiter ?? ''}`,
  };
}
