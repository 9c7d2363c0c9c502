import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCommand } from './support/commands.ts';
import type { KubeObject } from './support/objects.ts';
import { COMPONENTS_DIR, K8S_DIR, overlayDir, REPO_ROOT } from './support/paths.ts';
import { renderComposition } from './support/render.ts';
import { schemaProblems } from './support/schema.ts';

/** The promtool binary: `PROMTOOL`, or `promtool` on PATH (Debian's `prometheus` package; `.ci/run` installs it). */
const PROMTOOL = process.env['PROMTOOL'] ?? 'promtool';
const FIXTURE = path.join(K8S_DIR, 'test/alerts/tickwarden.promtool.yaml');

/** The metric sources: every `tickwarden_*` series an alert may read is declared in one of them. */
const METRIC_SOURCES = [
  'apps/scheduler/src/metrics.ts',
  'apps/worker/src/metrics.ts',
  'libs/runtime/src/process-metrics.ts',
];

interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleGroup {
  name: string;
  rules: Rule[];
}

/**
 * The series names the apps export: `name` and, for a histogram, its `_bucket`, `_sum` and
 * `_count`; prom-client metrics, and the families the scheduler writes itself (`name`, then `type`).
 */
function exportedSeries(): Set<string> {
  const names = new Set<string>();
  for (const file of METRIC_SOURCES) {
    const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
    for (const [, kind, name] of text.matchAll(/new (Counter|Gauge|Histogram)\(\{\s*name: '(tickwarden_\w+)'/g)) {
      if (name === undefined) continue;
      names.add(name);
      if (kind === 'Histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    }
    for (const [, name] of text.matchAll(/name: '(tickwarden_\w+)',\s*type: '(?:counter|gauge)'/g))
      if (name !== undefined) names.add(name);
  }
  return names;
}

/** Metric names in PromQL text (label values and strings left out). */
const namesIn = (text: string): string[] =>
  [...text.replace(/"[^"]*"/g, '""').matchAll(/\b(?:tickwarden|kube)[a-z_:]*/g)].map(([name]) => name);

const rendered: KubeObject[] = renderComposition({
  namespace: 'tickwarden',
  resources: [overlayDir('prod')],
  components: [path.join(COMPONENTS_DIR, 'prometheus-rules')],
});
const ruleObject = rendered.find((object) => object.kind === 'PrometheusRule');
const groups: RuleGroup[] = (ruleObject?.['spec'] as { groups: RuleGroup[] } | undefined)?.groups ?? [];
const rules = groups.flatMap((group) => group.rules);
const alerts = rules.flatMap((rule) => (rule.alert === undefined ? [] : [rule.alert]));
const recorded = new Set(rules.flatMap((rule) => (rule.record === undefined ? [] : [rule.record])));

describe('components/prometheus-rules', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tickwarden-promtool-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('renders on top of prod as one PrometheusRule in the namespace, valid against the Prometheus Operator schema', () => {
    expect(ruleObject?.metadata.namespace).toBe('tickwarden');
    expect(rendered.filter((object) => object.kind === 'PrometheusRule')).toHaveLength(1);
    expect(rendered.flatMap(schemaProblems)).toEqual([]);
    expect(alerts).toEqual(
      expect.arrayContaining([
        'TickwardenScheduleNoSuccess',
        'TickwardenScheduleRunsFailing',
        'TickwardenScheduleTicksMissed',
        'TickwardenWatchdogAborted',
        'TickwardenLockQuorumLost',
        'TickwardenConfigReloadRejected',
        'TickwardenWorkerSaturated',
        'TickwardenQueueRedisDataLost',
      ]),
    );
    for (const rule of rules.filter((candidate) => candidate.alert !== undefined))
      expect([rule.alert, rule.labels?.['severity']]).toEqual([
        rule.alert,
        expect.stringMatching(/^(warning|critical)$/),
      ]);
  });

  it('reads only series the apps export (names from their metrics.ts), the rule it records, and kube-state-metrics', () => {
    const exported = exportedSeries();
    expect(exported.size).toBeGreaterThan(20);
    const unknown = rules
      .flatMap((rule) => namesIn(rule.expr))
      .filter((name) => !exported.has(name) && !recorded.has(name) && !name.startsWith('kube_'));
    expect(unknown).toEqual([]);
    // the fixture's recorded series too: a renamed metric cannot leave a test passing on a name nobody exports
    const fixtureSeries = [...readFileSync(FIXTURE, 'utf8').matchAll(/series: '([a-z_:]+)\{/g)].map(
      ([, name]) => name ?? '',
    );
    expect(fixtureSeries.filter((name) => !exported.has(name) && !name.startsWith('kube_'))).toEqual([]);
  });

  it('every alert is tested both firing and silent in the promtool fixture', () => {
    const cases = readFileSync(FIXTURE, 'utf8')
      .split(/\n\s*- eval_time: /)
      .slice(1)
      .map((block) => ({ alert: /alertname: (\w+)/.exec(block)?.[1], silent: /exp_alerts: \[\]/.test(block) }));
    for (const alert of alerts) {
      expect([alert, cases.some((c) => c.alert === alert && !c.silent)]).toEqual([alert, true]);
      expect([alert, cases.some((c) => c.alert === alert && c.silent)]).toEqual([alert, true]);
    }
  });

  it('promtool: the rules check, and the alerts fire (and stay silent) on the recorded series as the fixture expects', async () => {
    // JSON is YAML: the rendered groups as a rules file, beside a copy of the fixture that names it.
    writeFileSync(path.join(dir, 'rules.json'), JSON.stringify({ groups }, null, 2));
    copyFileSync(FIXTURE, path.join(dir, 'tickwarden.promtool.yaml'));
    const check = await runCommand(PROMTOOL, ['check', 'rules', path.join(dir, 'rules.json')], { timeoutMs: 60_000 });
    if (check.code === null && /ENOENT/.test(check.stderr)) {
      throw new Error(
        `promtool not found ("${PROMTOOL}"): install Debian's prometheus package (apt-get install --no-install-recommends prometheus), or set PROMTOOL to a promtool binary`,
      );
    }
    expect(check.code, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toContain(`SUCCESS: ${rules.length} rules found`);
    const test = await runCommand(PROMTOOL, ['test', 'rules', path.join(dir, 'tickwarden.promtool.yaml')], {
      timeoutMs: 60_000,
    });
    expect(test.code, test.stdout + test.stderr).toBe(0);
    expect(test.stdout).toContain('SUCCESS');
  });

  it('the README lists every alert and every metric the apps export', () => {
    const readme = readFileSync(path.join(K8S_DIR, 'README.md'), 'utf8');
    expect(alerts.filter((alert) => !readme.includes(alert))).toEqual([]);
    const metrics = [...exportedSeries()].filter((name) => !/_(bucket|sum|count)$/.test(name));
    expect(metrics.filter((name) => !readme.includes(name))).toEqual([]);
  });
});
