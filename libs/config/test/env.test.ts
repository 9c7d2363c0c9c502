import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_HTTP_DESTINATIONS,
  hostRefusal,
  parseLauncherEnv,
  parseSchedulerEnv,
  parseWorkerEnv,
  redactUrl,
  type EnvError,
  type EnvResult,
} from '../src/index.ts';

const base = {
  TICKWARDEN_CONFIG: '/etc/tickwarden',
  TICKWARDEN_LOCK_NODES: 'redis://lock-0:6379,redis://lock-1:6379,redis://lock-2:6379',
  TICKWARDEN_QUEUE_REDIS: 'redis://queue:6379/0',
};

function errorsOf<T>(result: EnvResult<T>): EnvError[] {
  if (result.ok) throw new Error('expected errors');
  return result.errors;
}

function valueOf<T>(result: EnvResult<T>): T {
  if (!result.ok) throw new Error(`expected a value, got ${JSON.stringify(result.errors)}`);
  return result.value;
}

describe('parseSchedulerEnv', () => {
  it('applies the defaults', () => {
    expect(valueOf(parseSchedulerEnv(base))).toStrictEqual({
      configPath: '/etc/tickwarden',
      lockNodes: ['redis://lock-0:6379', 'redis://lock-1:6379', 'redis://lock-2:6379'],
      lockQuorum: undefined,
      lockAllowSingle: false,
      queueRedis: 'redis://queue:6379/0',
      httpPort: 8080,
      logLevel: 'info',
      httpDestinations: DEFAULT_HTTP_DESTINATIONS,
      redisTls: { ca: undefined, cert: undefined, key: undefined },
      replicaId: hostname(),
      contestLeadMs: undefined,
      controlTokenFile: undefined,
    });
  });

  it('reads every variable, trimming values and list entries', () => {
    const value = valueOf(
      parseSchedulerEnv({
        ...base,
        TICKWARDEN_LOCK_NODES: ' redis://:s3cret@lock-0:6379 , rediss://lock-1:6380,redis://lock-2 ',
        TICKWARDEN_LOCK_QUORUM: '3',
        TICKWARDEN_REPLICA_ID: 'scheduler-7d9f-abc',
        TICKWARDEN_HTTP_PORT: '0',
        LOG_LEVEL: 'debug',
        TICKWARDEN_CONTEST_LEAD: '0s',
        UNRELATED: 'x',
      }),
    );
    expect(value).toMatchObject({
      lockNodes: ['redis://:s3cret@lock-0:6379', 'rediss://lock-1:6380', 'redis://lock-2'],
      lockQuorum: 3,
      replicaId: 'scheduler-7d9f-abc',
      contestLeadMs: 0,
      httpPort: 0,
      logLevel: 'debug',
    });
  });

  it('reports every error at once', () => {
    expect(
      errorsOf(parseSchedulerEnv({ TICKWARDEN_HTTP_PORT: '80a', LOG_LEVEL: 'verbose', TICKWARDEN_LOCK_QUORUM: 'two' })),
    ).toEqual([
      {
        variable: 'TICKWARDEN_CONFIG',
        message: 'is required: the path of a YAML file or of a directory of YAML files',
      },
      {
        variable: 'TICKWARDEN_LOCK_NODES',
        message:
          'is required: a comma-separated list of redis:// or rediss:// URLs of independent Redis masters, e.g. redis://lock-0:6379,redis://lock-1:6379,redis://lock-2:6379',
      },
      { variable: 'TICKWARDEN_LOCK_QUORUM', message: 'expected an integer, got "two"' },
      { variable: 'TICKWARDEN_QUEUE_REDIS', message: 'is required: a redis:// or rediss:// URL of the BullMQ Redis' },
      { variable: 'TICKWARDEN_HTTP_PORT', message: 'expected a port number from 0 to 65535, got "80a"' },
      {
        variable: 'LOG_LEVEL',
        message: 'expected one of fatal, error, warn, info, debug, trace, silent, got "verbose"',
      },
    ]);
  });

  it('reads the http destination policy, naming the variable of each bad entry', () => {
    const { httpDestinations } = valueOf(
      parseSchedulerEnv({
        ...base,
        TICKWARDEN_HTTP_ALLOW: '10.0.0.0/8, *.Corp.example',
        TICKWARDEN_HTTP_DENY: 'db.corp.example',
      }),
    );
    expect(hostRefusal(httpDestinations, 'api.corp.example')).toBeUndefined();
    expect(hostRefusal(httpDestinations, 'db.corp.example')).toBe(
      'host db.corp.example is denied (TICKWARDEN_HTTP_DENY)',
    );
    expect(hostRefusal(httpDestinations, '10.1.2.3')).toBeUndefined();
    expect(hostRefusal(httpDestinations, '192.168.0.1')).toBe('address 192.168.0.1 is not in TICKWARDEN_HTTP_ALLOW');
    expect(hostRefusal(httpDestinations, '169.254.169.254')).toBe(
      'address 169.254.169.254 is link-local (cloud metadata lives there): always denied',
    );
    expect(
      errorsOf(
        parseSchedulerEnv({ ...base, TICKWARDEN_HTTP_ALLOW: '10.0.0.0/33', TICKWARDEN_HTTP_DENY: 'not a host' }),
      ),
    ).toEqual([
      {
        variable: 'TICKWARDEN_HTTP_ALLOW',
        message: 'entry "10.0.0.0/33": expected an address or a CIDR such as 10.0.0.0/8 (prefix 0-32)',
      },
      {
        variable: 'TICKWARDEN_HTTP_DENY',
        message: 'entry "not a host": expected a CIDR (10.0.0.0/8), an address, a host name or *.domain',
      },
    ]);
  });

  it('treats empty and blank values as unset', () => {
    const errors = errorsOf(
      parseSchedulerEnv({ ...base, TICKWARDEN_CONFIG: '', TICKWARDEN_LOCK_NODES: '  ', TICKWARDEN_HTTP_PORT: '' }),
    );
    expect(errors.map((error) => error.variable)).toEqual(['TICKWARDEN_CONFIG', 'TICKWARDEN_LOCK_NODES']);
  });

  it('rejects an even number of lock nodes unless the quorum is set explicitly', () => {
    const four = { ...base, TICKWARDEN_LOCK_NODES: 'redis://a:6379,redis://b:6379,redis://c:6379,redis://d:6379' };
    expect(errorsOf(parseSchedulerEnv(four))).toEqual([
      {
        variable: 'TICKWARDEN_LOCK_NODES',
        message:
          '4 lock nodes is an even count: a majority is 3, so it survives 1 failed node, no more than 3 nodes would; use an odd count, or set TICKWARDEN_LOCK_QUORUM explicitly (3 to 4)',
      },
    ]);
    expect(valueOf(parseSchedulerEnv({ ...four, TICKWARDEN_LOCK_QUORUM: '3' })).lockQuorum).toBe(3);
    expect(valueOf(parseSchedulerEnv({ ...four, TICKWARDEN_LOCK_QUORUM: '4' })).lockQuorum).toBe(4);
    expect(errorsOf(parseSchedulerEnv({ ...four, TICKWARDEN_LOCK_QUORUM: '2' }))).toEqual([
      {
        variable: 'TICKWARDEN_LOCK_QUORUM',
        message: 'expected an integer greater than half the 4 lock nodes and at most 4 (3 to 4), got 2',
      },
    ]);
    expect(
      errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_LOCK_NODES: 'redis://a,redis://b' })).map(
        (error) => error.variable,
      ),
    ).toEqual(['TICKWARDEN_LOCK_NODES']);
  });

  it.each([
    ['1', false],
    ['2', true],
    ['3', true],
    ['4', false],
    ['0', false],
    ['2.5', false],
  ])('with 3 lock nodes, quorum %s is valid: %s', (quorum, valid) => {
    expect(parseSchedulerEnv({ ...base, TICKWARDEN_LOCK_QUORUM: quorum }).ok).toBe(valid);
  });

  it('reads the contest lead as a duration', () => {
    expect(valueOf(parseSchedulerEnv({ ...base, TICKWARDEN_CONTEST_LEAD: '2.5s' })).contestLeadMs).toBe(2500);
    expect(errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_CONTEST_LEAD: '5' }))).toEqual([
      {
        variable: 'TICKWARDEN_CONTEST_LEAD',
        message: 'expected a duration of at most 1h such as 20s or 1m30s, got "5"',
      },
    ]);
    expect(valueOf(parseSchedulerEnv({ ...base, TICKWARDEN_CONTEST_LEAD: '1h' })).contestLeadMs).toBe(3_600_000);
    expect(errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_CONTEST_LEAD: '1000d' }))).toEqual([
      {
        variable: 'TICKWARDEN_CONTEST_LEAD',
        message: 'expected a duration of at most 1h such as 20s or 1m30s, got "1000d"',
      },
    ]);
  });

  it('reads the control token file as an absolute path (the file itself is read by the scheduler at start)', () => {
    expect(
      valueOf(parseSchedulerEnv({ ...base, TICKWARDEN_CONTROL_TOKEN_FILE: ' /var/run/tickwarden/control/token ' }))
        .controlTokenFile,
    ).toBe('/var/run/tickwarden/control/token');
    expect(errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_CONTROL_TOKEN_FILE: 'token' }))).toEqual([
      { variable: 'TICKWARDEN_CONTROL_TOKEN_FILE', message: 'expected an absolute path, got "token"' },
    ]);
  });

  it('refuses a single lock node unless TICKWARDEN_LOCK_ALLOW_SINGLE=1 (then says so in lockAllowSingle)', () => {
    expect(errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_LOCK_NODES: 'redis://localhost:6379' }))).toEqual([
      {
        variable: 'TICKWARDEN_LOCK_NODES',
        message:
          'one lock node is a single point of failure and no quorum: use 3 or 5 independent Redis masters, or set TICKWARDEN_LOCK_ALLOW_SINGLE=1 to run on one anyway (development only)',
      },
    ]);
    expect(
      valueOf(
        parseSchedulerEnv({
          ...base,
          TICKWARDEN_LOCK_NODES: 'redis://localhost:6379',
          TICKWARDEN_LOCK_ALLOW_SINGLE: '1',
        }),
      ),
    ).toMatchObject({ lockNodes: ['redis://localhost:6379'], lockAllowSingle: true });
  });

  it('counts every loopback name of one port as one server, and refuses a queue Redis that is a lock node', () => {
    const loopback = parseSchedulerEnv({
      ...base,
      TICKWARDEN_LOCK_NODES:
        'redis://localhost:7001,redis://127.0.0.1:7001,redis://[::1]:7001,redis://127.1:7001,redis://127.0.0.1:7002',
    });
    expect(errorsOf(loopback).map((error) => error.message)).toEqual([
      'entries 1 and 2 are the same Redis server (loopback:7001): the lock masters must be independent',
      'entries 1 and 3 are the same Redis server (loopback:7001): the lock masters must be independent',
      'entries 1 and 4 are the same Redis server (loopback:7001): the lock masters must be independent',
    ]);
    expect(errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_QUEUE_REDIS: 'redis://LOCK-1:6379/2' }))).toEqual([
      {
        variable: 'TICKWARDEN_QUEUE_REDIS',
        message: 'is the same Redis server as TICKWARDEN_LOCK_NODES entry 2: the queue Redis must not be a lock node',
      },
    ]);
  });

  it('rejects empty entries, URLs that are not redis(s), and the same server twice', () => {
    expect(
      errorsOf(
        parseSchedulerEnv({
          ...base,
          TICKWARDEN_LOCK_NODES: 'redis://a,,http://b:80,redis://A:6379,redis:///0,redis://c/x',
        }),
      ),
    ).toEqual([
      {
        variable: 'TICKWARDEN_LOCK_NODES',
        message:
          'entry 2 is empty: expected a redis:// or rediss:// URL such as redis://host:6379 or rediss://host:6380/0',
      },
      {
        variable: 'TICKWARDEN_LOCK_NODES',
        message:
          'entry 3 ("http://b:80"): expected a redis:// or rediss:// URL such as redis://host:6379 or rediss://host:6380/0',
      },
      {
        variable: 'TICKWARDEN_LOCK_NODES',
        message: 'entries 1 and 4 are the same Redis server (a:6379): the lock masters must be independent',
      },
      { variable: 'TICKWARDEN_LOCK_NODES', message: 'entry 5 ("redis:///0"): expected a host name after the scheme' },
      {
        variable: 'TICKWARDEN_LOCK_NODES',
        message: 'entry 6 ("redis://c/x"): expected nothing or a database number (/0) after the host and port',
      },
    ]);
    expect(
      errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_LOCK_NODES: ',' })).map((error) => error.message.slice(0, 13)),
    ).toEqual(['entry 1 is em', 'entry 2 is em']);
  });

  it('never puts a password in a message', () => {
    const password = 'hunter2-Pa55';
    const errors = errorsOf(
      parseSchedulerEnv({
        TICKWARDEN_CONFIG: '/etc/tickwarden',
        // a wrong scheme, a password the URL parser cannot read, a URL without a scheme, a duplicate
        TICKWARDEN_LOCK_NODES: `http://admin:${password}@a:6379,redis://admin:${password}/x@b,admin:${password}@c:6379,redis://:${password}@d,redis://:${password}@d`,
        TICKWARDEN_QUEUE_REDIS: `redis://worker:${password}@queue:6379/x`,
        TICKWARDEN_LOCK_QUORUM: `redis://:${password}@oops`,
        TICKWARDEN_HTTP_PORT: `redis://user:${password}@swapped:6379`,
        LOG_LEVEL: `rediss://user:${password}@swapped`,
      }),
    );
    expect(errors.map((error) => error.variable)).toEqual([
      'TICKWARDEN_LOCK_NODES',
      'TICKWARDEN_LOCK_NODES',
      'TICKWARDEN_LOCK_NODES',
      'TICKWARDEN_LOCK_NODES',
      'TICKWARDEN_LOCK_QUORUM',
      'TICKWARDEN_QUEUE_REDIS',
      'TICKWARDEN_HTTP_PORT',
      'LOG_LEVEL',
    ]);
    const text = JSON.stringify(errors);
    expect(text).not.toContain(password);
    expect(text).not.toContain('hunter2');
    expect(errors[0]?.message).toContain('"http://admin:***@a:6379"');
    expect(errors[1]?.message).toBe(
      'entry 2 ("redis://admin:***@b"): not a valid URL (percent-encode any / ? # or @ in the user name and password)',
    );
    expect(errors[5]?.message).toContain('"redis://worker:***@queue:6379/x"');
  });
});

describe('parseWorkerEnv', () => {
  it('applies the defaults', () => {
    expect(valueOf(parseWorkerEnv(base))).toStrictEqual({
      configPath: '/etc/tickwarden',
      lockNodes: ['redis://lock-0:6379', 'redis://lock-1:6379', 'redis://lock-2:6379'],
      lockQuorum: undefined,
      lockAllowSingle: false,
      queueRedis: 'redis://queue:6379/0',
      httpPort: 8081,
      logLevel: 'info',
      httpDestinations: DEFAULT_HTTP_DESTINATIONS,
      redisTls: { ca: undefined, cert: undefined, key: undefined },
      concurrency: 10,
      queues: undefined,
      shutdownGraceMs: 20_000,
      stalledIntervalMs: 2500,
      secretsDir: '/var/run/tickwarden/secrets',
      launcherSocket: undefined,
    });
  });

  it('reads the Redis TLS files; a client certificate without its key, or a key without its certificate, is an error', () => {
    expect(
      valueOf(
        parseWorkerEnv({
          ...base,
          TICKWARDEN_REDIS_TLS_CA: '/tls/ca.crt',
          TICKWARDEN_REDIS_TLS_CERT: '/tls/client.crt',
          TICKWARDEN_REDIS_TLS_KEY: '/tls/client.key',
        }),
      ).redisTls,
    ).toEqual({ ca: '/tls/ca.crt', cert: '/tls/client.crt', key: '/tls/client.key' });
    expect(valueOf(parseSchedulerEnv({ ...base, TICKWARDEN_REDIS_TLS_CA: '/tls/ca.crt' })).redisTls).toEqual({
      ca: '/tls/ca.crt',
      cert: undefined,
      key: undefined,
    });
    expect(errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_REDIS_TLS_KEY: '/tls/client.key' }))).toEqual([
      {
        variable: 'TICKWARDEN_REDIS_TLS_CERT',
        message:
          'is required when TICKWARDEN_REDIS_TLS_KEY is set: a client certificate and its private key come together',
      },
    ]);
  });

  it('reads where the Secrets are mounted: an absolute path', () => {
    expect(valueOf(parseWorkerEnv({ ...base, TICKWARDEN_SECRETS_DIR: '/mnt/secrets' })).secretsDir).toBe(
      '/mnt/secrets',
    );
    expect(errorsOf(parseWorkerEnv({ ...base, TICKWARDEN_SECRETS_DIR: 'secrets' }))).toEqual([
      { variable: 'TICKWARDEN_SECRETS_DIR', message: 'expected an absolute path, got "secrets"' },
    ]);
  });

  it('reads the shutdown grace as a duration and rejects a malformed one with the others', () => {
    expect(valueOf(parseWorkerEnv({ ...base, TICKWARDEN_SHUTDOWN_GRACE: '1m30s' })).shutdownGraceMs).toBe(90_000);
    expect(valueOf(parseWorkerEnv(base)).stalledIntervalMs).toBe(2500);
    expect(valueOf(parseWorkerEnv({ ...base, TICKWARDEN_STALLED_INTERVAL: '5s' })).stalledIntervalMs).toBe(5000);
    expect(errorsOf(parseWorkerEnv({ ...base, TICKWARDEN_STALLED_INTERVAL: '500ms' }))).toEqual([
      {
        variable: 'TICKWARDEN_STALLED_INTERVAL',
        message: 'expected a duration from 1s to 10m such as 20s or 1m30s, got "500ms"',
      },
    ]);
    // Past 2^31-1 ms Node fires a timer at once: the worker would exit on SIGTERM without any grace.
    expect(
      errorsOf(parseWorkerEnv({ ...base, TICKWARDEN_SHUTDOWN_GRACE: '25d', TICKWARDEN_STALLED_INTERVAL: '1h' })),
    ).toEqual([
      {
        variable: 'TICKWARDEN_SHUTDOWN_GRACE',
        message: 'expected a duration of at most 1d such as 20s or 1m30s, got "25d"',
      },
      {
        variable: 'TICKWARDEN_STALLED_INTERVAL',
        message: 'expected a duration from 1s to 10m such as 20s or 1m30s, got "1h"',
      },
    ]);
    const errors = errorsOf(
      parseWorkerEnv({ ...base, TICKWARDEN_SHUTDOWN_GRACE: 'soon', TICKWARDEN_WORKER_CONCURRENCY: '0' }),
    );
    expect(errors.map((e) => e.variable).sort()).toEqual([
      'TICKWARDEN_SHUTDOWN_GRACE',
      'TICKWARDEN_WORKER_CONCURRENCY',
    ]);
  });

  it('reads the concurrency and the queues (deduplicated)', () => {
    const value = valueOf(
      parseWorkerEnv({
        ...base,
        TICKWARDEN_WORKER_CONCURRENCY: '32',
        TICKWARDEN_QUEUES: 'default, reports-eu,default',
      }),
    );
    expect(value.concurrency).toBe(32);
    expect(value.queues).toEqual(['default', 'reports-eu']);
  });

  it('reports every error at once, the shared variables too', () => {
    expect(
      errorsOf(
        parseWorkerEnv({
          ...base,
          TICKWARDEN_QUEUE_REDIS: 'queue:6379',
          TICKWARDEN_WORKER_CONCURRENCY: '0',
          TICKWARDEN_QUEUES: 'default,,Reports',
        }),
      ),
    ).toEqual([
      {
        variable: 'TICKWARDEN_QUEUE_REDIS',
        message:
          'expected a redis:// or rediss:// URL such as redis://host:6379 or rediss://host:6380/0, got "queue:6379"',
      },
      { variable: 'TICKWARDEN_WORKER_CONCURRENCY', message: 'expected an integer of at least 1, got "0"' },
      {
        variable: 'TICKWARDEN_QUEUES',
        message:
          'entry 2 is empty: expected queue names of 1-63 lower-case letters, digits and "-", starting with a letter or digit',
      },
      {
        variable: 'TICKWARDEN_QUEUES',
        message:
          'entry 3 is "Reports": expected queue names of 1-63 lower-case letters, digits and "-", starting with a letter or digit',
      },
    ]);
  });

  it('does not read the scheduler-only replica id', () => {
    expect(valueOf(parseWorkerEnv({ ...base, TICKWARDEN_REPLICA_ID: 'has spaces' }))).not.toHaveProperty('replicaId');
    expect(errorsOf(parseSchedulerEnv({ ...base, TICKWARDEN_REPLICA_ID: 'has spaces' }))).toEqual([
      {
        variable: 'TICKWARDEN_REPLICA_ID',
        message: 'expected a name without spaces or control characters, got "has spaces"',
      },
    ]);
  });
});

describe('redactUrl', () => {
  it.each([
    ['redis://user:secret@host:6379', 'redis://user:***@host:6379'],
    ['redis://:secret@host:6379/0', 'redis://:***@host:6379/0'],
    ['rediss://default:p%40ss@host', 'rediss://default:***@host'],
    ['https://deploy:secret@example.com/hook?x=1', 'https://deploy:***@example.com/hook?x=1'],
    ['redis://user:p@ss@host:6379', 'redis://user:***@host:6379'],
    // not parseable as a URL with a password, masked anyway
    ['redis://user:pass word@host', 'redis://user:***@host'],
    ['redis://user:pa/ss@host', 'redis://user:***@host'],
    ['user:secret@host:6379', 'user:***@host:6379'],
    // a `@` after the parser's host: the password may run up to the last one
    ['redis://:ab@cd/ef@queue:6379', 'redis://:***@queue:6379'],
    ['redis://user:ab@cd?x@queue:6379/0', 'redis://user:***@queue:6379/0'],
    // ioredis authenticates with a password query parameter
    ['redis://queue:6379/0?password=secret', 'redis://queue:6379/0?password=***'],
    ['rediss://queue:6379?tls=true&Password=s%40cret&db=1#x', 'rediss://queue:6379?tls=true&Password=***&db=1#x'],
    // nothing to mask
    ['redis://host:6379', 'redis://host:6379'],
    ['redis://user@host:6379', 'redis://user@host:6379'],
    ['https://example.com/hook?email=a@b.com', 'https://example.com/hook?email=a@b.com'],
    ['not a url', 'not a url'],
    ['', ''],
  ])('%s -> %s', (url, redacted) => {
    expect(redactUrl(url)).toBe(redacted);
  });
});

describe('parseLauncherEnv', () => {
  it('needs only its socket path: absolute, short enough for a unix socket; the worker reads the same variable, optional', () => {
    expect(valueOf(parseLauncherEnv({ TICKWARDEN_LAUNCHER_SOCKET: '/run/launcher/launcher.sock' }))).toStrictEqual({
      socketPath: '/run/launcher/launcher.sock',
      logLevel: 'info',
    });
    expect(errorsOf(parseLauncherEnv({ LOG_LEVEL: 'loud' }))).toEqual([
      { variable: 'TICKWARDEN_LAUNCHER_SOCKET', message: "is required: the path of the launcher's unix socket" },
      { variable: 'LOG_LEVEL', message: 'expected one of fatal, error, warn, info, debug, trace, silent, got "loud"' },
    ]);
    expect(errorsOf(parseLauncherEnv({ TICKWARDEN_LAUNCHER_SOCKET: `/${'x'.repeat(107)}` }))[0]?.message).toMatch(
      /^expected an absolute path of at most 107 bytes/,
    );
    expect(
      valueOf(parseWorkerEnv({ ...base, TICKWARDEN_LAUNCHER_SOCKET: '/run/launcher/launcher.sock' })).launcherSocket,
    ).toBe('/run/launcher/launcher.sock');
    expect(errorsOf(parseWorkerEnv({ ...base, TICKWARDEN_LAUNCHER_SOCKET: 'launcher.sock' }))).toEqual([
      {
        variable: 'TICKWARDEN_LAUNCHER_SOCKET',
        message: 'expected an absolute path of at most 107 bytes, got "launcher.sock"',
      },
    ]);
  });
});
