// The launcher process: starts the worker's programs under its own user (see launcher-server.ts).
// `--check`: exits 0 when the launcher on TICKWARDEN_LAUNCHER_SOCKET answers, 1 otherwise (a probe).
import { parseLauncherEnv } from '@tickwarden/config';
import { envValid, processLogger, runMain, untilStopSignal } from '@tickwarden/runtime';
import { CommandGuard } from './command-guard.ts';
import { RemoteLauncher } from './launcher-client.ts';
import { LauncherServer } from './launcher-server.ts';

async function main(): Promise<number> {
  const env = parseLauncherEnv(process.env);
  if (!envValid(env)) return 2;
  const { socketPath, logLevel } = env.value;
  if (process.argv.includes('--check')) return (await new RemoteLauncher(socketPath).check()) ? 0 : 1;
  const logger = processLogger(logLevel, { launcher: process.pid });
  const guard = new CommandGuard({ logger });
  guard.start();
  await guard.ready();
  const server = new LauncherServer({ socketPath, logger, guard });
  await server.start();
  logger.info({ socketPath, guardPid: guard.pid }, 'launcher listening');
  await untilStopSignal();
  // The worker got the same signal and drains its runs (shutdown grace, kill grace): their programs run here.
  logger.info('stopping: once no program runs');
  await server.idle();
  await server.close();
  await guard.close();
  logger.info('stopped');
  return 0;
}

runMain('launcher', main);
