import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { LOOPBACK } from './free-port.ts';

/** Runs one command on a fresh connection that fails instead of retrying, and closes it. */
export async function adminCommand(
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
export function parseInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

/** Writes a self-signed CA and a server certificate for 127.0.0.1 into `dir` (openssl CLI); returns the paths. */
export function makeTlsFiles(dir: string): { ca: string; cert: string; key: string } {
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
  run([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=127.0.0.1',
    '-keyout',
    file('server.key'),
    '-out',
    file('server.csr'),
  ]);
  writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  run([
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.crt'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    file('san.ext'),
    '-out',
    file('server.crt'),
  ]);
  return { ca: file('ca.crt'), cert: file('server.crt'), key: file('server.key') };
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
