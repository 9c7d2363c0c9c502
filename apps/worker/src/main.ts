// The worker process: reads its environment and config, then runs tick jobs until SIGTERM.
import { hostname } from 'node:os';
import { formatDuration, parseWorkerEnv, redactUrl } from '@tickwarden/config';
import { IoredisLockNode, Redlock, ReferenceClock, systemClock } from '@tickwarden/redlock';
import {
  boundPort,
  envValid,
  exitUnlessStoppedWithin,
  followNodeTime,
  loadRedisTls,
  packageVersion,
  processLogger,
  redisOptionsFor,
  runMain,
  startHttpServer,
  startLiveConfig,
  untilStopSignal,
  verifyServers,
} from '@tickwarden/runtime';
import { WorkerMetrics } from './metrics.ts';
import { WorkerService } from './worker-service.ts';

/** After the grace, aborted handlers get their kill grace plus this before the process exits anyway. */
const EXIT_SLACK_MS = 5_000;

async function main(): Promise<number> {
  const env = parseWorkerEnv(process.env);
  if (!envValid(env)) return 2;
  const tls = loadRedisTls(env.value.redisTls);
  if (!envValid(tls)) return 2;
  const {
    configPath,
    lockNodes,
    lockQuorum,
    queueRedis,
    httpPort,
    logLevel,
    concurrency,
    queues,
    shutdownGraceMs: graceMs,
    stalledIntervalMs,
    secretsDir,
    httpDestinations,
    launcherSocket,
  } = env.value;
  const workerId = `${hostname()}-${process.pid}`;
  const logger = processLogger(logLevel, { worker: workerId });
  // Two names of one server would count one vote twice, or share a queue's memory with the locks.
  if (!(await verifyServers(env.value, tls.value, logger))) return 2;
  const metrics = new WorkerMetrics();
  metrics.setBuild(packageVersion(new URL('../package.json', import.meta.url)));
  let service: WorkerService | undefined;
  // Invalid at start: every error logged, not starting. Later, an invalid reload keeps the last good config.
  const live = await startLiveConfig({
    path: configPath,
    logger,
    onReload: async (config) => {
      service?.setConfig(config);
      if (service) metrics.runSlots.set(concurrency * service.queues.length);
      metrics.retainSchedules(config.schedules.map((schedule) => schedule.id));
      await metrics.configApplied(config);
    },
    onReloadResult: (result) => metrics.recordConfigReload(result),
    httpDestinations,
  });
  if (!live) return 2;
  await metrics.configApplied(live.config);

  const redlock = new Redlock(
    lockNodes.map((url) => IoredisLockNode.fromUrl(url, redisOptionsFor(url, tls.value))),
    { quorum: lockQuorum },
  );
  metrics.observe(redlock);
  redlock.on('nodeError', ({ node, operation, error }) =>
    logger.debug({ node, operation, err: error }, 'lock node error'),
  );
  // Due times and start deadlines are judged on the lock nodes' time, as the replicas plan them: a host clock off by any amount changes nothing.
  const hostNow = Date.now;
  const clock = new ReferenceClock(redlock, { ...systemClock, wallMicros: () => hostNow() * 1000 });
  await followNodeTime(clock, logger);
  metrics.observeClock(clock);
  // BullMQ makes a delayed job ready by Date.now() of whichever worker looks: on the lock nodes' time here, a host clock
  // ahead makes no job ready early (which the other workers would put back, and this one make ready again, in a loop).
  Date.now = () => Math.floor(clock.wallMicros() / 1000);
  redlock.on('aborted', ({ resource, reason, validityLeftMs }) =>
    logger.warn(
      { resource, code: reason.code, validityLeftMs: Math.round(validityLeftMs) },
      'lease watchdog aborted a run',
    ),
  );
  service = new WorkerService({
    workerId,
    queueRedis,
    queueTls: tls.value,
    redlock,
    logger,
    config: live.config,
    queues,
    concurrency,
    metrics,
    stalledIntervalMs,
    now: () => Math.floor(clock.wallMicros() / 1000),
    secretsDir,
    httpDestinations,
    launcherSocket,
  });
  try {
    await service.start();
  } catch (error) {
    // Without a command guard no command may start: fail the start so the orchestrator retries it.
    logger.error(
      { err: error },
      launcherSocket === undefined
        ? 'cannot start: the command guard is not running'
        : 'cannot start: the launcher does not answer',
    );
    live.stop();
    await service.stop(0);
    clock.stop();
    await redlock.close();
    return 1;
  }
  metrics.runSlots.set(concurrency * service.queues.length);
  logger.info(
    {
      schedules: live.config.schedules.length,
      files: live.config.files,
      queues: service.queues,
      concurrency,
      lockNodes: lockNodes.map(redactUrl),
      quorum: redlock.quorum,
      queueRedis: redactUrl(queueRedis),
      shutdownGrace: formatDuration(graceMs),
      stalledInterval: formatDuration(stalledIntervalMs),
    },
    'worker started',
  );

  const running = service;
  // Readiness: the command guard, the queue Redis, a lock quorum probed now, and whether the worker takes jobs.
  const server = await startHttpServer(httpPort, metrics.registry, () => running.readiness());
  logger.info({ port: boundPort(server) }, 'http listening');

  await untilStopSignal();
  const killGraceMs = Math.max(
    0,
    ...running.config.schedules.map((schedule) =>
      'killGraceMs' in schedule.handler ? schedule.handler.killGraceMs : 0,
    ),
  );
  const stopped = exitUnlessStoppedWithin(graceMs + killGraceMs + EXIT_SLACK_MS, logger, 'shutdown timed out: exiting');
  live.stop();
  await running.stop(graceMs);
  server.close();
  clock.stop();
  await redlock.close();
  stopped();
  logger.info('stopped');
  return 0;
}

runMain('worker', main);
