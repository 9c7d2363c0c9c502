import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// The workspace's dependency rules are lint rules: check that they really reject what they must.
const root = path.resolve(import.meta.dirname, '../../..');
const eslint = new ESLint({ cwd: root });

async function ruleIds(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return (result?.messages ?? []).filter((m) => m.severity === 2).map((m) => m.ruleId ?? m.message);
}

describe('module boundaries', () => {
  it('a lib may not import an app', async () => {
    expect(await ruleIds('libs/redlock/src/probe.ts', "import '@tickwarden/scheduler';\n")).toContain(
      '@nx/enforce-module-boundaries',
    );
  });

  it('lib source may not import the test kit; its tests may', async () => {
    expect(await ruleIds('libs/redlock/src/probe.ts', "import '@tickwarden/testkit';\n")).toContain(
      '@nx/enforce-module-boundaries',
    );
    expect(await ruleIds('libs/redlock/test/probe.test.ts', "import '@tickwarden/testkit';\n")).toEqual([]);
  });

  it('no deep import into another project', async () => {
    expect(await ruleIds('libs/testkit/src/probe.ts', "import '@tickwarden/redlock/src/keys.ts';\n")).toContain(
      'no-restricted-imports',
    );
    expect(await ruleIds('libs/testkit/src/probe.ts', "import '../../redlock/src/keys.ts';\n")).toContain(
      '@nx/enforce-module-boundaries',
    );
  });

  it('an app may use a lib through its public entry, but not the test kit outside its tests', async () => {
    expect(await ruleIds('apps/scheduler/src/probe.ts', "import '@tickwarden/redlock';\n")).toEqual([]);
    expect(await ruleIds('apps/scheduler/src/probe.ts', "import '@tickwarden/testkit';\n")).toContain(
      '@nx/enforce-module-boundaries',
    );
  });
});
