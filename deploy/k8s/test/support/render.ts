import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { KubeObject } from './objects.ts';

export interface RenderOptions {
  /** The kubectl binary; default `kubectl` on PATH. */
  kubectl?: string;
}

/** Runs kubectl; a missing binary is an error that says what to install. */
export function kubectl(
  args: readonly string[],
  { kubectl: binary = 'kubectl' }: RenderOptions = {},
  input?: string,
): string {
  const result = spawnSync(binary, args, { input, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 60_000 });
  if ((result.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') {
    throw new Error(
      `kubectl not found ("${binary}"): install kubectl >= 1.27 (kustomize is built in) to render deploy/k8s; no cluster is needed`,
    );
  }
  if (result.error) throw result.error;
  if (result.status !== 0)
    throw new Error(`kubectl ${args.join(' ')} exited with ${String(result.status)}: ${result.stderr.trim()}`);
  return result.stdout;
}

/** `kubectl kustomize DIR`, as objects. */
export function render(dir: string, options: RenderOptions = {}): KubeObject[] {
  const yaml = kubectl(['kustomize', dir], options);
  // kubectl turns the YAML into JSON without a cluster: an empty local merge patch prints every
  // object as is (the same decoding `kubectl apply` does, and no YAML library to depend on).
  const json = kubectl(['patch', '--local', '-f', '-', '--type', 'merge', '-p', '{}', '-o', 'json'], options, yaml);
  return parseJsonStream(json) as KubeObject[];
}

/** Renders a throwaway kustomization, as an overlay that adds `components` would: `resources` and `components` are directories. */
export function renderComposition(
  composition: { namespace?: string; resources: string[]; components?: string[] },
  options: RenderOptions = {},
): KubeObject[] {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-kustomize-'));
  try {
    const list = (key: string, dirs: string[] = []): string =>
      dirs.length === 0 ? '' : `${key}:\n${dirs.map((d) => `  - ${path.relative(dir, d)}\n`).join('')}`;
    writeFileSync(
      path.join(dir, 'kustomization.yaml'),
      `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n${composition.namespace ? `namespace: ${composition.namespace}\n` : ''}${list('resources', composition.resources)}${list('components', composition.components)}`,
    );
    return render(dir, options);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Splits concatenated JSON documents (kubectl prints one per object) and parses each. */
export function parseJsonStream(text: string): unknown[] {
  const documents: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (inString) {
      if (char === '\\') i++;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === '{' || char === '[') {
      if (depth++ === 0) start = i;
    } else if (char === '}' || char === ']') {
      if (--depth === 0) documents.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  if (depth !== 0) throw new Error('unterminated JSON document in kubectl output');
  return documents;
}
