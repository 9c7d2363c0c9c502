import {
  formatConfigError,
  loadConfigOffThread,
  type HttpDestinations,
  type TickwardenConfig,
} from '@tickwarden/config';
import type { Logger } from 'pino';
import { ConfigWatcher } from './config-watcher.ts';

/** A config that follows its files: the first good load, then every good reload. */
export interface LiveConfig {
  readonly config: TickwardenConfig;
  stop(): void;
}

export interface LiveConfigOptions {
  path: string;
  logger: Logger;
  /** Called with each valid new config (never with an invalid one); the next reload waits for it. */
  onReload: (config: TickwardenConfig) => void | Promise<void>;
  /** Told `applied` or `invalid` per reload (metrics); a reload that throws counts as `invalid`. */
  onReloadResult?: (result: 'applied' | 'invalid') => void;
  /** How often the files are compared, ms. Default 2000. */
  pollMs?: number;
  /** Where http handlers may connect: a schedule the policy refuses makes the config invalid. */
  httpDestinations?: HttpDestinations | undefined;
}

/**
 * Loads the config and keeps it live. At start, an invalid config logs every
 * error and resolves undefined (the process must not start). Later, an invalid
 * reload logs its errors and keeps the last good config; so does a reload that
 * throws (in loading, validating or `onReload`), logged with the config path.
 */
export async function startLiveConfig(options: LiveConfigOptions): Promise<LiveConfig | undefined> {
  const { path, logger, onReload, onReloadResult, pollMs = 2000, httpDestinations } = options;
  let started = false;
  let changedBeforeStart = false;
  /** The config in force: a reload keeps the schedules of the files it finds unchanged. */
  let current: TickwardenConfig | undefined;
  const reload = async (): Promise<void> => {
    if (!started) {
      changedBeforeStart = true;
      return;
    }
    const reloaded = await loadConfigOffThread(path, { httpDestinations, previous: current });
    if (!reloaded.ok) {
      onReloadResult?.('invalid');
      for (const error of reloaded.errors) logger.error({ configError: error }, formatConfigError(error));
      logger.error({ errors: reloaded.errors.length }, 'config reload rejected: keeping the last good config');
      return;
    }
    await onReload(reloaded.config);
    current = reloaded.config;
    onReloadResult?.('applied');
    logger.info({ schedules: reloaded.config.schedules.length }, 'config reloaded');
  };
  const reloadFailed = (error: unknown): void => {
    onReloadResult?.('invalid');
    logger.error({ err: error, path }, `config reload of ${path} failed: keeping the last good config`);
  };
  const watcher = new ConfigWatcher(path, pollMs, reload, reloadFailed);
  // The baseline is taken before the first load, so a change made meanwhile is reloaded, never missed.
  await watcher.start();
  const loaded = await loadConfigOffThread(path, { httpDestinations });
  if (!loaded.ok) {
    watcher.stop();
    for (const error of loaded.errors) logger.error({ configError: error }, formatConfigError(error));
    logger.fatal({ errors: loaded.errors.length }, 'invalid config: not starting');
    return undefined;
  }
  started = true;
  current = loaded.config;
  // A change seen while the first load ran may not be in it: apply it once the caller has the first config.
  if (changedBeforeStart) setImmediate(() => void reload().catch(reloadFailed));
  return { config: loaded.config, stop: () => watcher.stop() };
}
