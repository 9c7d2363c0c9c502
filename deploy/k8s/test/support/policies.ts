import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  formatConfigError,
  formatDuration,
  LAUNCHER_SOCKET_VARIABLE,
  validateConfigTexts,
  type ConfigText,
  type TickwardenConfig,
} from '@tickwarden/config';
import { PROCESS_NODE_FLAGS } from '@tickwarden/runtime';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IProbe } from 'kubernetes-models/v1/Probe';
import type { IVolume } from 'kubernetes-models/v1/Volume';
import type { IVolumeMount } from 'kubernetes-models/v1/VolumeMount';
import { APP_ENV_PARSERS, resolveEnv, variablesRead, type EnvSources, type ResolvedEnv } from './env.ts';
import {
  component,
  containerNamed,
  flagValues,
  mainContainer,
  selects,
  workloads,
  type KubeObject,
  type LabelSelector,
  type Workload,
} from './objects.ts';
import { REPO_ROOT } from './paths.ts';

/** A policy: every violation it finds in a rendered overlay, one message each (none: it holds). */
export type Policy = (objects: readonly KubeObject[]) => string[];

export const APP_COMPONENTS = ['scheduler', 'worker'] as const;

/** The worker pod's second container, which starts the job programs under a user of its own. */
export const LAUNCHER = 'launcher';
/** What the launcher container runs: the worker app's compiled launcher (`--check`: its probe). */
export const LAUNCHER_MAIN = 'apps/worker/dist/launcher-main.js';

/**
 * Secrets the overlays expect to be created out of band (README, "Apply" and "Managed Redis"),
 * with stand-in values of the right shape.
 */
export const ENV_SOURCES: EnvSources = {
  podName: 'tickwarden-scheduler-7d9c8b6f5-x2x7q',
  externalSecrets: {
    // Each app user's password on each lock node and on the queue Redis (README, "Apply").
    ...Object.fromEntries(
      ['scheduler', 'worker'].flatMap((role, r) => [
        ...Array.from({ length: 5 }, (_, node) => [
          `tickwarden-redis/${role}-lock-${node}-password`,
          `3f1c0e9a7b2d4c6e8f0a1b2c3d4e5f${r}${node}`,
        ]),
        [`tickwarden-redis/${role}-queue-password`, `9a8b7c6d5e4f30211f2e3d4c5b6a79${r}0`],
      ]),
    ),
    'tickwarden-redis-acl/probe-password': '0f1e2d3c4b5a69788796a5b4c3d2e1f0',
    'tickwarden-managed-redis/lock-nodes':
      'rediss://:pw@lock-a.example.net:6380,rediss://:pw@lock-b.example.net:6380,rediss://:pw@lock-c.example.net:6380',
    'tickwarden-managed-redis/queue-redis': 'rediss://:pw@queue.example.net:6380',
  },
};

// ---- containers ---------------------------------------------------------------------------

const containersOf = (workload: Workload): IContainer[] => [
  ...(workload.pod.initContainers ?? []),
  ...workload.pod.containers,
];
const where = (workload: Workload, container: IContainer): string =>
  `${workload.kind}/${workload.name} container ${container.name}`;
const hasHandler = (probe: IProbe | undefined): boolean =>
  Boolean(probe && (probe.httpGet ?? probe.exec ?? probe.tcpSocket ?? probe.grpc));

/** Every (non-init) container has a liveness and a readiness probe with a handler. */
export const probes: Policy = (objects) =>
  workloads(objects).flatMap((workload) =>
    workload.pod.containers.flatMap((container) =>
      (['livenessProbe', 'readinessProbe'] as const)
        .filter((probe) => !hasHandler(container[probe]))
        .map((probe) => `${where(workload, container)}: no ${probe}`),
    ),
  );

/** Every container requests and limits CPU and memory. */
export const resources: Policy = (objects) =>
  workloads(objects).flatMap((workload) =>
    containersOf(workload).flatMap((container) =>
      (['requests', 'limits'] as const).flatMap((kind) =>
        ['cpu', 'memory']
          .filter((resource) => container.resources?.[kind]?.[resource] === undefined)
          .map((resource) => `${where(workload, container)}: no ${resource} ${kind.slice(0, -1)}`),
      ),
    ),
  );

/** Non-root, no privilege escalation, read-only root filesystem, every capability dropped, RuntimeDefault seccomp. */
export const securityContext: Policy = (objects) =>
  workloads(objects).flatMap((workload) =>
    containersOf(workload).flatMap((container) => {
      const pod = workload.pod.securityContext ?? {};
      const own = container.securityContext ?? {};
      const at = where(workload, container);
      const problems: string[] = [];
      if ((own.runAsNonRoot ?? pod.runAsNonRoot) !== true) problems.push(`${at}: runAsNonRoot is not true`);
      if ((own.runAsUser ?? pod.runAsUser) === 0) problems.push(`${at}: runs as UID 0`);
      if (own.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation is not false`);
      if (own.readOnlyRootFilesystem !== true) problems.push(`${at}: readOnlyRootFilesystem is not true`);
      if (!own.capabilities?.drop?.includes('ALL')) problems.push(`${at}: capabilities do not drop ALL`);
      if ((own.capabilities?.add ?? []).length > 0) problems.push(`${at}: adds capabilities`);
      if ((own.seccompProfile ?? pod.seccompProfile)?.type !== 'RuntimeDefault')
        problems.push(`${at}: seccompProfile is not RuntimeDefault`);
      return problems;
    }),
  );

/** Images name a tag or digest, never `latest`. */
export const pinnedImages: Policy = (objects) =>
  workloads(objects).flatMap((workload) =>
    containersOf(workload).flatMap((container) => {
      const image = container.image ?? '';
      const tag = image.includes('@') ? 'digest' : /:([^/:]+)$/.exec(image)?.[1];
      return tag === undefined || tag === 'latest'
        ? [`${where(workload, container)}: image "${image}" is not pinned to a tag`]
        : [];
    }),
  );

/**
 * App pods get no service-link variables (they would land in the apps' and the job programs'
 * environment) and no API token; the worker's pod shares its process namespace, so that the
 * pause container, not node, is PID 1 and reaps what job programs leave behind (that the programs
 * cannot look into the worker through it is the launcher policy's part).
 */
export const podHygiene: Policy = (objects) =>
  APP_COMPONENTS.flatMap((name) => component(objects, name)).flatMap((workload) => [
    ...(workload.pod.enableServiceLinks === false
      ? []
      : [`${workload.kind}/${workload.name}: enableServiceLinks is not false`]),
    ...(workload.pod.automountServiceAccountToken === false
      ? []
      : [`${workload.kind}/${workload.name}: automountServiceAccountToken is not false`]),
    ...(workload.podLabels['app.kubernetes.io/component'] !== 'worker' || workload.pod.shareProcessNamespace === true
      ? []
      : [
          `${workload.kind}/${workload.name}: shareProcessNamespace is not true (node would be PID 1 and leave job programs' leftovers unreaped)`,
        ]),
  ]);

// ---- the apps -----------------------------------------------------------------------------

/** Every app component is rendered exactly once. */
function appWorkload(objects: readonly KubeObject[], name: string): Workload {
  const found = component(objects, name);
  if (found.length !== 1 || !found[0]) throw new Error(`expected one ${name} workload, found ${found.length}`);
  return found[0];
}

const resolvedApp = (objects: readonly KubeObject[], name: string): ResolvedEnv =>
  resolveEnv(mainContainer(appWorkload(objects, name)), objects, ENV_SOURCES);

/** The worker pod's launcher container; `undefined` when it has none (the launcher policy says so). */
const launcherContainer = (objects: readonly KubeObject[]): IContainer | undefined =>
  containerNamed(appWorkload(objects, 'worker'), LAUNCHER);

/** Each app container, by name: the apps' own, and the launcher when the worker pod has one. */
const appContainers = (objects: readonly KubeObject[]): [string, IContainer][] => {
  const launcher = launcherContainer(objects);
  return [
    ...APP_COMPONENTS.map((name): [string, IContainer] => [name, mainContainer(appWorkload(objects, name))]),
    ...(launcher ? [[LAUNCHER, launcher] as [string, IContainer]] : []),
  ];
};

/**
 * The app containers (the launcher's too) set only variables their process reads (plus, in the
 * apps, Secret values used solely as `$(NAME)` inside those), every reference resolves, and the
 * result passes the process's own parser.
 */
export const appEnvironment: Policy = (objects) =>
  appContainers(objects).flatMap(([name, container]) => {
    const parse = APP_ENV_PARSERS[name];
    if (!parse) throw new Error(`no env parser for ${name}`);
    const read = variablesRead(parse);
    const { env, problems, secretHelpers } = resolveEnv(container, objects, ENV_SOURCES);
    // The launcher takes nothing from a Secret (the launcher policy), not even for a $(NAME).
    const helpers = name === LAUNCHER ? new Set<string>() : secretHelpers;
    const unread = Object.keys(env).filter((variable) => !read.has(variable) && !helpers.has(variable));
    const parsed = parse(env);
    return [
      ...problems,
      ...unread.map(
        (variable) =>
          `${name}: sets ${variable}, which the ${name} does not read (it reads ${[...read].sort().join(', ')})`,
      ),
      ...(parsed.ok ? [] : parsed.errors.map((error) => `${name}: ${error.variable}: ${error.message}`)),
    ];
  });

/** The probes' command in the launcher container: it exits 0 only when the launcher answers on its socket. */
export const LAUNCHER_CHECK = ['node', LAUNCHER_MAIN, '--check'] as const;

/**
 * Liveness on /healthz, readiness on /readyz, on the port the app listens on
 * (TICKWARDEN_HTTP_PORT), scraped there; the launcher (no HTTP port) is probed by running its
 * `--check` in its container.
 */
export const appProbes: Policy = (objects) => [
  ...APP_COMPONENTS.flatMap((name) => httpAppProbes(objects, name)),
  ...launcherProbes(objects),
];

function launcherProbes(objects: readonly KubeObject[]): string[] {
  const launcher = launcherContainer(objects);
  if (!launcher) return [];
  return (['livenessProbe', 'readinessProbe'] as const)
    .filter((probe) => JSON.stringify(launcher[probe]?.exec?.command) !== JSON.stringify(LAUNCHER_CHECK))
    .map((probe) => `${LAUNCHER}: ${probe} is not an exec of ${LAUNCHER_CHECK.join(' ')}`);
}

function httpAppProbes(objects: readonly KubeObject[], name: (typeof APP_COMPONENTS)[number]): string[] {
  const workload = appWorkload(objects, name);
  const container = mainContainer(workload);
  const port = resolvedApp(objects, name).env['TICKWARDEN_HTTP_PORT'] ?? String(name === 'scheduler' ? 8080 : 8081);
  const portOf = (probe: IProbe | undefined): string => {
    const target = probe?.httpGet?.port;
    const named = container.ports?.find((candidate) => candidate.name === target);
    return String(named ? named.containerPort : target);
  };
  const problems: string[] = [];
  for (const [probe, path] of [
    ['livenessProbe', '/healthz'],
    ['readinessProbe', '/readyz'],
  ] as const) {
    const handler = container[probe]?.httpGet;
    if (handler?.path !== path) problems.push(`${name}: ${probe} is not an HTTP GET of ${path}`);
    if (portOf(container[probe]) !== port)
      problems.push(`${name}: ${probe} port ${portOf(container[probe])} is not TICKWARDEN_HTTP_PORT ${port}`);
  }
  const annotations = workload.podAnnotations;
  const monitored = objects.some((object) => object.kind === 'ServiceMonitor');
  if (!monitored && (annotations['prometheus.io/scrape'] !== 'true' || annotations['prometheus.io/port'] !== port)) {
    problems.push(`${name}: no prometheus.io/scrape annotations for port ${port} (and no ServiceMonitor)`);
  }
  return problems;
}

/** At least two scheduler replicas, a PDB that selects them and lets one go at most, and rollouts that never go below the replica count. */
export const schedulerAvailability: Policy = (objects) => {
  const scheduler = appWorkload(objects, 'scheduler');
  const replicas = scheduler.replicas ?? 1;
  const problems: string[] = [];
  if (replicas < 2) problems.push(`scheduler: ${replicas} replica(s); at least 2, so a tick never depends on one pod`);
  const budgets = pdbsSelecting(objects, scheduler);
  if (budgets.length === 0) problems.push('scheduler: no PodDisruptionBudget selects its pods');
  for (const budget of budgets) {
    // Percentages are not accepted: with 2-3 replicas their rounding decides everything.
    const unavailable =
      typeof budget.maxUnavailable === 'number'
        ? budget.maxUnavailable
        : typeof budget.minAvailable === 'number'
          ? replicas - budget.minAvailable
          : Number.NaN;
    if (!(unavailable >= 1 && unavailable < replicas)) {
      problems.push(
        `scheduler: the PodDisruptionBudget must allow at least one and at most ${replicas - 1} replica(s) down, as a number (got ${JSON.stringify(budget)})`,
      );
    }
  }
  const rolling = (
    scheduler.object['spec'] as { strategy?: { type?: string; rollingUpdate?: { maxUnavailable?: number | string } } }
  ).strategy;
  if (rolling?.type !== 'RollingUpdate' || (rolling.rollingUpdate?.maxUnavailable ?? '25%') !== 0) {
    problems.push(
      'scheduler: rollouts must be RollingUpdate with maxUnavailable 0 (a new replica is ready before an old one stops)',
    );
  }
  return problems;
};

function pdbsSelecting(
  objects: readonly KubeObject[],
  workload: Workload,
): { maxUnavailable?: number | string; minAvailable?: number | string }[] {
  return objects
    .filter((object) => object.kind === 'PodDisruptionBudget')
    .map(
      (object) =>
        object['spec'] as {
          selector?: LabelSelector;
          maxUnavailable?: number | string;
          minAvailable?: number | string;
        },
    )
    .filter((spec) => spec.selector !== undefined && selects(spec.selector, workload.podLabels))
    .map(({ maxUnavailable, minAvailable }) => ({ maxUnavailable, minAvailable }));
}

// ---- Redis ----------------------------------------------------------------------------------

/** `redis-server` flags of a Redis workload's container. */
const redisFlags = (workload: Workload): Map<string, string> => {
  const container = mainContainer(workload);
  return flagValues([...(container.command ?? []), ...(container.args ?? [])]);
};

/** The zone label the lock nodes spread over. */
export const ZONE_KEY = 'topology.kubernetes.io/zone';
/**
 * The lock StatefulSet's annotation (value `preferred`) by which an overlay for a cluster with
 * fewer zones accepts a zone spread that is only a preference (README, "Lock nodes and zones").
 */
export const ZONE_SPREAD_ANNOTATION = 'tickwarden.io/lock-zone-spread';

/**
 * The most of `count` pods one zone can hold under a DoNotSchedule spread with `maxSkew` over at
 * least `minDomains` zones: the others hold at least (that - maxSkew) each. With fewer zones
 * than minDomains the global minimum counts as 0, so a zone holds maxSkew at most.
 */
export const mostPerZone = (count: number, maxSkew: number, minDomains: number): number =>
  Math.max(maxSkew, Math.floor((count + (minDomains - 1) * maxSkew) / minDomains));

/** Why a lock StatefulSet's zone spread lets one zone hold a majority, if it does. */
function zoneSpreadProblems(set: Workload): string[] {
  const at = `${set.kind}/${set.name}`;
  const count = set.replicas ?? 1;
  const majority = Math.floor(count / 2) + 1;
  const zone = (set.pod.topologySpreadConstraints ?? []).find(
    (constraint) =>
      constraint.topologyKey === ZONE_KEY &&
      constraint.labelSelector &&
      selects(constraint.labelSelector as LabelSelector, set.podLabels),
  );
  if (!zone) return [`${at}: no topologySpreadConstraint on ${ZONE_KEY} against its own pods`];
  if (set.object.metadata.annotations?.[ZONE_SPREAD_ANNOTATION] === 'preferred') return [];
  if (zone.whenUnsatisfiable !== 'DoNotSchedule')
    return [
      `${at}: the zone spread is a preference (${zone.whenUnsatisfiable}): a zone may end up with a majority; require it (DoNotSchedule with minDomains) or accept that with the annotation ${ZONE_SPREAD_ANNOTATION}: preferred`,
    ];
  const most = mostPerZone(count, zone.maxSkew, zone.minDomains ?? 1);
  return most < majority
    ? []
    : [
        `${at}: maxSkew ${zone.maxSkew} over minDomains ${zone.minDomains ?? 1} lets one zone hold ${most} of ${count} lock nodes, a majority (${majority}): losing that zone loses the quorum`,
      ];
}

/**
 * In-cluster lock nodes: an odd count of at least 3 masters, each with required anti-affinity
 * per Kubernetes node, a zone spread that keeps a majority out of any one zone (or the
 * annotation that accepts less), AOF fsynced on every write, no eviction, and exactly the nodes
 * the apps' TICKWARDEN_LOCK_NODES names. Without in-cluster lock nodes the URLs must come from a
 * Secret.
 */
export const lockNodes: Policy = (objects) => {
  const sets = component(objects, 'lock-node');
  const urls = APP_COMPONENTS.map((name) => ({
    name,
    variable: mainContainer(appWorkload(objects, name)).env?.find((v) => v.name === 'TICKWARDEN_LOCK_NODES'),
  }));
  if (sets.length === 0) {
    return urls
      .filter(({ variable }) => !variable?.valueFrom?.secretKeyRef)
      .map(({ name }) => `${name}: no lock nodes are rendered, yet TICKWARDEN_LOCK_NODES is not read from a Secret`);
  }
  const problems: string[] = [];
  const count = sets.reduce((sum, set) => sum + (set.replicas ?? 1), 0);
  if (count < 3 || count % 2 === 0)
    problems.push(`lock nodes: ${count}; an odd count of at least 3 (a majority survives the most failures per node)`);
  const hosts: string[] = [];
  for (const set of sets) {
    const at = `${set.kind}/${set.name}`;
    if (set.kind !== 'StatefulSet') problems.push(`${at}: lock nodes need stable names and volumes: a StatefulSet`);
    const spec = set.object['spec'] as { serviceName?: string };
    const terms = set.pod.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution ?? [];
    if (
      !terms.some(
        (term) =>
          term.topologyKey === 'kubernetes.io/hostname' &&
          term.labelSelector &&
          selects(term.labelSelector as LabelSelector, set.podLabels),
      )
    ) {
      problems.push(`${at}: no required pod anti-affinity on kubernetes.io/hostname against its own pods`);
    }
    problems.push(...zoneSpreadProblems(set));
    const flags = redisFlags(set);
    if (flags.get('appendonly') !== 'yes' || flags.get('appendfsync') !== 'always')
      problems.push(`${at}: not --appendonly yes --appendfsync always`);
    if (flags.get('maxmemory-policy') !== 'noeviction')
      problems.push(`${at}: not --maxmemory-policy noeviction (an evicted key is a lost lease)`);
    if (flags.has('replicaof') || flags.has('slaveof'))
      problems.push(`${at}: replicates; lock nodes must be independent masters`);
    if (!(set.object['spec'] as { volumeClaimTemplates?: unknown[] }).volumeClaimTemplates?.length)
      problems.push(`${at}: no volumeClaimTemplates: the AOF would not outlive the pod`);
    for (let index = 0; index < (set.replicas ?? 1); index++)
      hosts.push(`${set.name}-${index}.${spec.serviceName ?? ''}`);
  }
  for (const { name, variable } of urls) {
    const named = (variable?.value ?? '')
      .split(',')
      .map((entry) => new URL(entry.trim().replace(/\$\([^)]*\)/g, 'x')).hostname);
    if (named.sort().join(',') !== [...hosts].sort().join(','))
      problems.push(`${name}: TICKWARDEN_LOCK_NODES names ${named.join(', ')}; the lock nodes are ${hosts.join(', ')}`);
  }
  return problems;
};

/** The variable of the lock pods' init container that holds the delayed restart, in whole seconds. */
export const RESTART_DELAY_VARIABLE = 'RESTART_DELAY_SECONDS';

/** How late a scheduler replica still contests a tick (libs/contracts). */
const lateTickWindowMs = (): number => sourceConstantMs('libs/contracts/src/tick-job.ts', 'LATE_TICK_WINDOW_MS');

/**
 * Redlock's delayed restart: each lock pod has an init container (the Redis image, so `sh` and
 * `sleep` are there) that mounts the Redis container's --dir, gets that directory as its last
 * argument, and holds a node whose directory is empty for RESTART_DELAY_SECONDS: more than the
 * longest leaseTtl of the schedules plus the late-tick window, so every lease the node granted
 * before it lost its data has expired, and no tick it claimed is still contested, before it votes
 * again. (That the script waits only on an empty directory is run by test/redis-config.test.ts.)
 */
export const lockRestartDelay: Policy = (objects) => {
  const sets = component(objects, 'lock-node');
  if (sets.length === 0) return [];
  const { config } = loadedSchedules(objects);
  if (!config) return ['the schedules do not load (see the schedules policy)'];
  const maxLeaseTtlMs = Math.max(0, ...config.schedules.map((schedule) => schedule.leaseTtlMs));
  const neededMs = maxLeaseTtlMs + lateTickWindowMs();
  return sets.flatMap((set) => {
    const at = `${set.kind}/${set.name}`;
    const redis = mainContainer(set);
    const init = (set.pod.initContainers ?? []).find((candidate) =>
      candidate.env?.some((variable) => variable.name === RESTART_DELAY_VARIABLE),
    );
    if (!init)
      return [
        `${at}: no init container with ${RESTART_DELAY_VARIABLE}: a node that lost its data would vote at once, forgetting the leases it granted`,
      ];
    const own = where(set, init);
    const problems: string[] = [];
    const delay = init.env?.find((variable) => variable.name === RESTART_DELAY_VARIABLE)?.value ?? '';
    if (!/^\d+$/.test(delay) || Number(delay) * 1000 <= neededMs) {
      problems.push(
        `${own}: ${RESTART_DELAY_VARIABLE} "${delay}" must be whole seconds above the longest leaseTtl (${maxLeaseTtlMs / 1000} s) plus the late-tick window (${lateTickWindowMs() / 1000} s)`,
      );
    }
    if (init.image !== redis.image)
      problems.push(`${own}: image ${String(init.image)} is not the Redis container's ${String(redis.image)}`);
    const dir = redisFlags(set).get('dir') ?? '';
    const args = [...(init.command ?? []), ...(init.args ?? [])];
    if (args.at(-1) !== dir)
      problems.push(
        `${own}: its last argument ${JSON.stringify(args.at(-1))} is not the data directory ${dir} (the Redis container's --dir)`,
      );
    const [redisMount, initMount] = [mountHolding(redis, dir), mountHolding(init, dir)];
    if (
      !redisMount ||
      redisMount.name !== initMount?.name ||
      (redisMount.subPath ?? '') !== (initMount.subPath ?? '') ||
      redisMount.mountPath !== initMount.mountPath
    ) {
      problems.push(`${own}: does not mount the Redis container's data volume at ${redisMount?.mountPath ?? dir}`);
    }
    return problems;
  });
};

/**
 * The queue Redis's memory limit over its --maxmemory: an AOF rewrite forks, and while writes go
 * on the child's copy-on-write pages can approach a second copy of the dataset.
 */
export const QUEUE_FORK_HEADROOM = 2;

/** A CPU quantity (`250m`, `1`, `1.5`) in cores; NaN when not understood. */
export function cpuCores(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(m?)$/.exec(text.trim());
  return match?.[1] ? Number(match[1]) / (match[2] ? 1000 : 1) : Number.NaN;
}

/** Why a workload's pods are not of Guaranteed QoS class (every container's requests equal its limits, cpu and memory), if they are not. */
function notGuaranteed(workload: Workload): string[] {
  return containersOf(workload).flatMap((container) =>
    (['cpu', 'memory'] as const).flatMap((resource) => {
      const [request, limit] = [container.resources?.requests?.[resource], container.resources?.limits?.[resource]].map(
        (value) => (value === undefined ? undefined : String(value)),
      );
      const size = resource === 'cpu' ? cpuCores : byteSize;
      return limit !== undefined && (request === undefined || size(request) === size(limit))
        ? []
        : [
            `${where(workload, container)}: ${resource} request ${String(request)} is not its limit ${String(limit)} (Guaranteed QoS)`,
          ];
    }),
  );
}

/**
 * The queue Redis (when in the cluster) persists to a volume with AOF and never evicts (BullMQ
 * requires noeviction); it is of Guaranteed QoS (the kubelet evicts it last, and its memory is
 * reserved), its memory limit leaves QUEUE_FORK_HEADROOM for the AOF rewrite's fork, and a
 * PodDisruptionBudget lets no eviction take it (it has no replica to take over).
 */
export const queueRedis: Policy = (objects) =>
  component(objects, 'queue').flatMap((workload) => {
    const flags = redisFlags(workload);
    const at = `${workload.kind}/${workload.name}`;
    const maxmemory = byteSize(flags.get('maxmemory') ?? '');
    const limit = byteSize(String(mainContainer(workload).resources?.limits?.['memory'] ?? ''));
    const replicas = workload.replicas ?? 1;
    const budgets = pdbsSelecting(objects, workload);
    const evictable = budgets.filter(
      (budget) =>
        !(budget.maxUnavailable === 0 || (typeof budget.minAvailable === 'number' && budget.minAvailable >= replicas)),
    );
    return [
      ...(flags.get('appendonly') === 'yes' ? [] : [`${at}: no --appendonly yes`]),
      ...(flags.get('maxmemory-policy') === 'noeviction'
        ? []
        : [`${at}: not --maxmemory-policy noeviction (BullMQ requires it)`]),
      ...((workload.object['spec'] as { volumeClaimTemplates?: unknown[] }).volumeClaimTemplates?.length
        ? []
        : [`${at}: no volumeClaimTemplates`]),
      ...notGuaranteed(workload),
      ...(limit >= QUEUE_FORK_HEADROOM * maxmemory
        ? []
        : [
            `${at}: the memory limit must be at least ${QUEUE_FORK_HEADROOM} x --maxmemory (an AOF rewrite forks; its copy-on-write pages come on top of the data)`,
          ]),
      ...(budgets.length > 0
        ? []
        : [`${at}: no PodDisruptionBudget selects its pods (a drain would evict the only queue Redis)`]),
      ...evictable.map(
        (budget) =>
          `${at}: its PodDisruptionBudget allows an eviction (${JSON.stringify(budget)}); maxUnavailable 0 or minAvailable ${replicas}`,
      ),
    ];
  });

const BYTES: Readonly<Record<string, number>> = {
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  k: 1e3,
  m: 1e6,
  g: 1e9,
  ki: 2 ** 10,
  mi: 2 ** 20,
  gi: 2 ** 30,
};

/** `768mb` (redis-server) or `1Gi` (Kubernetes quantity) in bytes; NaN when not understood. */
export function byteSize(text: string): number {
  const match = /^(\d+)([a-z]*)$/i.exec(text.trim());
  if (!match?.[1]) return Number.NaN;
  const unit = (match[2] ?? '').toLowerCase();
  return Number(match[1]) * (unit === '' || unit === 'b' ? 1 : (BYTES[unit] ?? Number.NaN));
}

/**
 * Every Redis caps its data (--maxmemory) at most at 80% of its container's memory limit, so a
 * full node refuses writes (noeviction) instead of being OOM-killed, which would cost a lock
 * node its in-memory state and a restart.
 */
export const redisMemory: Policy = (objects) =>
  [...component(objects, 'lock-node'), ...component(objects, 'queue')].flatMap((workload) => {
    const maxmemory = byteSize(redisFlags(workload).get('maxmemory') ?? '');
    const limit = byteSize(String(mainContainer(workload).resources?.limits?.['memory'] ?? ''));
    return maxmemory > 0 && maxmemory <= 0.8 * limit
      ? []
      : [`${workload.kind}/${workload.name}: --maxmemory must be set and at most 80% of the memory limit`];
  });

/**
 * Every Redis pod is selected by an ingress NetworkPolicy whose every rule admits only pods of
 * this namespace that are scheduler or worker pods (checked against every rendered pod template).
 */
export const redisNetworkPolicy: Policy = (objects) => {
  const pods = workloads(objects);
  const redis = [...component(objects, 'lock-node'), ...component(objects, 'queue')];
  const isApp = (workload: Workload): boolean =>
    (APP_COMPONENTS as readonly string[]).includes(workload.podLabels['app.kubernetes.io/component'] ?? '');
  const policies = objects
    .filter((object) => object.kind === 'NetworkPolicy')
    .map((object) => ({ name: object.metadata.name, spec: object['spec'] as NetworkPolicySpec }))
    .filter(({ spec }) => (spec.policyTypes ?? ['Ingress']).includes('Ingress'));
  return redis.flatMap((target) => {
    const at = `${target.kind}/${target.name}`;
    const covering = policies.filter(({ spec }) => selects(spec.podSelector, target.podLabels));
    if (covering.length === 0) return [`${at}: no ingress NetworkPolicy selects its pods`];
    return covering.flatMap(({ name, spec }) =>
      (spec.ingress ?? []).flatMap((rule, index) => {
        const peers = rule.from ?? [];
        if (peers.length === 0) return [`NetworkPolicy/${name} rule ${index}: admits every source`];
        return peers.flatMap((peer) => {
          if (peer.ipBlock || peer.namespaceSelector || !peer.podSelector)
            return [`NetworkPolicy/${name} rule ${index}: admits sources other than pods of this namespace`];
          const selector = peer.podSelector;
          return pods
            .filter((pod) => selects(selector, pod.podLabels) && !isApp(pod))
            .map((pod) => `NetworkPolicy/${name} rule ${index}: admits ${pod.kind}/${pod.name}`);
        });
      }),
    );
  });
};

/**
 * Every scheduler and worker pod is selected by an ingress and an egress NetworkPolicy (so both
 * default to deny), and no rule of those policies is open: an ingress rule names its sources (a
 * namespace selector with labels: the metrics scraper's) and ports, an egress rule its
 * destinations and ports.
 */
export const appNetworkPolicy: Policy = (objects) => {
  const policies = objects
    .filter((object) => object.kind === 'NetworkPolicy')
    .map((object) => ({ name: object.metadata.name, spec: object['spec'] as NetworkPolicySpec }));
  return workloads(objects)
    .filter((workload) =>
      (APP_COMPONENTS as readonly string[]).includes(workload.podLabels['app.kubernetes.io/component'] ?? ''),
    )
    .flatMap((app) => {
      const covering = policies.filter(({ spec }) => selects(spec.podSelector, app.podLabels));
      const problems: string[] = [];
      for (const type of ['Ingress', 'Egress']) {
        if (!covering.some(({ spec }) => (spec.policyTypes ?? ['Ingress']).includes(type)))
          problems.push(`${app.kind}/${app.name}: no ${type.toLowerCase()} NetworkPolicy selects its pods`);
      }
      for (const { name, spec } of covering) {
        (spec.ingress ?? []).forEach((rule, index) => {
          const open =
            (rule.from ?? []).length === 0 ||
            (rule.ports ?? []).length === 0 ||
            (rule.from ?? []).some(
              (peer) =>
                !peer.namespaceSelector ||
                Object.keys(peer.namespaceSelector.matchLabels ?? {}).length === 0 ||
                peer.ipBlock,
            );
          if (open)
            problems.push(
              `NetworkPolicy/${name} ingress rule ${index}: admits more than the metrics scraper's namespace on named ports`,
            );
        });
        (spec.egress ?? []).forEach((rule, index) => {
          if ((rule.to ?? []).length === 0 || (rule.ports ?? []).length === 0)
            problems.push(`NetworkPolicy/${name} egress rule ${index}: admits every destination or every port`);
        });
      }
      return problems;
    });
};

interface NetworkPolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: unknown;
}

interface NetworkPolicySpec {
  podSelector: LabelSelector;
  policyTypes?: string[];
  ingress?: { from?: NetworkPolicyPeer[]; ports?: unknown[] }[];
  egress?: { to?: NetworkPolicyPeer[]; ports?: unknown[] }[];
}

// ---- schedules and shutdown ---------------------------------------------------------------------

/** The files an app container sees at TICKWARDEN_CONFIG, from the rendered ConfigMaps. */
export function mountedSchedules(
  objects: readonly KubeObject[],
  name: string,
): { files: ConfigText[]; problems: string[] } {
  const workload = appWorkload(objects, name);
  const container = mainContainer(workload);
  const configPath = resolvedApp(objects, name).env['TICKWARDEN_CONFIG'] ?? '';
  const mount = container.volumeMounts?.find((candidate) => candidate.mountPath === configPath);
  if (!mount) return { files: [], problems: [`${name}: nothing is mounted at TICKWARDEN_CONFIG (${configPath})`] };
  const problems: string[] = [];
  // A subPath mount is never updated by the kubelet: no hot reload.
  if (mount.subPath || mount.subPathExpr)
    problems.push(`${name}: the schedules are mounted with a subPath, which never sees ConfigMap updates`);
  if (mount.readOnly !== true) problems.push(`${name}: the schedules mount is not read-only`);
  const volume = workload.pod.volumes?.find((candidate) => candidate.name === mount.name);
  const sources =
    volume?.projected?.sources?.map((source) => source.configMap?.name) ??
    (volume?.configMap ? [volume.configMap.name] : []);
  if (sources.length === 0) problems.push(`${name}: volume ${mount.name} is not made of ConfigMaps`);
  const files: ConfigText[] = [];
  for (const source of sources) {
    const configMap = objects.find((object) => object.kind === 'ConfigMap' && object.metadata.name === source);
    if (!configMap) {
      problems.push(`${name}: ConfigMap ${String(source)} is not rendered`);
      continue;
    }
    for (const [file, text] of Object.entries((configMap['data'] ?? {}) as Record<string, string>)) {
      const full = path.posix.join(configPath, file);
      if (files.some((existing) => existing.file === full))
        problems.push(`${name}: two ConfigMaps project ${file} into one directory`);
      files.push({ file: full, text });
    }
  }
  return { files, problems };
}

/** The schedules as the apps would load them, or the errors the scheduler's own validation reports. */
export function loadedSchedules(objects: readonly KubeObject[]): {
  config: TickwardenConfig | undefined;
  problems: string[];
} {
  const mounted = APP_COMPONENTS.map((name) => mountedSchedules(objects, name));
  const problems = mounted.flatMap((mount) => mount.problems);
  const [scheduler, worker] = mounted;
  const contents = (files: ConfigText[] = []): string => JSON.stringify(files);
  if (contents(scheduler?.files) !== contents(worker?.files))
    problems.push('the scheduler and the worker do not mount the same schedules');
  const result = validateConfigTexts(scheduler?.files ?? []);
  if (!result.ok) return { config: undefined, problems: [...problems, ...result.errors.map(formatConfigError)] };
  return { config: result.config, problems };
}

/** The schedules pass the scheduler's validation and are mounted where TICKWARDEN_CONFIG points, hot-reloadable. */
export const schedules: Policy = (objects) => loadedSchedules(objects).problems;

/** A `const NAME = 20_000;` of an app's main.ts: the drain timings live there, not in any export. */
export function sourceConstantMs(file: string, name: string): number {
  const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
  const match = new RegExp(`const ${name} = ([\\d_]+);`).exec(text);
  if (!match?.[1]) throw new Error(`${file}: no "const ${name} = <ms>;" (the grace period check reads it)`);
  return Number(match[1].replaceAll('_', ''));
}

/**
 * The longest one attempt of a schedule may run: its maxRuntime, else an http handler's timeout
 * (it bounds the whole request); `undefined` for a command or module without maxRuntime.
 */
export const longestRunMs = (schedule: TickwardenConfig['schedules'][number]): number | undefined =>
  schedule.maxRuntimeMs ?? (schedule.handler.kind === 'http' ? schedule.handler.timeoutMs : undefined);

/**
 * terminationGracePeriodSeconds of each app is above the longest leaseTtl of the schedules and
 * above how long the app may take to exit after SIGTERM: the scheduler's forced exit
 * (DRAIN_TIMEOUT_MS), the worker's TICKWARDEN_SHUTDOWN_GRACE + largest killGrace + EXIT_SLACK_MS.
 * And TICKWARDEN_SHUTDOWN_GRACE covers the longest run of every schedule (longestRunMs), so a
 * rollout or a scale-down lets running jobs end by themselves instead of aborting them; a command
 * or module schedule without maxRuntime has no such bound and fails.
 */
export const gracePeriods: Policy = (objects) => {
  const { config } = loadedSchedules(objects);
  if (!config) return ['the schedules do not load (see the schedules policy)'];
  const maxLeaseTtlMs = Math.max(0, ...config.schedules.map((schedule) => schedule.leaseTtlMs));
  const maxKillGraceMs = Math.max(
    0,
    ...config.schedules.map((schedule) => ('killGraceMs' in schedule.handler ? schedule.handler.killGraceMs : 0)),
  );
  const worker = APP_ENV_PARSERS['worker']?.(resolvedApp(objects, 'worker').env);
  const shutdownGraceMs = worker?.ok ? (worker.value as { shutdownGraceMs: number }).shutdownGraceMs : Number.NaN;
  const drainMs: Record<(typeof APP_COMPONENTS)[number], number> = {
    scheduler: sourceConstantMs('apps/scheduler/src/main.ts', 'DRAIN_TIMEOUT_MS'),
    worker: shutdownGraceMs + maxKillGraceMs + sourceConstantMs('apps/worker/src/main.ts', 'EXIT_SLACK_MS'),
  };
  const grace = Number.isFinite(shutdownGraceMs) ? formatDuration(shutdownGraceMs) : '(invalid)';
  const runs = config.schedules.flatMap((schedule) => {
    const runMs = longestRunMs(schedule);
    if (runMs === undefined)
      return [
        `worker: ${schedule.id} (${schedule.handler.kind}) sets no maxRuntime, so no shutdown grace covers it: give it one of at most TICKWARDEN_SHUTDOWN_GRACE (${grace})`,
      ];
    return runMs <= shutdownGraceMs
      ? []
      : [
          `worker: ${schedule.id} may run ${formatDuration(runMs)}, longer than TICKWARDEN_SHUTDOWN_GRACE (${grace}): a rollout or scale-down would abort it`,
        ];
  });
  return [
    ...APP_COMPONENTS.flatMap((name) => {
      const graceMs = (appWorkload(objects, name).pod.terminationGracePeriodSeconds ?? 30) * 1000;
      return [
        ...(graceMs > maxLeaseTtlMs
          ? []
          : [
              `${name}: terminationGracePeriodSeconds ${graceMs / 1000} is not above the longest leaseTtl (${maxLeaseTtlMs / 1000} s)`,
            ]),
        ...(graceMs > drainMs[name]
          ? []
          : [
              `${name}: terminationGracePeriodSeconds ${graceMs / 1000} is not above its drain (${drainMs[name] / 1000} s)`,
            ]),
      ];
    }),
    ...runs,
  ];
};

/** The worker's gauge of runs in progress, which its HPA scales on (a Pods metric through an adapter). */
export const ACTIVE_RUNS_METRIC = 'tickwarden_worker_active_runs';
/** The shortest scale-down stabilization window of a worker HPA, seconds: a lull between bursts removes no pod. */
export const MIN_SCALE_DOWN_STABILIZATION_S = 300;

interface HpaSpec {
  scaleTargetRef: { kind: string; name: string };
  metrics?: {
    type: string;
    pods?: { metric: { name: string }; target: { type: string; averageValue?: string | number } };
  }[];
  behavior?: { scaleDown?: { stabilizationWindowSeconds?: number } };
}

/**
 * A HorizontalPodAutoscaler of the worker scales on runs in progress per pod
 * (ACTIVE_RUNS_METRIC, an AverageValue above 0 and below TICKWARDEN_WORKER_CONCURRENCY, so pods
 * are added before a queue's slots are all taken: HTTP-bound jobs do not drive CPU), scales down
 * after a stabilization window of at least MIN_SCALE_DOWN_STABILIZATION_S, and owns the replica
 * count (the Deployment sets none).
 */
export const workerAutoscaling: Policy = (objects) => {
  const worker = appWorkload(objects, 'worker');
  const hpas = objects.filter(
    (object) =>
      object.kind === 'HorizontalPodAutoscaler' &&
      (object['spec'] as HpaSpec).scaleTargetRef.kind === 'Deployment' &&
      (object['spec'] as HpaSpec).scaleTargetRef.name === worker.name,
  );
  const parsed = APP_ENV_PARSERS['worker']?.(resolvedApp(objects, 'worker').env);
  const concurrency = parsed?.ok ? (parsed.value as { concurrency: number }).concurrency : Number.NaN;
  return hpas.flatMap((hpa) => {
    const at = `HorizontalPodAutoscaler/${hpa.metadata.name}`;
    const spec = hpa['spec'] as HpaSpec;
    const problems: string[] = [];
    const metric = spec.metrics?.find(
      (candidate) => candidate.type === 'Pods' && candidate.pods?.metric.name === ACTIVE_RUNS_METRIC,
    )?.pods?.target;
    const target = metric?.type === 'AverageValue' ? cpuCores(String(metric.averageValue ?? '')) : Number.NaN;
    if (!metric)
      problems.push(`${at}: no Pods metric ${ACTIVE_RUNS_METRIC}: HTTP-bound jobs fill a worker without using CPU`);
    else if (!(target > 0 && target < concurrency))
      problems.push(
        `${at}: ${ACTIVE_RUNS_METRIC} target must be an AverageValue above 0 and below TICKWARDEN_WORKER_CONCURRENCY (${concurrency}), got ${metric.type} ${String(metric.averageValue ?? '')}`,
      );
    const window = spec.behavior?.scaleDown?.stabilizationWindowSeconds ?? 300;
    if (window < MIN_SCALE_DOWN_STABILIZATION_S)
      problems.push(`${at}: scale-down stabilization window ${window} s is below ${MIN_SCALE_DOWN_STABILIZATION_S} s`);
    if (worker.replicas !== undefined)
      problems.push(
        `${worker.kind}/${worker.name}: sets replicas (${worker.replicas}) while ${at} owns them: every apply would reset them`,
      );
    return problems;
  });
};

/**
 * Each app container runs its compiled `dist/main.js` with the node flags of `PROCESS_NODE_FLAGS`
 * (the benchmark and the local stack use the same flags); the launcher, the worker app's code,
 * runs its compiled launcher with the worker's flags (`PROCESS_NODE_FLAGS` has no entry of its own).
 */
export const nodeFlags: Policy = (objects) => {
  const launcher = launcherContainer(objects);
  const checks = [
    ...APP_COMPONENTS.map((name) => ({
      name,
      args: mainContainer(appWorkload(objects, name)).args ?? [],
      expected: [...PROCESS_NODE_FLAGS[name], `apps/${name}/dist/main.js`],
      source: "PROCESS_NODE_FLAGS of @tickwarden/runtime, then the app's compiled main",
    })),
    ...(launcher
      ? [
          {
            name: LAUNCHER,
            args: launcher.args ?? [],
            expected: [...PROCESS_NODE_FLAGS.worker, LAUNCHER_MAIN],
            source: "the worker's PROCESS_NODE_FLAGS of @tickwarden/runtime, then the launcher's compiled main",
          },
        ]
      : []),
  ];
  return checks.flatMap(({ name, args, expected, source }) =>
    JSON.stringify(args) === JSON.stringify(expected)
      ? []
      : [`${name}: args ${JSON.stringify(args)}, expected ${JSON.stringify(expected)} (${source})`],
  );
};

// ---- the launcher ---------------------------------------------------------------------------

/** The mount that holds `dir` in `container` (the deepest one), if any. */
function mountHolding(container: IContainer, dir: string): IVolumeMount | undefined {
  const holding = (container.volumeMounts ?? []).filter((mount) => {
    const relative = path.posix.relative(mount.mountPath, dir);
    return relative === '' || (!relative.startsWith('..') && !path.posix.isAbsolute(relative));
  });
  return holding.sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
}

/** What in a volume is a credential: a Secret, a service account token, or a CSI driver (secret stores use one). */
function credentialsIn(volume: IVolume): string[] {
  return [
    ...(volume.secret ? [`Secret ${volume.secret.secretName ?? '?'}`] : []),
    ...(volume.projected?.sources ?? []).flatMap((source) => [
      ...(source.secret ? [`Secret ${source.secret.name ?? '?'}`] : []),
      ...(source.serviceAccountToken ? ['a service account token'] : []),
    ]),
    ...(volume.csi ? [`CSI driver ${volume.csi.driver}`] : []),
  ];
}

/** A volume made of ConfigMaps only (the schedules): nothing in it is secret or written by the worker. */
const configMapsOnly = (volume: IVolume): boolean =>
  Boolean(volume.configMap) ||
  Boolean(
    volume.projected?.sources?.length &&
    volume.projected.sources.every((source) => source.configMap && Object.keys(source).length === 1),
  );

/**
 * Job programs start in the worker pod's launcher container, not in the worker's, and the
 * launcher holds no credential: the worker names the launcher's socket (TICKWARDEN_LAUNCHER_SOCKET,
 * the launcher's path), both mount one emptyDir at the socket's directory (writable by the
 * launcher); the launcher runs with a UID and GID of its own, set on its container and not the
 * worker's (so its programs cannot ptrace the worker, or read its /proc/<pid>/environ, memory or
 * root, through the shared process namespace); it takes no variable from a Secret, mounts no
 * Secret, token or CSI volume, the pod mounts no API token, and of the worker's volumes it
 * shares only the socket's and ConfigMaps: the schedules, where the worker mounts them, since
 * module files resolve next to the team files.
 */
export const launcher: Policy = (objects) =>
  component(objects, 'worker').flatMap((workload) => {
    const at = `${workload.kind}/${workload.name}`;
    const worker = mainContainer(workload);
    const workerSocket = resolveEnv(worker, objects, ENV_SOURCES).env[LAUNCHER_SOCKET_VARIABLE];
    const problems: string[] = [];
    if (workerSocket === undefined)
      problems.push(
        `${where(workload, worker)}: no ${LAUNCHER_SOCKET_VARIABLE} (the worker would start job programs itself, as its own user)`,
      );
    const sidecar = containerNamed(workload, LAUNCHER);
    if (!sidecar) return [...problems, `${at}: no ${LAUNCHER} container (job programs would run as the worker's user)`];
    const own = where(workload, sidecar);
    const volumeNamed = (name: string): IVolume | undefined =>
      workload.pod.volumes?.find((volume) => volume.name === name);

    // The socket: one path, on one emptyDir both containers mount.
    const socket = resolveEnv(sidecar, objects, ENV_SOURCES).env[LAUNCHER_SOCKET_VARIABLE];
    if (workerSocket !== undefined && socket !== undefined && workerSocket !== socket)
      problems.push(`${at}: the worker's ${LAUNCHER_SOCKET_VARIABLE} ${workerSocket} is not the launcher's ${socket}`);
    const socketPath = socket ?? workerSocket;
    let socketVolume: string | undefined;
    if (socketPath !== undefined) {
      const dir = path.posix.dirname(socketPath);
      const [workerMount, launcherMount] = [mountHolding(worker, dir), mountHolding(sidecar, dir)];
      if (
        !workerMount ||
        !launcherMount ||
        workerMount.name !== launcherMount.name ||
        (workerMount.subPath ?? '') !== (launcherMount.subPath ?? '')
      ) {
        problems.push(`${at}: the worker and the launcher do not mount one volume at ${dir}, the socket's directory`);
      } else {
        socketVolume = launcherMount.name;
        if (!volumeNamed(launcherMount.name)?.emptyDir)
          problems.push(`${at}: volume ${launcherMount.name} at the socket's directory is not an emptyDir of the pod`);
        if (launcherMount.readOnly === true)
          problems.push(`${own}: mounts ${dir} read-only, so it cannot create its socket`);
      }
    }

    // A user of its own: set on the container, not the worker's.
    const pod = workload.pod.securityContext ?? {};
    for (const [field, what] of [
      ['runAsUser', 'UID'],
      ['runAsGroup', 'GID'],
    ] as const) {
      const mine = sidecar.securityContext?.[field];
      const workers = worker.securityContext?.[field] ?? pod[field];
      if (mine === undefined)
        problems.push(`${own}: no ${field} of its own (it would run as the pod's or the image's user, the worker's)`);
      else if (mine === workers) problems.push(`${own}: runs with the worker's ${what} ${mine}`);
    }

    // No credential.
    for (const variable of sidecar.env ?? []) {
      const ref = variable.valueFrom?.secretKeyRef;
      if (ref) problems.push(`${own}: ${variable.name} comes from Secret ${ref.name ?? '?'}`);
    }
    for (const source of sidecar.envFrom ?? []) {
      if (source.secretRef) problems.push(`${own}: takes its environment from Secret ${source.secretRef.name ?? '?'}`);
    }
    if (workload.pod.automountServiceAccountToken !== false)
      problems.push(
        `${at}: automountServiceAccountToken is not false: the launcher and its programs would get an API token`,
      );
    const workerVolumes = new Set((worker.volumeMounts ?? []).map((mount) => mount.name));
    for (const mount of sidecar.volumeMounts ?? []) {
      const volume = volumeNamed(mount.name);
      if (!volume) continue;
      const credentials = credentialsIn(volume);
      for (const credential of credentials) problems.push(`${own}: mounts ${credential} (volume ${mount.name})`);
      if (
        credentials.length === 0 &&
        workerVolumes.has(mount.name) &&
        mount.name !== socketVolume &&
        !configMapsOnly(volume)
      ) {
        problems.push(
          `${own}: shares volume ${mount.name} with the worker (the programs would read what the worker writes there)`,
        );
      }
    }

    // The schedules where the worker sees them.
    const configPath = resolveEnv(worker, objects, ENV_SOURCES).env['TICKWARDEN_CONFIG'];
    const workerSchedules = worker.volumeMounts?.find((mount) => mount.mountPath === configPath);
    const launcherSchedules = sidecar.volumeMounts?.find((mount) => mount.mountPath === configPath);
    if (
      workerSchedules &&
      (launcherSchedules?.name !== workerSchedules.name ||
        launcherSchedules.readOnly !== true ||
        launcherSchedules.subPath ||
        launcherSchedules.subPathExpr)
    ) {
      problems.push(
        `${own}: does not mount volume ${workerSchedules.name} read-only at ${configPath ?? ''}, where the worker reads the schedules (module files resolve next to them)`,
      );
    }
    return problems;
  });

/** Every policy, by name: each overlay must satisfy all of them. */
export const POLICIES: Readonly<Record<string, Policy>> = {
  probes,
  resources,
  securityContext,
  pinnedImages,
  podHygiene,
  appEnvironment,
  appProbes,
  schedulerAvailability,
  lockNodes,
  lockRestartDelay,
  queueRedis,
  redisMemory,
  redisNetworkPolicy,
  appNetworkPolicy,
  schedules,
  gracePeriods,
  workerAutoscaling,
  nodeFlags,
  launcher,
};
