import { PrometheusRule, ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Namespace, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { id, type KubeObject } from './objects.ts';

interface ModelClass {
  readonly apiVersion: string;
  readonly kind: string;
  new (data: never): { validate(): void };
}

/** The kinds the manifests may use, with their schemas. A new kind is added here on purpose. */
const MODELS: ReadonlyMap<string, ModelClass> = new Map(
  [
    Namespace,
    ServiceAccount,
    ConfigMap,
    Secret,
    Service,
    Deployment,
    StatefulSet,
    PodDisruptionBudget,
    HorizontalPodAutoscaler,
    NetworkPolicy,
    ServiceMonitor,
    PrometheusRule,
  ].map((model: ModelClass) => [`${model.apiVersion} ${model.kind}`, model]),
);

/**
 * Everything wrong with `object` against the Kubernetes schema: no schema for its kind, schema
 * errors (types, required fields, formats), and fields the schema does not know (see
 * `unknownFields`), each naming the object and the JSON path.
 */
export function schemaProblems(object: KubeObject): string[] {
  const model = MODELS.get(`${object.apiVersion} ${object.kind}`);
  if (!model) return [`${id(object)}: no schema for apiVersion ${object.apiVersion} kind ${object.kind}`];
  const instance = new model(withUnwrappedData(object) as never);
  try {
    instance.validate();
  } catch (error) {
    return [`${id(object)}: ${(error as Error).message}`];
  }
  return unknownFields(instance).map((field) => `${id(object)}: unknown field ${field}`);
}

/**
 * A Secret's data as the API server decodes it: kustomize wraps the base64 of a long file at 70
 * columns, and Go's base64 decoder ignores line breaks, while the schema's "byte" format does not.
 */
function withUnwrappedData(object: KubeObject): KubeObject {
  const data = object.kind === 'Secret' ? (object['data'] as Record<string, string> | undefined) : undefined;
  if (!data) return object;
  return {
    ...object,
    data: Object.fromEntries(Object.entries(data).map(([key, value]) => [key, value.replace(/\n/g, '')])),
  };
}

/**
 * The JSON paths of fields the schema never looked at. The Kubernetes OpenAPI schemas allow
 * additional properties (the API server prunes or rejects them later), so a typo such as
 * `readinesProbe` would validate. The compiled validator reads every property its schema
 * declares (and every key of a map), so validating through a proxy that records reads leaves
 * exactly the unknown fields unread.
 */
export function unknownFields(instance: { validate(): void }): string[] {
  const reads = new Map<object, Set<string>>();
  const tracked = track(instance, reads);
  instance.validate.call(tracked);
  return unread(instance, reads, '').sort();
}

function track(value: unknown, reads: Map<object, Set<string>>): unknown {
  if (value === null || typeof value !== 'object') return value;
  let keys = reads.get(value);
  if (!keys) reads.set(value, (keys = new Set()));
  const seen = keys;
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === 'string') seen.add(key);
      return track(Reflect.get(target, key, receiver), reads);
    },
  });
}

function unread(value: unknown, reads: Map<object, Set<string>>, path: string): string[] {
  if (value === null || typeof value !== 'object') return [];
  if (Array.isArray(value)) return value.flatMap((item, index) => unread(item, reads, `${path}/${index}`));
  const seen = reads.get(value) ?? new Set<string>();
  return Object.entries(value).flatMap(([key, child]) =>
    seen.has(key) ? unread(child, reads, `${path}/${key}`) : [`${path}/${key}`],
  );
}
