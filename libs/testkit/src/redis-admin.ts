import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { LOOPBACK } from './free-port.ts';

/** Runs one command on a fresh connection that fails instead of retrying, and closes it. */
async function adminCommand(
  port: number,
  password: string | undefined,
  args: [string, ...string[]],
  timeoutMs: number,
): Promise<unknown> {
  const client = new Redis({
    host: LOOPBACK,
    port,
    password,
    lazyConnect: true,
    enableReadyCheck: false,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  // ioredis' own timeouts do not cover every phase of a connect to a paused server: bound the whole call.
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${args[0]} on 127.0.0.1:${port} timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    const [name, ...rest] = args;
    return await Promise.race([client.connect().then(() => client.call(name, ...rest)), deadline]);
  } finally {
    clearTimeout(timer);
    client.disconnect();
  }
}

/** Parses INFO output (`field:value` lines, `#` section headers) into a record. */
function parseInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

/** `INFO [section]` of the server on `port`, parsed; rejects when it does not answer within `timeoutMs`. */
export async function readInfo(
  port: number,
  password: string | undefined,
  section: string | undefined,
  timeoutMs: number,
): Promise<Record<string, string>> {
  return parseInfo(String(await adminCommand(port, password, section ? ['INFO', section] : ['INFO'], timeoutMs)));
}

/** The URL of a server on 127.0.0.1, with the default user's password when it has one. */
export function loopbackUrl(scheme: 'redis' | 'rediss', port: number, password: string | undefined): string {
  const auth = password ? `:${encodeURIComponent(password)}@` : '';
  return `${scheme}://${auth}${LOOPBACK}:${port}`;
}

/** PEM files of a test CA and of the server and client certificates it signed. */
export interface TestCertificates {
  ca: string;
  server: { cert: string; key: string };
  client: { cert: string; key: string };
}

/**
 * A private CA made with openssl in `dir`, and the certificates it signs: a server certificate for
 * 127.0.0.1 and a client certificate (for servers with `tls-auth-clients yes`). Valid two days.
 */
export function makeTestCertificates(dir: string): TestCertificates {
  const file = (name: string) => path.join(dir, name);
  const run = (args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  run([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=tickwarden-test-ca',
    '-keyout',
    file('ca.key'),
    '-out',
    file('ca.crt'),
  ]);
  const issue = (name: string, extensions: string): { cert: string; key: string } => {
    run([
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      file(`${name}.key`),
      '-out',
      file(`${name}.csr`),
    ]);
    writeFileSync(file(`${name}.ext`), extensions);
    run([
      'x509',
      '-req',
      '-in',
      file(`${name}.csr`),
      '-CA',
      file('ca.crt'),
      '-CAkey',
      file('ca.key'),
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      file(`${name}.ext`),
      '-out',
      file(`${name}.crt`),
    ]);
    return { cert: file(`${name}.crt`), key: file(`${name}.key`) };
  };
  return {
    ca: file('ca.crt'),
    server: issue('server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'),
    client: issue('client', 'extendedKeyUsage=clientAuth\n'),
  };
}

/** The argv every driver gives redis-server, so both drivers behave the same. */
export function redisServerArgs(
  port: number,
  dir: string,
  aof: boolean,
  password: string | undefined,
  extra: readonly string[],
): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    LOOPBACK,
    '--protected-mode',
    'no',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    aof ? 'yes' : 'no',
    '--appendfsync',
    'always',
    '--loglevel',
    'notice',
    ...(password ? ['--requirepass', password] : []),
    ...extra,
  ];
}
