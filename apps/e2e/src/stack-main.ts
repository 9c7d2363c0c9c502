// `npm start`: the whole system on this machine - 5 lock nodes, a queue Redis, 3 scheduler
// replicas, 2 workers and an echo endpoint - with readable logs, until Ctrl-C.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  containerRuntimeAvailable,
  makeTestCertificates,
  type RedisDriver,
  type TestCertificates,
} from '@tickwarden/testkit';
import { Cluster, type AppProcess } from './cluster.ts';
import { prettyLine } from './pretty.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CONFIG_DIR = path.join(ROOT, 'examples', 'teams');
const ENV_FILE = path.join(ROOT, 'tmp', 'local-stack.env');
/** `npm start -- --tls`: a CA, server and client certificates made here at each start. */
const TLS_DIR = path.join(ROOT, 'tmp', 'local-stack-tls');
/** The web console's control token, new at each start: the replicas' consoles are writable once signed in with it. */
const CONTROL_TOKEN_FILE = path.join(ROOT, 'tmp', 'local-stack-control-token');
const SCHEDULERS = ['scheduler-1', 'scheduler-2', 'scheduler-3'];
const WORKERS = ['worker-1', 'worker-2'];
const NAME_WIDTH = 11;
const color = process.stdout.isTTY;

function print(process_: string, line: string): void {
  process.stdout.write(`${prettyLine(process_, line, { color, width: NAME_WIDTH })}\n`);
}

/** Redis as processes when `redis-server` is on PATH, else as containers when a Docker engine answers. */
async function chooseDriver(): Promise<RedisDriver | undefined> {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return 'process';
  } catch {
    return (await containerRuntimeAvailable()) ? 'container' : undefined;
  }
}

/** The endpoint the example http job calls: logs what arrived (the headers a downstream system uses to fence). */
function startEcho(port: number): Promise<Server> {
  const server = createServer((request: IncomingMessage, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      const header = (name: string): string => String(request.headers[name] ?? '');
      const record = {
        level: 30,
        time: Date.now(),
        msg: 'request',
        method: request.method,
        path: request.url,
        schedule: header('x-tickwarden-schedule'),
        tick: header('x-tickwarden-tick'),
        fence: header('x-tickwarden-fence'),
        idempotencyKey: header('idempotency-key'),
        body,
      };
      print('echo', JSON.stringify(record));
      response.writeHead(200, { 'content-type': 'application/json' }).end(`{"ok":true}\n`);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new Error(
          error.code === 'EADDRINUSE'
            ? `port ${port} is taken: set TICKWARDEN_ECHO_PORT and the url in examples/teams/demo.yaml`
            : error.message,
        ),
      ),
    );
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

/** Prints each process's new log lines as they arrive; the returned function prints what is left and stops. */
function follow(cluster: Cluster): () => void {
  const printed = new Map<AppProcess, number>();
  const flush = (): void => {
    for (const app of cluster.started) {
      const from = printed.get(app) ?? 0;
      for (const line of app.process.lines.slice(from)) print(app.name, line);
      printed.set(app, app.process.lines.length);
    }
  };
  const timer = setInterval(flush, 100);
  return () => {
    clearInterval(timer);
    flush();
  };
}

async function main(): Promise<number> {
  const driver = await chooseDriver();
  if (!driver) {
    process.stderr.write(
      'Tickwarden needs redis-server on PATH (e.g. apt-get install redis-server) or a running Docker engine.\n',
    );
    return 1;
  }
  const echoPortText = process.env['TICKWARDEN_ECHO_PORT'] ?? '8787';
  const echoPort = Number(echoPortText);
  if (!/^\d+$/.test(echoPortText) || echoPort < 1 || echoPort > 65535) {
    process.stderr.write(`TICKWARDEN_ECHO_PORT: expected a TCP port (1-65535), got "${echoPortText}"\n`);
    return 2;
  }
  const args = process.argv.slice(2);
  if (args.some((arg) => arg !== '--tls')) {
    process.stderr.write(
      `usage: npm start [-- --tls]   (unknown: ${args.filter((arg) => arg !== '--tls').join(' ')})\n`,
    );
    return 2;
  }
  const withTls = args.includes('--tls');
  if (withTls && driver !== 'process') {
    process.stderr.write('--tls needs redis-server on PATH (the container driver has no TLS option)\n');
    return 2;
  }
  let tls: TestCertificates | undefined;
  if (withTls) {
    mkdirSync(TLS_DIR, { recursive: true });
    tls = makeTestCertificates(TLS_DIR);
  }
  mkdirSync(path.dirname(CONTROL_TOKEN_FILE), { recursive: true });
  writeFileSync(CONTROL_TOKEN_FILE, `${randomBytes(16).toString('hex')}\n`, { mode: 0o600 });
  const echo = await startEcho(echoPort);
  print(
    'stack',
    `starting 5 lock nodes and a queue Redis (${driver === 'process' ? 'redis-server processes' : 'containers'}), ${SCHEDULERS.length} schedulers, ${WORKERS.length} workers; config ${path.relative(ROOT, CONFIG_DIR)}/`,
  );
  if (tls)
    print(
      'stack',
      `TLS: every Redis server requires a client certificate; CA and certificates in ${path.relative(ROOT, TLS_DIR)}/`,
    );
  const roleEnv = { scheduler: { TICKWARDEN_CONTROL_TOKEN_FILE: CONTROL_TOKEN_FILE } };
  const cluster = await Cluster.start({
    configDir: CONFIG_DIR,
    driver,
    logLevel: process.env['LOG_LEVEL'] ?? 'info',
    roleEnv,
    ...(tls ? { tls } : {}),
  });
  const stopFollowing = follow(cluster);
  const stopping = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  try {
    await Promise.all([
      ...SCHEDULERS.map((name) => cluster.startApp('scheduler', name)),
      ...WORKERS.map((name) => cluster.startApp('worker', name)),
    ]);
    mkdirSync(path.dirname(ENV_FILE), { recursive: true });
    const env = {
      TICKWARDEN_CONFIG: CONFIG_DIR,
      TICKWARDEN_QUEUE_REDIS: cluster.queueUrl,
      TICKWARDEN_LOCK_NODES: cluster.locks.urls.join(','),
      ...cluster.tlsEnv,
    };
    writeFileSync(
      ENV_FILE,
      Object.entries(env)
        .map(([name, value]) => `${name}=${value}\n`)
        .join(''),
    );
    print(
      'stack',
      `up. In another terminal: set -a; . ${path.relative(process.cwd(), ENV_FILE)}; set +a; npx tickwarden status   (Ctrl-C here stops everything)`,
    );
    const consoles = SCHEDULERS.map((name) => `http://127.0.0.1:${cluster.app(name).httpPort}/console/`).join(' ');
    print(
      'stack',
      `web console: ${consoles}   (sign in with the token in ${path.relative(process.cwd(), CONTROL_TOKEN_FILE)})`,
    );
    await stopping;
    print('stack', 'stopping: SIGTERM to every process, then the Redis nodes');
    await Promise.all(cluster.running().map((app) => cluster.stopApp(app.name)));
    return 0;
  } finally {
    stopFollowing();
    await cluster.close();
    echo.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
