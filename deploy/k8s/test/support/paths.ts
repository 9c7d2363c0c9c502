import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** deploy/k8s */
export const K8S_DIR = fileURLToPath(new URL('../..', import.meta.url));
export const REPO_ROOT = path.resolve(K8S_DIR, '../..');
export const BASE_DIR = path.join(K8S_DIR, 'base');
export const COMPONENTS_DIR = path.join(K8S_DIR, 'components');
export const DOCKERFILE = path.join(REPO_ROOT, 'deploy/docker/Dockerfile');

/** Every overlay directory under deploy/k8s/overlays, by name: each must render and pass every check. */
export const OVERLAYS: readonly string[] = readdirSync(path.join(K8S_DIR, 'overlays'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name)
  .sort();

export const overlayDir = (name: string): string => path.join(K8S_DIR, 'overlays', name);
