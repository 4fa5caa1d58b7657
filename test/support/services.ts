import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Real PostgreSQL and Redis for the test run, started from the machine's
 * binaries on free loopback ports with throwaway data, and stopped after.
 */
export interface Service {
  url: string;
  stop(): void;
}

/**
 * A port nothing listens on, for a server a test starts in another process.
 *
 * Chosen below the kernel's ephemeral range on purpose: a port the kernel hands
 * out (`listen(0)`) comes from the same range as the source ports of every
 * outgoing connection, so in a busy run some connect() could take it between
 * this probe and the child's listen (listen EADDRINUSE, a flaky start). Ports
 * below the range are given only to those who ask for them by number.
 */
export async function freePort(): Promise<number> {
  const low = lowestEphemeralPort();
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 10_000 + Math.floor(Math.random() * (low - 10_000));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port below ${low} after 50 tries`);
}

/** Several distinct free ports, for servers that will listen at once (none is bound yet, so a probe could draw another's). */
export async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/** Where the kernel's range for ports it picks itself begins (Linux's default range: 32768-60999). */
function lowestEphemeralPort(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (low > 11_000) return low;
  } catch {
    // not Linux: the IANA dynamic range
  }
  return 49_152;
}

/** On every address: a test's server may listen on 127.0.0.1 or 0.0.0.0, and either clashes with the other. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

function postgresBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', 'initdb'))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (!newest) {
    throw new Error(
      'PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin: install the Debian package "postgresql" (or set DATABASE_URL)',
    );
  }
  return join(root, newest, 'bin');
}

const isRoot = process.getuid?.() === 0;

/** initdb and postgres refuse to run as root; run them as the postgres user then. */
function asDbUser(command: string, args: string[]): void {
  const [file, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
  const result = spawnSync(file, argv, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${command} failed: ${result.stderr || result.stdout}`);
}

/** A PostgreSQL the test can take away and bring back, on the same port and data. */
export interface PostgresServer extends Service {
  /** `fast`: pg_ctl stop -m fast (clients disconnected, clean shutdown); `kill`: SIGKILL to the server and every backend at once (a crash) */
  halt(how: 'fast' | 'kill'): Promise<void>;
  /** starts it again where it was; after a kill, PostgreSQL recovers from its WAL first */
  resume(): Promise<void>;
}

/** The postmaster and its children, from /proc: a SIGKILL must reach every backend at once, or the next start finds shared memory in use. */
function clusterProcesses(postmaster: number): number[] {
  const children = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        // the parent pid is the 2nd field after the parenthesised command name
        return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]) === postmaster;
      } catch {
        return false;
      }
    })
    .map(Number);
  return [postmaster, ...children];
}

/**
 * `durable`: commits reach the WAL before they are acknowledged (synchronous_commit
 * on), as in production; a test that kills the server needs it, or it loses what
 * the walwriter had not written yet. The shared server runs without, for speed.
 */
export async function startPostgres(options: { durable?: boolean } = {}): Promise<PostgresServer> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), 'aileron-pg-'));
  chmodSync(dir, 0o755);
  const data = join(dir, 'data');
  if (isRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  asDbUser(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const start = (): void =>
    asDbUser(join(bin, 'pg_ctl'), [
      '-D',
      data,
      '-l',
      join(dir, 'postgres.log'),
      '-w',
      '-t',
      '60',
      '-o',
      `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${dir} -c fsync=off -c synchronous_commit=${options.durable ? 'on' : 'off'} -c full_page_writes=off -c max_connections=300`,
      'start',
    ]);
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async halt(how) {
      if (how === 'fast') return asDbUser(join(bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop']);
      const processes = clusterProcesses(Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]));
      for (const pid of processes) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      for (let i = 0; i < 200 && processes.some(alive); i++) await new Promise((r) => setTimeout(r, 25));
    },
    async resume() {
      start();
    },
    stop() {
      try {
        asDbUser(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Whether a process of this machine still runs. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A Redis of the test's own, to stop and start again under a running control plane. */
export interface RedisServer extends Service {
  port: number;
  /** SIGSTOP: connections stay open and nothing is answered */
  pause(): void;
  resume(): void;
  /** SIGKILL, as a crash: everything in it is gone */
  kill(): void;
  /** a fresh redis-server on the same port, after `kill` */
  restart(): Promise<void>;
}

export async function startRedis(): Promise<RedisServer> {
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  if (which.status !== 0)
    throw new Error('redis-server not found: install the Debian package "redis-server" (or set REDIS_URL)');
  const dir = mkdtempSync(join(tmpdir(), 'aileron-redis-'));
  const port = await freePort();
  const pidfile = join(dir, 'redis.pid');
  const launch = async (): Promise<void> => {
    rmSync(pidfile, { force: true });
    execFileSync('redis-server', [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'yes',
      '--pidfile',
      pidfile,
      '--logfile',
      join(dir, 'redis.log'),
      '--dir',
      dir,
    ]);
    for (let i = 0; i < 100 && !existsSync(pidfile); i++) await new Promise((r) => setTimeout(r, 50));
    if (!existsSync(pidfile))
      throw new Error(
        `redis-server did not start on port ${port}: ${readFileSync(join(dir, 'redis.log'), 'utf8').slice(-500)}`,
      );
  };
  const pid = (): number => Number(readFileSync(pidfile, 'utf8').trim());
  const alive = (id: number): boolean => {
    try {
      process.kill(id, 0);
      return true;
    } catch {
      return false;
    }
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    pause: () => process.kill(pid(), 'SIGSTOP'),
    resume: () => process.kill(pid(), 'SIGCONT'),
    // its sockets close at once; waiting for the pid to go could block on a zombie nobody reaps
    kill: () => process.kill(pid(), 'SIGKILL'),
    restart: launch,
    stop() {
      let id = 0;
      try {
        id = pid();
        process.kill(id, 'SIGCONT');
        process.kill(id, 'SIGTERM');
      } catch {
        // already gone
      }
      // Redis writes its log while it shuts down: removing the folder under it fails with ENOTEMPTY
      for (let i = 0; id > 0 && i < 100 && alive(id); i++)
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
      rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
    },
  };
}
