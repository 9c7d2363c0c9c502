// The scheduler process: reads its environment and config, then runs one replica until SIGTERM.
import { parseSchedulerEnv, redactUrl, type TickwardenConfig } from '@tickwarden/config';
import { IoredisLockNode, Redlock, ReferenceClock, systemClock } from '@tickwarden/redlock';
import {
  boundPort,
  envValid,
  exitUnlessStoppedWithin,
  followNodeTime,
  loadRedisTls,
  packageVersion,
  processLogger,
  queueRedisOptions,
  redisOptionsFor,
  runMain,
  startHttpServer,
  startLiveConfig,
  untilStopSignal,
  verifyServers,
} from '@tickwarden/runtime';
import { Redis } from 'ioredis';
import { readControlToken } from './console-auth.ts';
import { CONSOLE_PATH } from './console-pages.ts';
import { webConsole } from './console.ts';
import { SchedulerMetrics } from './metrics.ts';
import { ScheduleStatus } from './schedule-status.ts';
import { statusApi } from './status-api.ts';
import { Scheduler } from './scheduler.ts';

/** How long the start waits for the queue Redis connection before starting without it, ms. */
const QUEUE_READY_WAIT_MS = 5_000;
/** Longest drain on SIGTERM before exiting anyway, ms (inside Kubernetes' default 30 s grace). */
const DRAIN_TIMEOUT_MS = 20_000;

async function main(): Promise<number> {
  const env = parseSchedulerEnv(process.env);
  if (!envValid(env)) return 2;
  const tls = loadRedisTls(env.value.redisTls);
  if (!envValid(tls)) return 2;
  const token = readControlToken(env.value.controlTokenFile);
  if (!envValid(token)) return 2;
  const {
    configPath,
    lockNodes,
    lockQuorum,
    queueRedis,
    replicaId,
    httpPort,
    logLevel,
    contestLeadMs,
    httpDestinations,
  } = env.value;
  const logger = processLogger(logLevel, { replica: replicaId });
  // Two names of one server would count one vote twice, or share a queue's memory with the locks.
  if (!(await verifyServers(env.value, tls.value, logger))) return 2;
  const metrics = new SchedulerMetrics();
  metrics.setBuild(packageVersion(new URL('../package.json', import.meta.url)));
  let scheduler: Scheduler | undefined;
  // The newest valid config: one may be reloaded while the HTTP server starts, before the scheduler exists.
  let config: TickwardenConfig | undefined;
  const live = await startLiveConfig({
    path: configPath,
    logger,
    onReload: async (reloaded) => {
      config = reloaded;
      await scheduler?.setSchedules(reloaded.schedules);
      await metrics.setSchedules(reloaded.schedules);
      await metrics.configApplied(reloaded);
    },
    onReloadResult: (result) => metrics.recordConfigReload(result),
    // The workers refuse such a config: the replicas must not fire its ticks either.
    httpDestinations,
  });
  if (!live) return 2;
  if (config === undefined) {
    config = live.config;
    await metrics.setSchedules(config.schedules);
    await metrics.configApplied(config);
  }

  const redlock = new Redlock(
    lockNodes.map((url) => IoredisLockNode.fromUrl(url, redisOptionsFor(url, tls.value))),
    { quorum: lockQuorum },
  );
  metrics.observe(redlock);
  redlock.on('nodeError', ({ node, operation, error }) =>
    logger.debug({ node, operation, err: error }, 'lock node error'),
  );
  // Ticks are planned, contested and judged on the lock nodes' time, which every process shares: a host clock off by any amount changes nothing.
  const clock = new ReferenceClock(redlock, systemClock);
  await followNodeTime(clock, logger);
  metrics.observeClock(clock);
  const now = (): number => Math.floor(clock.wallMicros() / 1000);
  // Fail fast while the queue Redis is down (the enqueue retries), instead of queueing commands in memory.
  const queueConnection = new Redis(queueRedis, {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    ...queueRedisOptions(queueRedis, tls.value),
  });
  queueConnection.on('error', (error) => logger.debug({ err: error }, 'queue redis error'));
  // The first contest reads the pause flags: wait for the connection a little (down, the replica starts anyway).
  // Not events.once: it rejects on the connection's first 'error' (a queue Redis down at start), which would end the process.
  const ready = new Promise<true>((resolve) => queueConnection.once('ready', () => resolve(true)));
  const connected = await Promise.race([
    ready,
    new Promise<false>((resolve) => setTimeout(resolve, QUEUE_READY_WAIT_MS, false).unref()),
  ]);
  if (!connected)
    logger.warn(
      { waitedMs: QUEUE_READY_WAIT_MS },
      'queue redis not reachable yet: starting; pause flags are read once it is',
    );
  const schedules = new ScheduleStatus({
    schedules: () => config?.schedules ?? [],
    redis: queueConnection,
    upcoming: (id, afterMs, count) => scheduler?.upcoming(id, afterMs, count) ?? [],
    now,
  });
  const consoleLogger = logger.child({ component: 'console' });
  const web = webConsole({
    schedules,
    control: { redis: queueConnection, redlock, publisherId: replicaId, logger: consoleLogger, now },
    token: token.value,
    replicaId,
  });
  // Probes answer before the schedules are planned, which takes a while for a big config (the startupProbe allows for it).
  const server = await startHttpServer(
    httpPort,
    metrics.exposition,
    async () => {
      const reasons: string[] = [];
      const probe = await redlock.probe();
      if (!probe.quorum)
        reasons.push(
          `lock quorum unreachable (${probe.reachable.length} of ${redlock.nodes.length} answer, ${redlock.quorum} needed)`,
        );
      if ((await queueConnection.ping().catch(() => 'down')) !== 'PONG') reasons.push('queue redis unreachable');
      return reasons;
    },
    { api: statusApi(schedules), pages: web.pages },
  );
  logger.info({ port: boundPort(server) }, 'http listening');
  const { controlTokenFile } = env.value;
  if (token.value !== undefined)
    consoleLogger.info(
      { path: CONSOLE_PATH, writable: true },
      'web console: writable after sign-in with the control token',
    );
  else if (controlTokenFile === undefined)
    consoleLogger.info(
      { path: CONSOLE_PATH, writable: false },
      'web console: read-only (no TICKWARDEN_CONTROL_TOKEN_FILE)',
    );
  // An optional Secret not created: read-only, said loudly; the file is read at start only.
  else
    consoleLogger.warn(
      { path: CONSOLE_PATH, writable: false, file: controlTokenFile },
      'web console: read-only: TICKWARDEN_CONTROL_TOKEN_FILE names no file (restart the replica once the Secret exists)',
    );

  scheduler = new Scheduler({
    replicaId,
    redlock,
    queueConnection,
    clock,
    logger: logger.child({ component: 'scheduler' }),
    ...(contestLeadMs === undefined ? {} : { contestLeadMs }),
    onOutcome: (event) => metrics.recordOutcome(event),
    onObservation: (observation) => metrics.observeTick(observation),
    onQueueReset: () => metrics.queueResets.inc(),
    onContenders: (contenders) => metrics.contenders.set(contenders),
  });
  await scheduler.setSchedules(config.schedules);
  scheduler.start();
  logger.info(
    {
      schedules: config.schedules.length,
      patterns: scheduler.parsedPatterns,
      files: config.files,
      lockNodes: lockNodes.map(redactUrl),
      quorum: redlock.quorum,
    },
    'scheduler started',
  );

  await untilStopSignal();
  logger.info('stopping: no new ticks; finishing in-flight enqueues');
  const stopped = exitUnlessStoppedWithin(DRAIN_TIMEOUT_MS, logger, 'drain timed out: exiting');
  live.stop();
  await scheduler.stop();
  server.close();
  await web.close();
  clock.stop();
  await redlock.close();
  queueConnection.disconnect();
  stopped();
  logger.info('stopped');
  return 0;
}

runMain('scheduler', main);
