import { parseLauncherEnv, parseSchedulerEnv, parseWorkerEnv, type EnvResult } from '@tickwarden/config';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { KubeObject } from './objects.ts';

type EnvParser = (env: Readonly<Record<string, string | undefined>>) => EnvResult<unknown>;

/** The app containers, by name, and the parser each runs on its environment at start (the launcher is the worker pod's second container). */
export const APP_ENV_PARSERS: Readonly<Record<string, EnvParser>> = {
  scheduler: parseSchedulerEnv,
  worker: parseWorkerEnv,
  launcher: parseLauncherEnv,
};

/**
 * The variables `parse` reads, found by running it on an environment that records every read:
 * the list comes from libs/config itself, so it cannot drift from what the apps read.
 */
export function variablesRead(parse: EnvParser): Set<string> {
  const read = new Set<string>();
  const recorder = new Proxy<Record<string, string | undefined>>(
    {},
    {
      get(_target, key) {
        if (typeof key === 'string') read.add(key);
        return undefined;
      },
    },
  );
  parse(recorder);
  return read;
}

/** Values the kubelet would take from Secrets and the downward API. */
export interface EnvSources {
  /** `secretName/key` -> value, for Secrets that are not rendered (created out of band). */
  externalSecrets: Readonly<Record<string, string>>;
  /** The value of `fieldRef: metadata.name`. */
  podName: string;
}

export interface ResolvedEnv {
  env: Record<string, string>;
  problems: string[];
  /** Names used only as `$(NAME)` in later values, each from a Secret (passwords for URLs). */
  secretHelpers: Set<string>;
}

const REFERENCE = /\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g;

/**
 * The container's environment as the kubelet builds it: in order, `$(NAME)` expanded only to
 * variables defined earlier (anything else stays literal, as in Kubernetes, and is reported),
 * `$$` to `$`, Secrets from the render (base64 data) or `externalSecrets`.
 */
export function resolveEnv(container: IContainer, objects: readonly KubeObject[], sources: EnvSources): ResolvedEnv {
  const env: Record<string, string> = {};
  const problems: string[] = [];
  const secretNames = new Set<string>();
  const referenced = new Set<string>();
  const where = `container ${container.name}`;
  if (container.envFrom?.length) problems.push(`${where}: envFrom hides which variables are set; list them under env`);
  for (const variable of container.env ?? []) {
    const name = variable.name;
    if (name in env) problems.push(`${where}: ${name} is set twice`);
    if ((variable.value === undefined) === (variable.valueFrom === undefined)) {
      problems.push(`${where}: ${name} needs exactly one of value and valueFrom`);
      continue;
    }
    if (variable.value !== undefined) {
      const expanded = expandReferences(variable.value, env);
      for (const ref of expanded.references) referenced.add(ref);
      for (const ref of expanded.unresolved)
        problems.push(
          `${where}: ${name} references $(${ref}), which is not defined before it: Kubernetes leaves it unexpanded`,
        );
      env[name] = expanded.value;
      continue;
    }
    const from = variable.valueFrom;
    if (from?.secretKeyRef) {
      secretNames.add(name);
      const value = secretValue(objects, from.secretKeyRef.name ?? '', from.secretKeyRef.key, sources);
      if (value === undefined)
        problems.push(
          `${where}: ${name} reads Secret ${from.secretKeyRef.name}/${from.secretKeyRef.key}, which is neither rendered nor a documented external Secret`,
        );
      else env[name] = value;
    } else if (from?.fieldRef?.fieldPath === 'metadata.name') env[name] = sources.podName;
    else problems.push(`${where}: ${name} has a valueFrom these checks do not resolve`);
  }
  const secretHelpers = new Set([...secretNames].filter((name) => referenced.has(name)));
  return { env, problems, secretHelpers };
}

/** Kubernetes' `$(NAME)` expansion (env values, command, args) against the variables defined so far. */
export function expandReferences(
  text: string,
  env: Readonly<Record<string, string>>,
): { value: string; references: string[]; unresolved: string[] } {
  const references: string[] = [];
  const unresolved: string[] = [];
  const value = text.replace(REFERENCE, (match, ref: string | undefined) => {
    if (ref === undefined) return '$';
    references.push(ref);
    const resolved = env[ref];
    if (resolved !== undefined) return resolved;
    unresolved.push(ref);
    return match;
  });
  return { value, references, unresolved };
}

function secretValue(
  objects: readonly KubeObject[],
  name: string,
  key: string,
  sources: EnvSources,
): string | undefined {
  const secret = objects.find((object) => object.kind === 'Secret' && object.metadata.name === name);
  if (!secret) return sources.externalSecrets[`${name}/${key}`];
  const data = (secret['data'] ?? {}) as Record<string, string>;
  const stringData = (secret['stringData'] ?? {}) as Record<string, string>;
  if (key in stringData) return stringData[key];
  const encoded = data[key];
  return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
}
