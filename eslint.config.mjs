import nx from '@nx/eslint-plugin';

/**
 * Module boundaries: apps may use libs; libs may use libs; the test kit may use libs;
 * tooling (the end-to-end suite, the deploy checks: they run the apps as processes) may use
 * libs and the test kit; nothing imports an app, and libs import the test kit only from their tests
 * (test files are checked with the `scope:test` view below).
 */
export default [
  ...nx.configs['flat/base'],
  ...nx.configs['flat/typescript'],
  ...nx.configs['flat/javascript'],
  {
    ignores: ['**/dist', '**/out-tsc', '**/node_modules', '**/vitest.config.*.timestamp*'],
  },
  {
    files: ['**/*.ts'],
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          banTransitiveDependencies: true,
          checkNestedExternalImports: true,
          allow: [],
          depConstraints: [
            { sourceTag: 'scope:app', onlyDependOnLibsWithTags: ['scope:lib'] },
            { sourceTag: 'scope:lib', onlyDependOnLibsWithTags: ['scope:lib'] },
            { sourceTag: 'scope:testkit', onlyDependOnLibsWithTags: ['scope:lib'] },
            { sourceTag: 'scope:tooling', onlyDependOnLibsWithTags: ['scope:lib', 'scope:testkit'] },
          ],
        },
      ],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@tickwarden/*/*'],
              message: 'Import a project only through its public entry (src/index.ts).',
            },
          ],
        },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true, argsIgnorePattern: '^_' }],
      // A variable read by a callback before its one assignment (e.g. a reload handler) must stay `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    // Tool configs (not project code) share the workspace's vitest setup.
    files: ['**/vitest.config.ts'],
    rules: { '@nx/enforce-module-boundaries': 'off' },
  },
  {
    // Tests and benchmarks may use the test kit.
    files: ['**/*.test.ts', '**/test/**/*.ts', '**/bench/**/*.ts'],
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          banTransitiveDependencies: true,
          depConstraints: [
            { sourceTag: 'scope:app', onlyDependOnLibsWithTags: ['scope:lib', 'scope:testkit'] },
            { sourceTag: 'scope:lib', onlyDependOnLibsWithTags: ['scope:lib', 'scope:testkit'] },
            { sourceTag: 'scope:testkit', onlyDependOnLibsWithTags: ['scope:lib'] },
            { sourceTag: 'scope:tooling', onlyDependOnLibsWithTags: ['scope:lib', 'scope:testkit'] },
          ],
        },
      ],
    },
  },
];
