import { defineConfig, type ViteUserConfig } from 'vitest/config';

/** Workspace packages resolve to their TypeScript sources in tests (see the `@tickwarden/source` export condition). */
const conditions = ['@tickwarden/source', 'module', 'node', 'development'];

/**
 * The vitest config every project uses: real Redis servers, so one fork per file and generous timeouts.
 * `maxWorkers`: test files run at once (vitest's default leaves one core free: one file at a time on 2 cores).
 */
export function projectConfig(name: string, root: string, maxWorkers?: number): ViteUserConfig {
  return defineConfig({
    root,
    cacheDir: `../../node_modules/.vite/${name}`,
    resolve: { conditions },
    ssr: { resolve: { conditions, externalConditions: conditions } },
    test: {
      name,
      environment: 'node',
      include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
      pool: 'forks',
      ...(maxWorkers === undefined ? {} : { maxWorkers }),
      testTimeout: 60_000,
      hookTimeout: 60_000,
      server: { deps: { inline: [/@tickwarden\//] } },
    },
  });
}
