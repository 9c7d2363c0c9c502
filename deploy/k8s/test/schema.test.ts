import { describe, expect, it } from 'vitest';
import { clone, id, workloads, type KubeObject } from './support/objects.ts';
import path from 'node:path';
import { COMPONENTS_DIR, OVERLAYS, overlayDir } from './support/paths.ts';
import { render, renderComposition } from './support/render.ts';
import { schemaProblems } from './support/schema.ts';

const prod = render(overlayDir('prod'));
function deployment(): KubeObject {
  const found = workloads(prod).find((workload) => workload.kind === 'Deployment');
  if (!found) throw new Error('no Deployment in the prod render');
  return clone(found.object);
}

describe('every rendered object validates against the Kubernetes schemas (kubernetes-models)', () => {
  it.each(OVERLAYS)('overlays/%s', (overlay) => {
    const objects = render(overlayDir(overlay));
    expect(objects.flatMap(schemaProblems)).toEqual([]);
  });

  it('prod with the service-monitor component (the ServiceMonitor against the Prometheus Operator schema)', () => {
    const objects = renderComposition({
      namespace: 'tickwarden',
      resources: [overlayDir('prod')],
      components: [path.join(COMPONENTS_DIR, 'service-monitor')],
    });
    expect(objects.some((object) => object.kind === 'ServiceMonitor')).toBe(true);
    expect(objects.flatMap(schemaProblems)).toEqual([]);
  });

  it('prod with the redis-tls component', () => {
    const objects = renderComposition({
      namespace: 'tickwarden',
      resources: [overlayDir('prod')],
      components: [path.join(COMPONENTS_DIR, 'redis-tls')],
    });
    expect(objects.flatMap(schemaProblems)).toEqual([]);
  });

  it('rejects a field the schema does not know, at any depth', () => {
    const object = deployment();
    const [container] = (object['spec'] as { template: { spec: { containers: Record<string, unknown>[] } } }).template
      .spec.containers;
    if (container) container['readinesProbe'] = { httpGet: { path: '/readyz', port: 8080 } };
    (object['spec'] as Record<string, unknown>)['replica'] = 3;
    expect(schemaProblems(object)).toEqual([
      `${id(object)}: unknown field /spec/replica`,
      `${id(object)}: unknown field /spec/template/spec/containers/0/readinesProbe`,
    ]);
  });

  it('rejects a wrong type and a missing required field', () => {
    const object = deployment();
    (object['spec'] as Record<string, unknown>)['replicas'] = 'three';
    expect(schemaProblems(object).join('\n')).toMatch(/replicas must be integer/);
    const noSelector = deployment();
    delete (noSelector['spec'] as Record<string, unknown>)['selector'];
    expect(schemaProblems(noSelector).join('\n')).toMatch(/spec must have required property selector/);
  });

  it('rejects a kind it has no schema for', () => {
    expect(schemaProblems({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })).toEqual([
      'Widget/w: no schema for apiVersion example.com/v1 kind Widget',
    ]);
  });
});
