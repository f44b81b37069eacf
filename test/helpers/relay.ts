import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, statSync, type Dirent } from 'node:fs';
import { request } from 'node:http';
import { createServer, connect, type Socket } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { startPostgres, type Postgres } from '../../scripts/harness.js';
import { FileRelayStorage } from '../../src/relay/file-storage.js';
import { startRelayServer, type RunningRelay } from '../../src/relay/node-host.js';
import { PgRelayStorage } from '../../src/relay/postgres-storage.js';
import type { RelayEvent } from '../../src/relay/relay.js';
import type { RelayStorage } from '../../src/relay/storage.js';
import { RelayClient, type RelayClientEvent, type RelayClientOptions, type RelayedDelivery, type Verdict } from '../../src/relay/client.js';
import { signDelivery } from '../../src/signing/index.js';
import { systemClock, type Clock } from '../../src/util/clock.js';
import { tempDir } from './cli.js';
import { manualClock, type ManualClock } from './clock.js';
import { startWorkerdRelay, type WorkerdRelay } from './workerd.js';

/**
 * A relay under test, whichever its host: the Worker in workerd (its Durable Object's SQLite on disk), or
 * the Node host in this process over a folder or a PostgreSQL schema. The same tests drive each.
 */
export interface RelayUnderTest {
  name: string;
  url: string;
  /** Stops it as a crash would (workerd: SIGKILL; in-process: its server closed at once), keeping its storage. */
  crash(): Promise<void>;
  /** Starts it again over the same storage, at the same address. */
  start(): Promise<void>;
  /** Everything it logged. */
  log(): string;
  /** How many deliveries its storage holds, read from the storage itself (not from the relay). */
  stored(): Promise<number>;
  /**
   * Makes everything it holds `ms` older (deliveries and channels), then lets it look: what is past --keep
   * goes. It adds up; for the Node host it moves the relay's clock forward for good (deliveries signed
   * now are then stale to it).
   */
  age(ms: number): Promise<void>;
  close(): Promise<void>;
}

export interface RelayConfig {
  token: string;
  maxBytes: number;
}

/**
 * Runs SQL on a SQLite file (the Durable Object's storage) and returns what it printed: through Bun's
 * built-in SQLite, since Bun comes from npm (the sqlite3 program would be one more to install, and Node 20
 * has no SQLite of its own). Each row's columns joined by `|`, one row a line, as sqlite3 prints them.
 */
function sqlite(file: string, query: string): string {
  const script =
    "import { Database } from 'bun:sqlite'; const db = new Database(process.argv[1]); const out = []; for (const q of process.argv[2].split(';').map((x) => x.trim()).filter(Boolean)) out.push(...db.query(q).values().map((r) => r.join('|'))); db.close(); console.log(out.join('\\n'));";
  return execFileSync(join(import.meta.dirname, '../../node_modules/.bin/bun'), ['-e', script, file, query], { encoding: 'utf8' }).trim();
}

export async function workerdRelay(config: RelayConfig): Promise<RelayUnderTest & { workerd: WorkerdRelay }> {
  const w = await startWorkerdRelay({ token: config.token, vars: { RELAY_MAX_BYTES: String(config.maxBytes) } });
  const sql = (query: string) => sqlite(w.database(), query);
  return {
    name: 'the Worker (workerd, Durable Object on disk)',
    workerd: w,
    url: w.url,
    crash: () => w.stop('SIGKILL'),
    start: () => w.start(),
    log: w.output,
    stored: async () => Number(sql('SELECT count(*) FROM deliveries')),
    async age(ms) {
      // rows backdated in the Durable Object's own SQLite, while workerd is stopped (its clock cannot be moved)
      await w.stop('SIGTERM');
      sql(`UPDATE deliveries SET received_at = received_at - ${ms}; UPDATE channels SET last_seen_at = last_seen_at - ${ms}, created_at = created_at - ${ms};`);
      await w.start();
    },
    close: () => w.stop('SIGKILL'),
  };
}

/** A wall clock the test can move forward (and back), which otherwise runs as the machine's. */
function shiftedClock(): Clock & { shift(ms: number): void } {
  let offset = 0;
  return { now: () => Date.now() + offset, monotonic: () => performance.now() + offset, after: systemClock.after, shift: (ms) => (offset += ms) };
}

async function nodeRelay(name: string, config: RelayConfig, open: () => Promise<RelayStorage>, stored: () => Promise<number>, done: () => Promise<void>): Promise<RelayUnderTest> {
  const clock = shiftedClock();
  const lines: string[] = [];
  let storage = await open();
  let running: RunningRelay | undefined;
  let port = 0;
  const start = async () => {
    storage ??= await open();
    running = await startRelayServer({ host: '127.0.0.1', port, storage, token: config.token, maxBytes: config.maxBytes, clock, onEvent: (e: RelayEvent) => lines.push(JSON.stringify(e)) });
    port = running.port;
  };
  const stop = async () => {
    await running?.close();
    await storage.close();
    running = undefined;
    storage = undefined as unknown as RelayStorage;
  };
  await start();
  return {
    name,
    get url() {
      return `http://127.0.0.1:${port}`;
    },
    crash: stop,
    start,
    log: () => lines.join('\n'),
    stored,
    async age(ms) {
      clock.shift(ms);
      await stop();
      await start();
    },
    async close() {
      await stop();
      await done();
    },
  };
}

/** `memoryBytes` 0: every delivery handed over is read from its file (the path after a restart, or past the copy's budget). */
export async function nodeFileRelay(config: RelayConfig, memoryBytes?: number): Promise<RelayUnderTest> {
  const dir = tempDir('wxhooks-relay-files-');
  const count = (d: string): number => readdirSync(d, { withFileTypes: true }).reduce((n, e) => n + (e.isDirectory() ? count(join(d, e.name)) : e.name.endsWith('.dlv') ? 1 : 0), 0);
  return nodeRelay(
    'the Node host, file store',
    config,
    () => FileRelayStorage.open({ dir, memoryBytes }),
    async () => count(dir),
    async () => undefined,
  );
}

/**
 * The Node host over PostgreSQL: on `server` when given (the full tier's shared server: a database of the
 * file's own, from sharedPostgres), else on a server of its own, removed with the relay.
 */
export async function nodePostgresRelay(config: RelayConfig, server?: Pick<Postgres, 'url' | 'remove'>): Promise<RelayUnderTest> {
  server ??= await startPostgres();
  const schema = `relay_${randomBytes(4).toString('hex')}`;
  // harness.startPostgres waits for the port: on a loaded machine the server may still say it is starting up (57P03)
  let admin: pg.Client;
  for (let i = 0; ; i++) {
    admin = new pg.Client({ connectionString: server.url });
    try {
      await admin.connect();
      break;
    } catch (err) {
      await admin.end().catch(() => undefined);
      if ((err as { code?: string }).code !== '57P03' || i > 100) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return nodeRelay(
    'the Node host, PostgreSQL store',
    config,
    () => PgRelayStorage.open({ url: server.url, schema }),
    async () => Number((await admin.query(`SELECT count(*) AS n FROM "${schema}".deliveries`)).rows[0].n),
    async () => {
      await admin.end();
      await server.remove();
    },
  );
}

/** A folder's size on disk, every file in it. */
export function folderBytes(dir: string): number {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0; // removed while it was counted
  }
  return entries.reduce((n, e) => n + (e.isDirectory() ? folderBytes(join(dir, e.name)) : fileBytes(join(dir, e.name))), 0);
}

/** A file's size on disk, or 0 when it went away meanwhile (a temporary file renamed into place). */
function fileBytes(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** A delivery as the service sends it, signed now (or at `timestamp`) with `secret`. */
export function delivery(secret: string, trigger: string, o: { timestamp?: number; pad?: number; extra?: Record<string, string> } = {}): { headers: Record<string, string>; body: Buffer } {
  const body = Buffer.from(
    JSON.stringify({
      type: 'forecast_hour.available',
      webhook_id: '7',
      subscription_id: '3',
      trigger_id: trigger,
      created_at: '2026-11-24T06:00:00Z',
      test: false,
      data: { model: 'wm-6', forecast_hour: 6, pad: 'é'.repeat(o.pad ?? 0) },
    }),
  );
  return { headers: { 'content-type': 'application/json', ...o.extra, ...signDelivery({ secret, body, triggerId: trigger, timestamp: o.timestamp }) }, body };
}

export interface Answered {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request with exactly these headers and bytes; a connection cut before the answer resolves status 0. */
export function send(url: string, method: string, headers: Record<string, string>, body?: Buffer | string): Promise<Answered> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', () => resolve({ status: 0, headers: {}, body: '' }));
    req.end(body);
  });
}

/** A relay client driven by a clock the test moves, recording what it was handed and what it said. */
export interface Listener {
  client: RelayClient;
  clock: ManualClock;
  got: RelayedDelivery[];
  events: RelayClientEvent[];
  /** Resolves once `predicate` holds (checked at each delivery and event). */
  until(predicate: () => boolean, what: string): Promise<void>;
  triggers(): string[];
}

export function listener(options: Omit<RelayClientOptions, 'onDelivery' | 'onEvent' | 'clock'> & { handle?: (d: RelayedDelivery) => Verdict | Promise<Verdict> }): Listener {
  const clock = manualClock(Date.now());
  const got: RelayedDelivery[] = [];
  const events: RelayClientEvent[] = [];
  const waiters = new Set<() => void>();
  const notify = () => [...waiters].forEach((w) => w());
  const client = new RelayClient({
    ...options,
    clock,
    onDelivery: async (d) => {
      got.push(d);
      notify();
      return options.handle ? options.handle(d) : true;
    },
    onEvent: (e) => {
      events.push(e);
      notify();
    },
  });
  return {
    client,
    clock,
    got,
    events,
    triggers: () => got.map((d) => (JSON.parse(Buffer.from(d.body).toString('utf8')) as { trigger_id: string }).trigger_id),
    until: (predicate, what) =>
      new Promise<void>((resolve, reject) => {
        // a guard against a hang, with what was seen: the test itself never waits on the clock
        const guard = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out waiting for ${what}; got ${got.length} deliveries, events ${JSON.stringify(events)}`));
        }, 20_000);
        const check = () => {
          if (!predicate()) return;
          clearTimeout(guard);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      }),
  };
}

/** A TCP proxy to `port`: cuts its connections when told, after a number of bytes from the relay. */
export async function tcpProxy(
  port: number,
): Promise<{ port: number; cutAfter(bytes: number): Promise<void>; cutNow(): void; silence(on: boolean): void; forwarded(): Promise<number>; close(): Promise<void> }> {
  const pairs = new Set<[Socket, Socket]>();
  let cut: { after: number; done: () => void } | undefined;
  /** Nothing gets through either way, and nothing is closed: a network that went away without a word. */
  let silent = false;
  /** Bytes passed on from the relay, and who waits for more. */
  let fromRelay = 0;
  const waiting = new Set<() => void>();
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    let seen = 0;
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    client.on('close', () => (upstream.destroy(), pairs.delete(pair)));
    upstream.on('close', () => client.destroy());
    client.on('data', (d: Buffer) => {
      if (!silent) upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (silent) return;
      fromRelay += d.length;
      [...waiting].forEach((w) => w());
      seen += d.length;
      if (cut && seen >= cut.after) {
        const c = cut;
        cut = undefined;
        // a part of this chunk gets through, as it would when a network goes away mid-frame
        client.write(d.subarray(0, Math.floor(d.length / 2)), () => {
          client.destroy();
          upstream.destroy();
          c.done();
        });
        return;
      }
      client.write(d);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    cutAfter: (after) => new Promise<void>((done) => (cut = { after, done })),
    /** Resolves with the bytes passed on from the relay so far, once more come than when it was called. */
    forwarded: () => {
      const now = fromRelay;
      return new Promise<number>((resolve) => {
        const w = () => {
          if (fromRelay === now) return;
          waiting.delete(w);
          resolve(fromRelay);
        };
        waiting.add(w);
      });
    },
    silence: (on) => {
      silent = on;
    },
    cutNow: () => {
      for (const [a, b] of pairs) a.destroy(), b.destroy();
    },
    close: () => {
      for (const [a, b] of pairs) a.destroy(), b.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
