import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';

/** A rendered Kubernetes object: typed access after the schema check (schema.ts) passed. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

/** A Deployment's or StatefulSet's pod template, with what the checks need. */
export interface Workload {
  kind: 'Deployment' | 'StatefulSet';
  name: string;
  /** `undefined`: the field is absent (an HPA owns it, or the API default of 1 applies). */
  replicas: number | undefined;
  selector: LabelSelector;
  podLabels: Record<string, string>;
  podAnnotations: Record<string, string>;
  pod: IPodSpec;
  object: KubeObject;
}

interface WorkloadSpec {
  replicas?: number;
  selector: LabelSelector;
  template: { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> }; spec: IPodSpec };
}

export const id = (object: KubeObject): string => `${object.kind}/${object.metadata.name}`;

export function workloads(objects: readonly KubeObject[]): Workload[] {
  return objects.flatMap((object) => {
    if (object.kind !== 'Deployment' && object.kind !== 'StatefulSet') return [];
    const spec = object['spec'] as WorkloadSpec;
    return [
      {
        kind: object.kind,
        name: object.metadata.name,
        replicas: spec.replicas,
        selector: spec.selector,
        podLabels: spec.template.metadata?.labels ?? {},
        podAnnotations: spec.template.metadata?.annotations ?? {},
        pod: spec.template.spec,
        object,
      },
    ];
  });
}

/** The workload of an app component (`scheduler`, `worker`, `lock-node`, `queue`), by its pod label. */
export function component(objects: readonly KubeObject[], name: string): Workload[] {
  return workloads(objects).filter((workload) => workload.podLabels['app.kubernetes.io/component'] === name);
}

/**
 * A workload's own container (init containers aside): its only one, or the one named after its
 * component among several (the worker pod also runs the launcher).
 */
export function mainContainer(workload: Workload): IContainer {
  const { containers } = workload.pod;
  const named =
    containers.length === 1
      ? containers
      : containers.filter((container) => container.name === workload.podLabels['app.kubernetes.io/component']);
  const [container, ...others] = named;
  if (!container || others.length > 0)
    throw new Error(
      `${workload.kind}/${workload.name}: expected exactly one container, or one named after its component`,
    );
  return container;
}

/** A workload's (non-init) container of that name. */
export const containerNamed = (workload: Workload, name: string): IContainer | undefined =>
  workload.pod.containers.find((container) => container.name === name);

/** Label selector semantics of the API server (matchLabels AND every matchExpression). */
export function selects(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  const byExpressions = (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
    const value = labels[key];
    if (operator === 'In') return value !== undefined && values.includes(value);
    if (operator === 'NotIn') return value === undefined || !values.includes(value);
    if (operator === 'Exists') return value !== undefined;
    if (operator === 'DoesNotExist') return value === undefined;
    throw new Error(`unknown label selector operator ${operator}`);
  });
  return byLabels && byExpressions;
}

/** `--flag value` pairs of a command line (the last one wins, as redis-server reads them). */
export function flagValues(args: readonly string[]): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg.startsWith('--')) flags.set(arg.slice(2), args[i + 1] ?? '');
  }
  return flags;
}

/** A deep copy to mutate in a negative test. */
export const clone = <T>(value: T): T => structuredClone(value);
