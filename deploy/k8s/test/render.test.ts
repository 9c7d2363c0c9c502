import { describe, expect, it } from 'vitest';
import { id } from './support/objects.ts';
import { BASE_DIR, COMPONENTS_DIR, OVERLAYS, overlayDir } from './support/paths.ts';
import { parseJsonStream, render, renderComposition } from './support/render.ts';
import path from 'node:path';

describe('kubectl kustomize', () => {
  it('finds the overlays dev, prod and managed-redis', () => {
    expect(OVERLAYS).toEqual(expect.arrayContaining(['dev', 'managed-redis', 'prod']));
  });

  it.each(OVERLAYS)('renders overlays/%s with unique, namespaced objects', (overlay) => {
    const objects = render(overlayDir(overlay));
    expect(objects.length).toBeGreaterThan(5);
    const ids = objects.map((object) => `${id(object)} in ${object.metadata.namespace ?? ''}`);
    expect(new Set(ids).size).toBe(ids.length);
    const namespaces = new Set(
      objects.filter((object) => object.kind !== 'Namespace').map((object) => object.metadata.namespace),
    );
    expect(namespaces.size).toBe(1);
    expect(objects.find((object) => object.kind === 'Namespace')?.metadata.name).toBe([...namespaces][0]);
  });

  it('renders the service-monitor component on top of prod, replacing the scrape annotations', () => {
    const objects = renderComposition({
      namespace: 'tickwarden',
      resources: [overlayDir('prod')],
      components: [path.join(COMPONENTS_DIR, 'service-monitor')],
    });
    const monitor = objects.find((object) => object.kind === 'ServiceMonitor');
    expect(monitor?.metadata.namespace).toBe('tickwarden');
    const deployments = objects.filter((object) => object.kind === 'Deployment');
    for (const deployment of deployments) {
      const annotations =
        (deployment['spec'] as { template: { metadata: { annotations?: Record<string, string> } } }).template.metadata
          .annotations ?? {};
      expect(Object.keys(annotations).filter((key) => key.startsWith('prometheus.io/'))).toEqual([]);
    }
  });

  it('fails with an install hint when kubectl is missing', () => {
    expect(() => render(BASE_DIR, { kubectl: '/nonexistent/kubectl' })).toThrow(/kubectl not found .*install kubectl/);
  });

  it("fails with kubectl's error for a broken kustomization", () => {
    expect(() => renderComposition({ resources: [path.join(BASE_DIR, 'no-such-dir')] })).toThrow(
      /kubectl kustomize .* exited with 1/,
    );
  });

  it("splits kubectl's concatenated JSON documents, braces inside strings included", () => {
    expect(parseJsonStream('{"a":"}{"}\n{"b":[1,{"c":"\\"}"}]}\n')).toEqual([{ a: '}{' }, { b: [1, { c: '"}' }] }]);
  });
});
