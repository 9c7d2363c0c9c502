import { containerRuntimeAvailable } from '../src/index.ts';
import type { RedisDriver } from '../src/index.ts';

/**
 * The drivers a suite runs with: always `process`; `container` too when a
 * container runtime answers. When TICKWARDEN_REQUIRE_DOCKER=1 (CI set it after
 * starting dockerd), a missing runtime fails instead of being skipped.
 */
export async function availableDrivers(): Promise<RedisDriver[]> {
  if (await containerRuntimeAvailable()) return ['process', 'container'];
  if (process.env['TICKWARDEN_REQUIRE_DOCKER'] === '1') {
    throw new Error('TICKWARDEN_REQUIRE_DOCKER=1 but no container runtime answers');
  }
  console.warn('\n*** NO CONTAINER RUNTIME: the container-driver suite of the test kit is NOT RUN ***\n');
  return ['process'];
}
