import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { validateConfigText } from '@tickwarden/config';
import { PROCESS_NODE_FLAGS } from '@tickwarden/runtime';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar';
import { describe, expect, it } from 'vitest';
import {
  clone,
  component,
  containerNamed,
  mainContainer,
  workloads,
  type KubeObject,
  type Workload,
} from './support/objects.ts';
import { BASE_DIR, DOCKERFILE, OVERLAYS, overlayDir } from './support/paths.ts';
import * as policies from './support/policies.ts';
import { render } from './support/render.ts';

const rendered = new Map(OVERLAYS.map((overlay) => [overlay, render(overlayDir(overlay))]));
const prod = rendered.get('prod') ?? [];
const base = render(BASE_DIR);

describe.each(OVERLAYS)('overlays/%s', (overlay) => {
  it.each(Object.keys(policies.POLICIES))('satisfies %s', (name) => {
    expect(policies.POLICIES[name]?.(rendered.get(overlay) ?? [])).toEqual([]);
  });
});

describe('base', () => {
  // The overlays pin the image (images:); the base names it without a tag on purpose.
  it.each(Object.keys(policies.POLICIES).filter((name) => name !== 'pinnedImages'))('satisfies %s', (name) => {
    expect(policies.POLICIES[name]?.(base)).toEqual([]);
  });

  it('leaves only the tickwarden image to pin', () => {
    expect(policies.pinnedImages(base)).toEqual([
      'Deployment/tickwarden-scheduler container scheduler: image "tickwarden" is not pinned to a tag',
      'Deployment/tickwarden-worker container worker: image "tickwarden" is not pinned to a tag',
      'Deployment/tickwarden-worker container launcher: image "tickwarden" is not pinned to a tag',
    ]);
  });
});

/** The prod render with one change: what a negative test feeds to a policy. */
function mutated(change: (objects: KubeObject[]) => void): KubeObject[] {
  const objects = clone(prod);
  change(objects);
  return objects;
}

function only(objects: readonly KubeObject[], componentName: string): Workload {
  const [workload] = component(objects, componentName);
  if (!workload) throw new Error(`no ${componentName} in the render`);
  return workload;
}

const container = (objects: readonly KubeObject[], componentName: string): IContainer =>
  mainContainer(only(objects, componentName));
const launcher = (objects: readonly KubeObject[]): IContainer => {
  const found = containerNamed(only(objects, 'worker'), policies.LAUNCHER);
  if (!found) throw new Error('no launcher container in the render');
  return found;
};
const envOf = (objects: readonly KubeObject[], componentName: string): IEnvVar[] =>
  (container(objects, componentName).env ??= []);
const setEnv = (objects: readonly KubeObject[], componentName: string, name: string, value: string): void => {
  const variable = envOf(objects, componentName).find((candidate) => candidate.name === name);
  if (variable) variable.value = value;
  else envOf(objects, componentName).push({ name, value });
};

describe('each policy catches what it is for (fed a mutated prod render)', () => {
  it('probes: a container without a readiness probe', () => {
    const objects = mutated((o) => delete container(o, 'lock-node').readinessProbe);
    expect(policies.probes(objects)).toEqual(['StatefulSet/tickwarden-lock container redis: no readinessProbe']);
  });

  it('resources: a container without a memory limit', () => {
    const objects = mutated((o) => delete container(o, 'worker').resources?.limits?.['memory']);
    expect(policies.resources(objects)).toEqual(['Deployment/tickwarden-worker container worker: no memory limit']);
  });

  it('securityContext: a writable root filesystem and an added capability', () => {
    const objects = mutated((o) => {
      const context = (container(o, 'scheduler').securityContext ??= {});
      context.readOnlyRootFilesystem = false;
      context.capabilities = { drop: ['ALL'], add: ['NET_ADMIN'] };
    });
    expect(policies.securityContext(objects)).toEqual([
      'Deployment/tickwarden-scheduler container scheduler: readOnlyRootFilesystem is not true',
      'Deployment/tickwarden-scheduler container scheduler: adds capabilities',
    ]);
  });

  it('securityContext: root allowed when neither pod nor container says runAsNonRoot', () => {
    const objects = mutated((o) => {
      delete container(o, 'queue').securityContext?.runAsNonRoot;
      delete only(o, 'queue').pod.securityContext?.runAsNonRoot;
    });
    expect(policies.securityContext(objects)).toEqual([
      'StatefulSet/tickwarden-queue-redis container redis: runAsNonRoot is not true',
    ]);
  });

  it('pinnedImages: an image on latest', () => {
    const objects = mutated((o) => (container(o, 'queue').image = 'redis:latest'));
    expect(policies.pinnedImages(objects)).toEqual([
      'StatefulSet/tickwarden-queue-redis container redis: image "redis:latest" is not pinned to a tag',
    ]);
  });

  it('podHygiene: service links left on, and a worker pod without a reaper', () => {
    const objects = mutated((o) => {
      only(o, 'worker').pod.enableServiceLinks = true;
      delete only(o, 'worker').pod.shareProcessNamespace;
    });
    expect(policies.podHygiene(objects)).toEqual([
      'Deployment/tickwarden-worker: enableServiceLinks is not false',
      "Deployment/tickwarden-worker: shareProcessNamespace is not true (node would be PID 1 and leave job programs' leftovers unreaped)",
    ]);
  });

  it('appEnvironment: a variable the app does not read (the scheduler-only replica id on the worker)', () => {
    const objects = mutated((o) => setEnv(o, 'worker', 'TICKWARDEN_REPLICA_ID', 'w-1'));
    expect(policies.appEnvironment(objects)).toEqual([
      expect.stringMatching(
        /^worker: sets TICKWARDEN_REPLICA_ID, which the worker does not read \(it reads .*TICKWARDEN_SHUTDOWN_GRACE/,
      ),
    ]);
  });

  it('appEnvironment: a password variable defined after the URL that references it stays unexpanded', () => {
    const objects = mutated((o) => {
      const env = envOf(o, 'scheduler');
      const index = env.findIndex((variable) => variable.name === 'LOCK_REDIS_PASSWORD_0');
      const [password] = env.splice(index, 1);
      if (password) env.push(password);
    });
    const problems = policies.appEnvironment(objects);
    expect(problems[0]).toBe(
      'container scheduler: TICKWARDEN_LOCK_NODES references $(LOCK_REDIS_PASSWORD_0), which is not defined before it: Kubernetes leaves it unexpanded',
    );
  });

  it('appEnvironment: a value the app rejects, reported by its own parser', () => {
    const objects = mutated((o) => setEnv(o, 'worker', 'TICKWARDEN_WORKER_CONCURRENCY', '0'));
    expect(policies.appEnvironment(objects)).toEqual([
      'worker: TICKWARDEN_WORKER_CONCURRENCY: expected an integer of at least 1, got "0"',
    ]);
  });

  it('appEnvironment: a Secret that is neither rendered nor documented', () => {
    const objects = mutated((o) => {
      const variable = envOf(o, 'scheduler').find((candidate) => candidate.name === 'QUEUE_REDIS_PASSWORD');
      if (variable?.valueFrom?.secretKeyRef) variable.valueFrom.secretKeyRef.name = 'tickwarden-queue';
    });
    expect(policies.appEnvironment(objects)[0]).toBe(
      'container scheduler: QUEUE_REDIS_PASSWORD reads Secret tickwarden-queue/scheduler-queue-password, which is neither rendered nor a documented external Secret',
    );
  });

  it('appEnvironment: the launcher given a variable it does not read, and a socket path it rejects', () => {
    const objects = mutated((o) => {
      (launcher(o).env ??= []).push({ name: 'TICKWARDEN_CONFIG', value: '/etc/tickwarden/schedules' });
      const socket = launcher(o).env?.find((variable) => variable.name === 'TICKWARDEN_LAUNCHER_SOCKET');
      if (socket) socket.value = 'launcher.sock';
    });
    expect(policies.appEnvironment(objects)).toEqual([
      'launcher: sets TICKWARDEN_CONFIG, which the launcher does not read (it reads LOG_LEVEL, TICKWARDEN_LAUNCHER_SOCKET)',
      'launcher: TICKWARDEN_LAUNCHER_SOCKET: expected an absolute path of at most 107 bytes, got "launcher.sock"',
    ]);
  });

  it('appEnvironment: a Redis password on the launcher is a variable it does not read, even as a $(NAME) helper', () => {
    const objects = mutated((o) => {
      const env = (launcher(o).env ??= []);
      env.push({
        name: 'QUEUE_REDIS_PASSWORD',
        valueFrom: { secretKeyRef: { name: 'tickwarden-redis', key: 'worker-queue-password' } },
      });
      env.push({
        name: 'QUEUE_URL',
        value: 'redis://tickwarden-worker:$(QUEUE_REDIS_PASSWORD)@tickwarden-queue-redis:6379',
      });
    });
    expect(policies.appEnvironment(objects)).toEqual([
      expect.stringMatching(/^launcher: sets QUEUE_REDIS_PASSWORD, which the launcher does not read/),
      expect.stringMatching(/^launcher: sets QUEUE_URL, which the launcher does not read/),
    ]);
  });

  it('appProbes: the app listening on another port than its probes', () => {
    const objects = mutated((o) => setEnv(o, 'scheduler', 'TICKWARDEN_HTTP_PORT', '9090'));
    expect(policies.appProbes(objects)).toEqual([
      'scheduler: livenessProbe port 8080 is not TICKWARDEN_HTTP_PORT 9090',
      'scheduler: readinessProbe port 8080 is not TICKWARDEN_HTTP_PORT 9090',
      'scheduler: no prometheus.io/scrape annotations for port 9090 (and no ServiceMonitor)',
    ]);
  });

  it('appProbes: a launcher probed over HTTP, or by another command than its --check', () => {
    const objects = mutated((o) => {
      launcher(o).readinessProbe = { httpGet: { path: '/readyz', port: 8081 } };
      const liveness = launcher(o).livenessProbe;
      if (liveness?.exec) liveness.exec.command = ['node', 'apps/worker/dist/launcher-main.js'];
    });
    expect(policies.appProbes(objects)).toEqual([
      'launcher: livenessProbe is not an exec of node apps/worker/dist/launcher-main.js --check',
      'launcher: readinessProbe is not an exec of node apps/worker/dist/launcher-main.js --check',
    ]);
  });

  it('schedulerAvailability: one replica, and no PodDisruptionBudget', () => {
    const oneReplica = mutated((o) => ((only(o, 'scheduler').object['spec'] as { replicas: number }).replicas = 1));
    expect(policies.schedulerAvailability(oneReplica)[0]).toBe(
      'scheduler: 1 replica(s); at least 2, so a tick never depends on one pod',
    );
    const noBudget = prod.filter(
      (object) => !(object.kind === 'PodDisruptionBudget' && object.metadata.name === 'tickwarden-scheduler'),
    );
    expect(policies.schedulerAvailability(noBudget)).toEqual(['scheduler: no PodDisruptionBudget selects its pods']);
  });

  it('lockNodes: an even count, no anti-affinity, AOF without fsync always', () => {
    const objects = mutated((o) => {
      const lock = only(o, 'lock-node');
      (lock.object['spec'] as { replicas: number }).replicas = 4;
      delete lock.pod.affinity;
      const args = container(o, 'lock-node').args ?? [];
      args[args.indexOf('--appendfsync') + 1] = 'everysec';
    });
    expect(policies.lockNodes(objects)).toEqual([
      'lock nodes: 4; an odd count of at least 3 (a majority survives the most failures per node)',
      'StatefulSet/tickwarden-lock: no required pod anti-affinity on kubernetes.io/hostname against its own pods',
      'StatefulSet/tickwarden-lock: not --appendonly yes --appendfsync always',
      expect.stringMatching(
        /^scheduler: TICKWARDEN_LOCK_NODES names .*; the lock nodes are tickwarden-lock-0.tickwarden-lock, .*tickwarden-lock-3.tickwarden-lock$/,
      ),
      expect.stringMatching(/^worker: TICKWARDEN_LOCK_NODES names/),
    ]);
  });

  it('lockNodes: seven lock nodes while the apps still name five', () => {
    const objects = mutated((o) => ((only(o, 'lock-node').object['spec'] as { replicas: number }).replicas = 7));
    expect(policies.lockNodes(objects)).toHaveLength(2);
  });

  it('lockNodes: no lock nodes in the render while the apps still point at in-cluster ones', () => {
    const objects = prod.filter((object) => object.metadata.name !== 'tickwarden-lock');
    expect(policies.lockNodes(objects)).toEqual([
      'scheduler: no lock nodes are rendered, yet TICKWARDEN_LOCK_NODES is not read from a Secret',
      'worker: no lock nodes are rendered, yet TICKWARDEN_LOCK_NODES is not read from a Secret',
    ]);
  });

  it('lockNodes: a zone spread that is only a preference, or lets one zone hold a majority', () => {
    const zoneSpread = (o: KubeObject[]) => {
      const [constraint] = only(o, 'lock-node').pod.topologySpreadConstraints ?? [];
      if (!constraint) throw new Error('no topologySpreadConstraint on the lock nodes');
      return constraint;
    };
    const preferred = mutated((o) => {
      zoneSpread(o).whenUnsatisfiable = 'ScheduleAnyway';
      delete zoneSpread(o).minDomains;
    });
    expect(policies.lockNodes(preferred)).toEqual([
      'StatefulSet/tickwarden-lock: the zone spread is a preference (ScheduleAnyway): a zone may end up with a majority; require it (DoNotSchedule with minDomains) or accept that with the annotation tickwarden.io/lock-zone-spread: preferred',
    ]);
    // The overlay for a cluster with fewer zones says it accepts that (README, "Lock nodes and zones").
    const accepted = clone(preferred);
    only(accepted, 'lock-node').object.metadata.annotations = { [policies.ZONE_SPREAD_ANNOTATION]: 'preferred' };
    expect(policies.lockNodes(accepted)).toEqual([]);
    const twoZones = mutated((o) => (zoneSpread(o).minDomains = 2));
    expect(policies.lockNodes(twoZones)).toEqual([
      'StatefulSet/tickwarden-lock: maxSkew 1 over minDomains 2 lets one zone hold 3 of 5 lock nodes, a majority (3): losing that zone loses the quorum',
    ]);
    const none = mutated((o) => delete only(o, 'lock-node').pod.topologySpreadConstraints);
    expect(policies.lockNodes(none)).toEqual([
      'StatefulSet/tickwarden-lock: no topologySpreadConstraint on topology.kubernetes.io/zone against its own pods',
    ]);
    // 5 nodes: 3 zones at skew 1 hold 2/2/1; skew 2 over 3 zones allows 3/1/1.
    expect([
      policies.mostPerZone(5, 1, 3),
      policies.mostPerZone(5, 1, 2),
      policies.mostPerZone(5, 2, 3),
      policies.mostPerZone(5, 1, 5),
      policies.mostPerZone(3, 1, 3),
    ]).toEqual([2, 3, 3, 1, 1]);
  });

  it('lockRestartDelay: no init container holding an emptied node back', () => {
    const objects = mutated((o) => delete only(o, 'lock-node').pod.initContainers);
    expect(policies.lockRestartDelay(objects)).toEqual([
      'StatefulSet/tickwarden-lock: no init container with RESTART_DELAY_SECONDS: a node that lost its data would vote at once, forgetting the leases it granted',
    ]);
  });

  it('lockRestartDelay: a delay not above the longest leaseTtl plus the late-tick window, another image, another directory', () => {
    const objects = mutated((o) => {
      const [init] = only(o, 'lock-node').pod.initContainers ?? [];
      if (!init) throw new Error('no init container on the lock nodes');
      const delay = init.env?.find((variable) => variable.name === policies.RESTART_DELAY_VARIABLE);
      // the longest leaseTtl of the example schedules (45 s) + the late-tick window (10 s)
      if (delay) delay.value = '55';
      init.image = 'busybox:1.36';
      init.command = [...(init.command ?? []).slice(0, -1), '/var/lib/redis'];
      delete init.volumeMounts;
    });
    expect(policies.lockRestartDelay(objects)).toEqual([
      'StatefulSet/tickwarden-lock container restart-delay: RESTART_DELAY_SECONDS "55" must be whole seconds above the longest leaseTtl (45 s) plus the late-tick window (10 s)',
      "StatefulSet/tickwarden-lock container restart-delay: image busybox:1.36 is not the Redis container's redis:7.4",
      'StatefulSet/tickwarden-lock container restart-delay: its last argument "/var/lib/redis" is not the data directory /data (the Redis container\'s --dir)',
      "StatefulSet/tickwarden-lock container restart-delay: does not mount the Redis container's data volume at /data",
    ]);
  });

  it('lockRestartDelay: a team raising its leaseTtl past the delay', () => {
    const objects = mutated((o) => {
      const data = o.find((object) => object.metadata.name === 'tickwarden-schedules-payments')?.['data'] as Record<
        string,
        string
      >;
      data['payments.yaml'] = (data['payments.yaml'] ?? '').replace('leaseTtl: 45s', 'leaseTtl: 2m');
    });
    expect(policies.lockRestartDelay(objects)).toEqual([
      'StatefulSet/tickwarden-lock container restart-delay: RESTART_DELAY_SECONDS "120" must be whole seconds above the longest leaseTtl (120 s) plus the late-tick window (10 s)',
    ]);
  });

  it('queueRedis: an evicting queue Redis', () => {
    const objects = mutated((o) => {
      const args = container(o, 'queue').args ?? [];
      args[args.indexOf('--maxmemory-policy') + 1] = 'allkeys-lru';
    });
    expect(policies.queueRedis(objects)).toEqual([
      'StatefulSet/tickwarden-queue-redis: not --maxmemory-policy noeviction (BullMQ requires it)',
    ]);
  });

  it("queueRedis: Burstable QoS, and a memory limit without room for the AOF rewrite's fork", () => {
    const objects = mutated((o) => {
      const resources = container(o, 'queue').resources;
      if (resources?.requests) resources.requests['memory'] = '512Mi';
      if (resources?.requests) resources.requests['cpu'] = '250m';
      // under 80 % of 3 Gi (redisMemory holds), above half of it
      const args = container(o, 'queue').args ?? [];
      args[args.indexOf('--maxmemory') + 1] = '2gb';
    });
    expect(policies.queueRedis(objects)).toEqual([
      'StatefulSet/tickwarden-queue-redis container redis: cpu request 250m is not its limit 1 (Guaranteed QoS)',
      'StatefulSet/tickwarden-queue-redis container redis: memory request 512Mi is not its limit 3Gi (Guaranteed QoS)',
      'StatefulSet/tickwarden-queue-redis: the memory limit must be at least 2 x --maxmemory (an AOF rewrite forks; its copy-on-write pages come on top of the data)',
    ]);
    expect(policies.redisMemory(objects)).toEqual([]);
    expect([
      policies.cpuCores('250m'),
      policies.cpuCores('1'),
      policies.cpuCores('1.5'),
      policies.cpuCores('1Gi'),
    ]).toEqual([0.25, 1, 1.5, Number.NaN]);
  });

  it('queueRedis: no PodDisruptionBudget, or one that lets a drain evict it', () => {
    const budget = (o: KubeObject[]) =>
      o.find(
        (object) => object.kind === 'PodDisruptionBudget' && object.metadata.name === 'tickwarden-queue-redis',
      ) as KubeObject;
    const none = prod.filter((object) => object !== budget(prod));
    expect(policies.queueRedis(none)).toEqual([
      'StatefulSet/tickwarden-queue-redis: no PodDisruptionBudget selects its pods (a drain would evict the only queue Redis)',
    ]);
    const evictable = mutated((o) => ((budget(o)['spec'] as { maxUnavailable: number }).maxUnavailable = 1));
    expect(policies.queueRedis(evictable)).toEqual([
      'StatefulSet/tickwarden-queue-redis: its PodDisruptionBudget allows an eviction ({"maxUnavailable":1}); maxUnavailable 0 or minAvailable 1',
    ]);
  });

  it('redisMemory: a data cap above the memory limit (OOM kill before noeviction)', () => {
    const objects = mutated((o) => {
      const args = container(o, 'lock-node').args ?? [];
      args[args.indexOf('--maxmemory') + 1] = '2gb';
    });
    expect(policies.redisMemory(objects)).toEqual([
      'StatefulSet/tickwarden-lock: --maxmemory must be set and at most 80% of the memory limit',
    ]);
    expect([policies.byteSize('768mb'), policies.byteSize('1Gi'), policies.byteSize('10x')]).toEqual([
      768e6,
      2 ** 30,
      Number.NaN,
    ]);
  });

  it('appNetworkPolicy: an open ingress or egress rule, and apps no policy denies by default', () => {
    const apps = (objects: KubeObject[]) =>
      objects.find(
        (object) => object.kind === 'NetworkPolicy' && object.metadata.name === 'tickwarden-apps',
      ) as KubeObject;
    const open = mutated((o) => {
      const spec = apps(o)['spec'] as { ingress: { from?: unknown[] }[]; egress: { ports?: unknown[] }[] };
      delete spec.ingress[0]?.from;
      delete spec.egress[1]?.ports;
    });
    expect(policies.appNetworkPolicy(open)).toEqual([
      "NetworkPolicy/tickwarden-apps ingress rule 0: admits more than the metrics scraper's namespace on named ports",
      'NetworkPolicy/tickwarden-apps egress rule 1: admits every destination or every port',
      "NetworkPolicy/tickwarden-apps ingress rule 0: admits more than the metrics scraper's namespace on named ports",
      'NetworkPolicy/tickwarden-apps egress rule 1: admits every destination or every port',
    ]);
    const none = prod.filter(
      (object) => !(object.kind === 'NetworkPolicy' && object.metadata.name.startsWith('tickwarden-apps')),
    );
    expect(policies.appNetworkPolicy(none)).toEqual([
      'Deployment/tickwarden-scheduler: no ingress NetworkPolicy selects its pods',
      'Deployment/tickwarden-scheduler: no egress NetworkPolicy selects its pods',
      'Deployment/tickwarden-worker: no ingress NetworkPolicy selects its pods',
    ]);
  });

  it('redisNetworkPolicy: a rule admitting every pod, and no policy at all', () => {
    const openRule = mutated((o) => {
      const policy = o.find((object) => object.kind === 'NetworkPolicy' && object.metadata.name === 'tickwarden-redis');
      const [rule] = (policy?.['spec'] as { ingress: { from: unknown[] }[] }).ingress;
      if (rule) rule.from = [{ podSelector: {} }];
    });
    expect(policies.redisNetworkPolicy(openRule)).toContain(
      'NetworkPolicy/tickwarden-redis rule 0: admits StatefulSet/tickwarden-lock',
    );
    const none = prod.filter((object) => object.kind !== 'NetworkPolicy');
    expect(policies.redisNetworkPolicy(none)).toEqual([
      'StatefulSet/tickwarden-lock: no ingress NetworkPolicy selects its pods',
      'StatefulSet/tickwarden-queue-redis: no ingress NetworkPolicy selects its pods',
    ]);
  });

  it('schedules: an invalid team file, reported as the scheduler reports it', () => {
    const objects = mutated((o) => {
      const configMap = o.find((object) => object.metadata.name === 'tickwarden-schedules-reporting');
      const data = configMap?.['data'] as Record<string, string>;
      data['reporting.yaml'] = (data['reporting.yaml'] ?? '').replace('cron: "0 * * * *"', 'cron: "61 * * * *"');
    });
    expect(policies.schedules(objects)).toEqual([
      expect.stringMatching(
        /^\/etc\/tickwarden\/schedules\/reporting\.yaml:\d+:\d+: schedules\[0\]\.cron: invalid cron expression "61 \* \* \* \*"/,
      ),
    ]);
  });

  it('schedules: a subPath mount, which would never see an update', () => {
    const objects = mutated((o) => {
      const mount = container(o, 'worker').volumeMounts?.find((candidate) => candidate.name === 'schedules');
      if (mount) mount.subPath = 'payments.yaml';
    });
    expect(policies.schedules(objects)).toEqual([
      'worker: the schedules are mounted with a subPath, which never sees ConfigMap updates',
    ]);
  });

  it('gracePeriods: a grace below the longest leaseTtl, and one below the worker drain', () => {
    const objects = mutated((o) => {
      only(o, 'scheduler').pod.terminationGracePeriodSeconds = 30;
      // drain: 15 min shutdown grace + no killGrace (the example schedules are all http) + 5 s slack
      only(o, 'worker').pod.terminationGracePeriodSeconds = 900;
    });
    expect(policies.gracePeriods(objects)).toEqual([
      'scheduler: terminationGracePeriodSeconds 30 is not above the longest leaseTtl (45 s)',
      'worker: terminationGracePeriodSeconds 900 is not above its drain (905 s)',
    ]);
  });

  it('gracePeriods: a run longer than the shutdown grace, and a command schedule with no maxRuntime', () => {
    const objects = mutated((o) => {
      const data = o.find((object) => object.metadata.name === 'tickwarden-schedules-reporting')?.['data'] as Record<
        string,
        string
      >;
      data['reporting.yaml'] = `${(data['reporting.yaml'] ?? '').replace('maxRuntime: 15m', 'maxRuntime: 20m')}
  - name: vacuum
    cron: "30 3 * * *"
    handler:
      kind: command
      argv: ["/bin/sh", "-c", "echo vacuum"]
`;
    });
    expect(policies.gracePeriods(objects)).toEqual([
      'worker: reporting/hourly-rollup may run 20m, longer than TICKWARDEN_SHUTDOWN_GRACE (15m): a rollout or scale-down would abort it',
      'worker: reporting/vacuum (command) sets no maxRuntime, so no shutdown grace covers it: give it one of at most TICKWARDEN_SHUTDOWN_GRACE (15m)',
    ]);
    // An http schedule without maxRuntime is bounded by its timeout (30 s by default: weekly-digest).
    const longTimeout = mutated((o) => {
      const data = o.find((object) => object.metadata.name === 'tickwarden-schedules-reporting')?.['data'] as Record<
        string,
        string
      >;
      data['reporting.yaml'] = (data['reporting.yaml'] ?? '').replace(
        'url: https://digest.reporting.svc.cluster.local/send',
        'url: https://digest.reporting.svc.cluster.local/send\n      timeout: 1h',
      );
    });
    expect(policies.gracePeriods(longTimeout)).toEqual([
      'worker: reporting/weekly-digest may run 1h, longer than TICKWARDEN_SHUTDOWN_GRACE (15m): a rollout or scale-down would abort it',
    ]);
  });

  it('workerAutoscaling: a CPU-only HPA, an active-runs target at the concurrency, a fast scale-down, replicas set beside it', () => {
    const hpa = (o: KubeObject[]) => o.find((object) => object.kind === 'HorizontalPodAutoscaler') as KubeObject;
    const spec = (o: KubeObject[]) =>
      hpa(o)['spec'] as {
        metrics: { type: string; pods?: { target: { averageValue: string } } }[];
        behavior: { scaleDown: { stabilizationWindowSeconds: number } };
      };
    const cpuOnly = mutated((o) => (spec(o).metrics = spec(o).metrics.filter((metric) => metric.type === 'Resource')));
    expect(policies.workerAutoscaling(cpuOnly)).toEqual([
      'HorizontalPodAutoscaler/tickwarden-worker: no Pods metric tickwarden_worker_active_runs: HTTP-bound jobs fill a worker without using CPU',
    ]);
    const saturated = mutated((o) => {
      const [pods] = spec(o).metrics;
      if (pods?.pods) pods.pods.target.averageValue = '10';
      spec(o).behavior.scaleDown.stabilizationWindowSeconds = 60;
      (only(o, 'worker').object['spec'] as { replicas?: number }).replicas = 2;
    });
    expect(policies.workerAutoscaling(saturated)).toEqual([
      'HorizontalPodAutoscaler/tickwarden-worker: tickwarden_worker_active_runs target must be an AverageValue above 0 and below TICKWARDEN_WORKER_CONCURRENCY (10), got AverageValue 10',
      'HorizontalPodAutoscaler/tickwarden-worker: scale-down stabilization window 60 s is below 300 s',
      'Deployment/tickwarden-worker: sets replicas (2) while HorizontalPodAutoscaler/tickwarden-worker owns them: every apply would reset them',
    ]);
  });

  it('nodeFlags: a scheduler started without its V8 flag, a worker started from its sources', () => {
    const objects = mutated((o) => {
      container(o, 'scheduler').args = ['apps/scheduler/dist/main.js'];
      container(o, 'worker').args = ['apps/worker/src/main.ts'];
    });
    expect(policies.nodeFlags(objects)).toEqual([
      'scheduler: args ["apps/scheduler/dist/main.js"], expected ["--optimize-for-size","apps/scheduler/dist/main.js"] (PROCESS_NODE_FLAGS of @tickwarden/runtime, then the app\'s compiled main)',
      'worker: args ["apps/worker/src/main.ts"], expected ["apps/worker/dist/main.js"] (PROCESS_NODE_FLAGS of @tickwarden/runtime, then the app\'s compiled main)',
    ]);
  });

  it('nodeFlags: a launcher that runs the worker instead', () => {
    const objects = mutated((o) => (launcher(o).args = ['apps/worker/dist/main.js']));
    expect(policies.nodeFlags(objects)).toEqual([
      'launcher: args ["apps/worker/dist/main.js"], expected ["apps/worker/dist/launcher-main.js"] (the worker\'s PROCESS_NODE_FLAGS of @tickwarden/runtime, then the launcher\'s compiled main)',
    ]);
  });

  it('launcher: a worker pod without a launcher, whose worker does not name the socket', () => {
    const objects = mutated((o) => {
      const pod = only(o, 'worker').pod;
      pod.containers = pod.containers.filter((candidate) => candidate.name !== policies.LAUNCHER);
      envOf(o, 'worker').splice(
        envOf(o, 'worker').findIndex((variable) => variable.name === 'TICKWARDEN_LAUNCHER_SOCKET'),
        1,
      );
    });
    expect(policies.launcher(objects)).toEqual([
      'Deployment/tickwarden-worker container worker: no TICKWARDEN_LAUNCHER_SOCKET (the worker would start job programs itself, as its own user)',
      "Deployment/tickwarden-worker: no launcher container (job programs would run as the worker's user)",
    ]);
    // The other policies leave the missing launcher to this one.
    for (const [name, policy] of Object.entries(policies.POLICIES))
      if (name !== 'launcher') expect(policy(objects), name).toEqual([]);
  });

  it("launcher: the socket's directory not on one volume of both containers, and two socket paths", () => {
    const unshared = mutated((o) => {
      const mounts = container(o, 'worker').volumeMounts ?? [];
      mounts.splice(
        mounts.findIndex((mount) => mount.name === 'launcher'),
        1,
      );
    });
    expect(policies.launcher(unshared)).toEqual([
      "Deployment/tickwarden-worker: the worker and the launcher do not mount one volume at /run/tickwarden-launcher, the socket's directory",
    ]);
    const elsewhere = mutated((o) => setEnv(o, 'worker', 'TICKWARDEN_LAUNCHER_SOCKET', '/tmp/launcher.sock'));
    expect(policies.launcher(elsewhere)).toEqual([
      "Deployment/tickwarden-worker: the worker's TICKWARDEN_LAUNCHER_SOCKET /tmp/launcher.sock is not the launcher's /run/tickwarden-launcher/launcher.sock",
    ]);
    const readOnly = mutated((o) => {
      const mount = launcher(o).volumeMounts?.find((candidate) => candidate.name === 'launcher');
      if (mount) mount.readOnly = true;
    });
    expect(policies.launcher(readOnly)).toEqual([
      'Deployment/tickwarden-worker container launcher: mounts /run/tickwarden-launcher read-only, so it cannot create its socket',
    ]);
  });

  it("launcher: running as the worker's user, or as whatever the pod says", () => {
    const sameUser = mutated((o) => {
      const context = (launcher(o).securityContext ??= {});
      context.runAsUser = 10001;
      context.runAsGroup = 10001;
    });
    expect(policies.launcher(sameUser)).toEqual([
      "Deployment/tickwarden-worker container launcher: runs with the worker's UID 10001",
      "Deployment/tickwarden-worker container launcher: runs with the worker's GID 10001",
    ]);
    const podDefault = mutated((o) => delete launcher(o).securityContext?.runAsUser);
    expect(policies.launcher(podDefault)).toEqual([
      "Deployment/tickwarden-worker container launcher: no runAsUser of its own (it would run as the pod's or the image's user, the worker's)",
    ]);
  });

  it("launcher: a Secret in its environment or volumes, an API token, the worker's /tmp, the schedules missing", () => {
    const objects = mutated((o) => {
      const sidecar = launcher(o);
      (sidecar.env ??= []).push({
        name: 'PAYMENTS_TOKEN',
        valueFrom: { secretKeyRef: { name: 'payments-api', key: 'token' } },
      });
      sidecar.envFrom = [{ secretRef: { name: 'tickwarden-redis' } }];
      const pod = only(o, 'worker').pod;
      pod.automountServiceAccountToken = true;
      (pod.volumes ??= []).push(
        { name: 'secret-payments-api', secret: { secretName: 'payments-api' } },
        { name: 'token', projected: { sources: [{ serviceAccountToken: { path: 'token' } }] } },
      );
      sidecar.volumeMounts = [
        ...(sidecar.volumeMounts ?? []).filter((mount) => mount.name !== 'schedules'),
        { name: 'secret-payments-api', mountPath: '/var/run/tickwarden/secrets/payments-api', readOnly: true },
        { name: 'token', mountPath: '/var/run/secrets/tokens', readOnly: true },
        { name: 'tmp', mountPath: '/var/tmp' },
      ];
    });
    expect(policies.launcher(objects)).toEqual([
      'Deployment/tickwarden-worker container launcher: PAYMENTS_TOKEN comes from Secret payments-api',
      'Deployment/tickwarden-worker container launcher: takes its environment from Secret tickwarden-redis',
      'Deployment/tickwarden-worker: automountServiceAccountToken is not false: the launcher and its programs would get an API token',
      'Deployment/tickwarden-worker container launcher: mounts Secret payments-api (volume secret-payments-api)',
      'Deployment/tickwarden-worker container launcher: mounts a service account token (volume token)',
      'Deployment/tickwarden-worker container launcher: shares volume tmp with the worker (the programs would read what the worker writes there)',
      'Deployment/tickwarden-worker container launcher: does not mount volume schedules read-only at /etc/tickwarden/schedules, where the worker reads the schedules (module files resolve next to them)',
    ]);
  });
});

describe('per overlay', () => {
  it('prod: the worker is scaled on its runs in progress, then CPU, by an HPA that owns its replica count', () => {
    const hpa = prod.find((object) => object.kind === 'HorizontalPodAutoscaler');
    expect(hpa?.['spec']).toMatchObject({
      scaleTargetRef: { kind: 'Deployment', name: 'tickwarden-worker' },
      metrics: [
        { type: 'Pods', pods: { metric: { name: policies.ACTIVE_RUNS_METRIC }, target: { type: 'AverageValue' } } },
        { type: 'Resource', resource: { name: 'cpu' } },
      ],
    });
    expect(only(prod, 'worker').replicas).toBeUndefined();
    expect(only(prod, 'scheduler').replicas).toBe(3);
  });

  it('dev: no HPA, and the throwaway Secret is generated', () => {
    const dev = rendered.get('dev') ?? [];
    expect(dev.some((object) => object.kind === 'HorizontalPodAutoscaler')).toBe(false);
    expect(dev.find((object) => object.kind === 'Secret')?.metadata.name).toMatch(/^tickwarden-redis-/);
  });

  it('managed-redis: no Redis pods or their policy; both apps read the URLs from the managed Secret, and reach Redis ports outside', () => {
    const managed = rendered.get('managed-redis') ?? [];
    expect(workloads(managed).map((workload) => workload.name)).toEqual(['tickwarden-scheduler', 'tickwarden-worker']);
    expect(managed.filter((object) => object.kind === 'NetworkPolicy').map((object) => object.metadata.name)).toEqual([
      'tickwarden-apps',
      'tickwarden-worker-egress',
    ]);
    const egress = (
      managed.find((object) => object.metadata.name === 'tickwarden-apps')?.['spec'] as {
        egress: { ports: { port: number }[] }[];
      }
    ).egress;
    expect(egress.map((rule) => rule.ports.map((port) => port.port))).toEqual([
      [53, 53],
      [6379, 6380],
    ]);
    for (const app of policies.APP_COMPONENTS) {
      const secretKeys = envOf(managed, app).flatMap((variable) =>
        variable.valueFrom?.secretKeyRef
          ? [`${variable.name}<-${variable.valueFrom.secretKeyRef.name}/${variable.valueFrom.secretKeyRef.key}`]
          : [],
      );
      expect(secretKeys.sort()).toEqual([
        'TICKWARDEN_LOCK_NODES<-tickwarden-managed-redis/lock-nodes',
        'TICKWARDEN_QUEUE_REDIS<-tickwarden-managed-redis/queue-redis',
      ]);
    }
  });
});

describe('schedules', () => {
  const scheduleFiles = readdirSync(path.join(BASE_DIR, 'schedules')).filter((file) => /\.ya?ml$/.test(file));

  it('every team file under base/schedules is in a ConfigMap, one ConfigMap per team', () => {
    const configMaps = prod.filter((object) => object.metadata.name.startsWith('tickwarden-schedules-'));
    const projected = configMaps.flatMap((configMap) =>
      Object.entries(configMap['data'] as Record<string, string>).map(([file, text]) => {
        const result = validateConfigText(text, file);
        const teams = result.ok
          ? [...new Set(result.config.schedules.map((schedule) => schedule.id.split('/')[0]))]
          : ['(invalid)'];
        return { file, configMap: configMap.metadata.name, teams };
      }),
    );
    expect(projected.map((entry) => entry.file).sort()).toEqual(scheduleFiles.sort());
    for (const entry of projected)
      expect(entry.teams.map((team) => `tickwarden-schedules-${team}`)).toEqual([entry.configMap]);
  });

  it('the projected files are the files on disk, byte for byte', () => {
    const { files } = policies.mountedSchedules(prod, 'scheduler');
    for (const file of scheduleFiles) {
      expect(files.find((candidate) => candidate.file.endsWith(`/${file}`))?.text).toBe(
        readFileSync(path.join(BASE_DIR, 'schedules', file), 'utf8'),
      );
    }
  });
});

it("the image's default command is the compiled scheduler with its node flags", () => {
  const cmd = /^CMD (\[.*\])$/m.exec(readFileSync(DOCKERFILE, 'utf8'));
  expect(JSON.parse(cmd?.[1] ?? 'null')).toEqual([...PROCESS_NODE_FLAGS.scheduler, 'apps/scheduler/dist/main.js']);
});

it("the app pods run as the image's user, the launcher as another", () => {
  const user = /^USER (\d+):(\d+)$/m.exec(readFileSync(DOCKERFILE, 'utf8'));
  expect(user?.[1]).toBeDefined();
  for (const app of policies.APP_COMPONENTS) {
    expect(only(prod, app).pod.securityContext).toMatchObject({
      runAsUser: Number(user?.[1]),
      runAsGroup: Number(user?.[2]),
    });
  }
  const launcherContext = launcher(prod).securityContext;
  expect([launcherContext?.runAsUser, launcherContext?.runAsGroup]).not.toContain(Number(user?.[1]));
  expect([launcherContext?.runAsUser, launcherContext?.runAsGroup]).not.toContain(Number(user?.[2]));
});
