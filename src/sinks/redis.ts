import { createHash, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { RedisClientType } from 'redis';
import * as DEFAULTS from '../delivery/defaults.js';
import { NotFoundError, UnreachableError, UsageError } from '../errors.js';
import { printable } from '../util/printable.js';
import { handleInbound, runSettings, type Inbound } from './consumer.js';
import { BODY_FIELD, decodeMessage, encodeMessage, type FieldName } from './message.js';
import {
  BrokerState,
  checkGroup,
  defineSink,
  SinkUnavailableError,
  watchEvery,
  type ConsumeOptions,
  type DropRisk,
  type Sink,
  type SinkConsumer,
  type SinkDefinition,
  type SinkOptions,
  type SinkTarget,
} from './sink.js';
import { entryOf, type SinkView } from './view.js';

/**
 * The Redis Streams sink: appends to a stream at most once per pair (the claim of the pair and the XADD
 * in one Lua script), consumes as a consumer group with XREADGROUP, takes over what a worker left pending
 * with XAUTOCLAIM, and moves dead letters to `STREAM:dead`. Every command goes through `sendCommand`,
 * bytes in and out, so a body is never decoded. Its client is loaded only when a redis:// URL is used.
 * The kind's definition is at the end.
 */

/** A Redis sink's own URL settings: `?db=N`, the database (the path is the stream's key). */
export interface RedisSettings {
  db: number;
}
type Target = SinkTarget<RedisSettings>;
type Client = RedisClientType;
type Reply = Buffer | number | null | Reply[];

const where = (t: Target) => `${t.host}:${t.port}`;
/** The key that remembers a pair was appended (its value: the entry's id), for the dedupe window. */
export const dedupeKeyOf = (stream: string, key: string) => `${stream}:pair:${key}`;
export const deadStreamOf = (stream: string) => `${stream}:dead`;

/**
 * Appends each message unless its pair's dedupe key is set, and sets it: the claim and the XADD in one
 * atomic step. One call takes the messages of a turn of the event loop (KEYS: the stream, then each
 * one's dedupe key; ARGV: the key's life in ms, how long entries are kept in ms (0: for ever), how many
 * messages, then each one's field count and fields); it answers {id, 1 if it was there already} for
 * each. (A call a message took 71-116 µs of CPU a 600-byte message, and was 0.5-0.6× a bare XADD's rate;
 * a call a turn 37-41 µs, and 1.2-1.7× it, measured at 64 in flight in the same run.)
 */
const PUBLISH = `
local n = tonumber(ARGV[3])
local trim = {}
if ARGV[2] ~= '0' then
  local t = redis.call('TIME')
  trim = {'MINID', '~', string.format('%d', math.max(0, tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[2])))}
end
local out = {}
local at = 4
for i = 1, n do
  local count = tonumber(ARGV[at])
  local seen = redis.call('GET', KEYS[i + 1])
  if seen then
    out[i] = {seen, 1}
  else
    local args = {KEYS[1]}
    for _, v in ipairs(trim) do args[#args + 1] = v end
    args[#args + 1] = '*'
    for j = at + 1, at + count do args[#args + 1] = ARGV[j] end
    local id = redis.call('XADD', unpack(args))
    redis.call('SET', KEYS[i + 1], id, 'PX', ARGV[1])
    out[i] = {id, 0}
  end
  at = at + count + 1
end
return out`;

/** XAUTOCLAIM, with each entry's delivery count (XAUTOCLAIM does not say it): {cursor, {{id, fields, count}...}, {gone ids}}. */
const CLAIM = `
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], 'COUNT', ARGV[5])
local out = {}
for _, e in ipairs(r[2]) do
  if e[2] then
    local p = redis.call('XPENDING', KEYS[1], ARGV[1], e[1], e[1], 1)
    out[#out + 1] = {e[1], e[2], p[1] and p[1][4] or 1}
  else
    redis.call('XACK', KEYS[1], ARGV[1], e[1])
  end
end
return {r[1], out}`;

/** Sets a pending entry's idle time, if it is still this worker's (a late worker must not take it back): 1 if it was. */
const SET_IDLE = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1, ARGV[2])
if not p[1] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'IDLE', ARGV[4], 'JUSTID')
return 1`;

/** Appends a copy (with why) to the dead letters and acknowledges the entry, in one step. */
const DEAD_LETTER = `
local t = redis.call('TIME')
local oldest = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[3])
local id = redis.call('XADD', KEYS[2], 'MINID', '~', string.format('%d', math.max(oldest, 0)), '*', unpack(ARGV, 4))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return id`;

/** A Lua script run by its SHA-1 (the server keeps it after the first EVAL). */
function script(source: string) {
  const sha = createHash('sha1').update(source).digest('hex');
  return async (client: Client, keys: string[], args: (string | Buffer)[], timeout?: number): Promise<Reply> => {
    const tail = [String(keys.length), ...keys, ...args];
    const options = { ...BYTES, timeout };
    try {
      return await client.sendCommand<Reply>(['EVALSHA', sha, ...tail], options);
    } catch (err) {
      if (!/NOSCRIPT/.test((err as Error).message)) throw err;
      return client.sendCommand<Reply>(['EVAL', source, ...tail], options);
    }
  };
}
const publishScript = script(PUBLISH);
const claimScript = script(CLAIM);
const setIdleScript = script(SET_IDLE);
const deadLetterScript = script(DEAD_LETTER);

let BYTES: { typeMapping: Record<number, typeof Buffer> } | undefined;

/** Connects; fails at once (exit 6) when the server cannot be reached at start; later, reconnects for as long as it takes. */
async function connectTo(t: Target, watch?: { lost(reason: string): void; back(): void }): Promise<Client> {
  // CommonJS: its exports are the import's `default`, in Node and in the CLI's bundle alike (see nats.ts)
  const { createClient, RESP_TYPES } = (await import('redis')).default;
  BYTES ??= { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } };
  let ready = false;
  const client = createClient({
    socket: {
      host: t.host,
      port: t.port,
      tls: t.tls || undefined,
      connectTimeout: DEFAULTS.sinkConnectTimeoutMs,
      reconnectStrategy: (retries: number, cause: Error) => (ready ? Math.min(50 * 2 ** retries, 1000) : cause),
    },
    username: t.username,
    password: t.password,
    database: t.settings.db,
    // a command while the connection is down fails at once, rather than waiting in a queue for it
    disableOfflineQueue: true,
  }) as unknown as Client;
  client.on('error', (err: Error) => {
    if (ready) watch?.lost(`the connection to the Redis server at ${where(t)} failed: ${err.message}`);
  });
  client.on('ready', () => {
    if (ready) watch?.back();
  });
  try {
    await client.connect();
  } catch (err) {
    if (client.isOpen) client.destroy();
    throw new UnreachableError(`Cannot reach the Redis server at ${where(t)}: ${(err as Error).message}.`, {
      hint: 'Check that redis-server runs and accepts connections from here, and the user and password in the URL.',
      cause: err,
    });
  }
  ready = true;
  return client;
}

const text = (r: Reply | undefined) => (Buffer.isBuffer(r) ? r.toString('utf8') : r === null || r === undefined ? '' : String(r));

/** At most this many messages, or bytes, in one call of the publish script: a script holds the server while it runs. */
const BATCH_MESSAGES = 100;
const BATCH_BYTES = 4 * 1024 * 1024;

/** INFO's `name:value` lines, by name. */
function infoOf(reply: unknown): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of String(reply).split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) map.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  return map;
}

/** The server's memory limit and what it does when it is reached. */
async function memoryOf(client: Client): Promise<{ max: number; policy: string }> {
  const info = infoOf(await client.sendCommand(['INFO', 'memory']));
  return { max: Number(info.get('maxmemory') ?? 0), policy: info.get('maxmemory_policy') ?? 'noeviction' };
}

const NOEVICTION_FIX = 'CONFIG SET maxmemory-policy noeviction (and maxmemory-policy noeviction in redis.conf): a full Redis then refuses, and listen answers 503 until the workers catch up';

/**
 * What the server, as configured, can evict: with a memory limit and an `allkeys-*` policy, the stream
 * itself (every message in it); with a `volatile-*` policy, the keys that have a time to live, which are
 * the pairs' dedupe keys (a pair can then be in the stream twice). Without a limit (`maxmemory 0`) or with
 * `noeviction`, nothing: a full server refuses the write, and the delivery is answered 503.
 */
export function memoryDrops(m: { max: number; policy: string }, stream: string): DropRisk[] {
  if (!m.max || m.policy === 'noeviction') return [];
  const limit = `maxmemory ${m.max} bytes, maxmemory-policy ${m.policy}`;
  if (m.policy.startsWith('volatile-')) {
    return [
      {
        what: `the Redis server evicts keys that have a time to live once it is full (${limit}): the pairs' dedupe keys (${stream}:pair:…), so a delivery given to two receivers, or sent again, can be in the stream twice (a consumer with a pair store still runs it once)`,
        fix: NOEVICTION_FIX,
      },
    ];
  }
  return [{ what: `the Redis server evicts keys once it is full (${limit}): the stream ${stream} itself can go, with every message in it, whether a worker read them or not`, fix: NOEVICTION_FIX }];
}

/**
 * Watches the server for evictions (`evicted_keys` growing) and for a policy changed to evict, each said
 * as it is found. Stops when the returned function is called.
 */
function watchMemory(client: Client, stream: string, start: { max: number; policy: string }, startEvicted: number, every: number, say: (what: string) => void): () => void {
  let evicted = startEvicted;
  const risky = new Set(memoryDrops(start, stream).map((r) => r.what));
  const look = async () => {
    const m = await memoryOf(client);
    for (const r of memoryDrops(m, stream)) {
      if (risky.has(r.what)) continue;
      risky.add(r.what);
      say(`${r.what} (changed since the sink opened). To stop it: ${r.fix}`);
    }
    const now = Number(infoOf(await client.sendCommand(['INFO', 'stats'])).get('evicted_keys') ?? 0);
    if (now > evicted) {
      say(
        `the Redis server evicted ${now - evicted} key${now - evicted === 1 ? '' : 's'} (maxmemory ${m.max} bytes, maxmemory-policy ${m.policy}): the stream ${stream} or its pairs' dedupe keys may be among them`,
      );
    }
    evicted = now;
  };
  return watchEvery(every, look);
}

/** The server's answer to a write when it is full (maxmemory, noeviction). */
const isFull = (err: unknown) => /^OOM\b/.test((err as Error).message ?? '');

interface Queued {
  key: string;
  args: (string | Buffer)[];
  bytes: number;
  resolve(r: { id: string; duplicate: boolean }): void;
  reject(err: unknown): void;
}

export async function openRedisSink(t: Target, options: SinkOptions = {}): Promise<Sink> {
  const timeout = options.timeoutMs ?? DEFAULTS.sinkPublishTimeoutMs;
  const state = new BrokerState(options.onConnection);
  const client = await connectTo(t, { lost: (reason) => state.client(true, reason), back: () => state.client(false) });
  let drops: DropRisk[];
  let unwatch: (() => void) | undefined;
  try {
    const memory = await memoryOf(client);
    drops = memoryDrops(memory, t.name);
    if (options.onDrops) {
      const evicted = Number(infoOf(await client.sendCommand(['INFO', 'stats'])).get('evicted_keys') ?? 0);
      unwatch = watchMemory(client, t.name, memory, evicted, options.watchMs ?? DEFAULTS.sinkWatchMs, options.onDrops);
    }
  } catch (err) {
    // a user not allowed INFO: whether the server evicts cannot be told, so it is not taken for safe
    drops = [
      {
        what: `cannot read the Redis server's memory settings (INFO memory: ${printable((err as Error).message)}), so whether it evicts the stream cannot be told`,
        fix: 'allow this user INFO, or make sure the server has maxmemory-policy noeviction (or no maxmemory)',
      },
    ];
  }
  let queue: Queued[] = [];
  let closed = false;
  const sending = new Set<Promise<void>>();

  /** Sends one call of the script for these messages, and settles each. */
  async function send(batch: Queued[]): Promise<void> {
    const keys = [t.name];
    const args: (string | Buffer)[] = [String(t.dedupeMs), String(t.keepMs), String(batch.length)];
    for (const q of batch) {
      keys.push(dedupeKeyOf(t.name, q.key));
      args.push(String(q.args.length), ...q.args);
    }
    const op = state.begin();
    try {
      const r = (await publishScript(client, keys, args, timeout)) as Reply[][];
      state.ok(op);
      for (const [i, q] of batch.entries()) q.resolve({ id: text(r[i]?.[0]), duplicate: r[i]?.[1] === 1 });
    } catch (err) {
      const e = isFull(err)
        ? new SinkUnavailableError(`The Redis server at ${where(t)} is full (maxmemory): it refuses new messages rather than evict anything.`, {
            cause: err,
            hint: 'The service retries it: let the workers catch up (acknowledged entries are trimmed after ?keep=), or raise maxmemory.',
          })
        : new SinkUnavailableError(`The Redis server at ${where(t)} did not take the message: ${(err as Error).message}.`, {
            cause: err,
            hint: "Nothing is known to be in the stream: send it again (its pair's dedupe key makes a second copy a duplicate).",
          });
      // an answer (an error of the server's, a full server) says the server is there
      if (/^(ERR|WRONGTYPE|NOSCRIPT|OOM)\b/.test((err as Error).message)) state.ok(op);
      else state.failed(op, e.message);
      for (const q of batch) q.reject(e);
    }
  }

  /** The messages of this turn, in calls of at most BATCH_MESSAGES and BATCH_BYTES. */
  function flush(): void {
    const all = queue;
    queue = [];
    for (let i = 0; i < all.length; ) {
      const batch: Queued[] = [];
      let bytes = 0;
      while (i < all.length && batch.length < BATCH_MESSAGES && (batch.length === 0 || bytes + all[i]!.bytes <= BATCH_BYTES)) {
        bytes += all[i]!.bytes;
        batch.push(all[i++]!);
      }
      const p = send(batch).finally(() => sending.delete(p));
      sending.add(p);
    }
  }

  return {
    kind: 'redis',
    where: t.shown,
    stream: { name: t.name, created: false, dedupeMs: t.dedupeMs, keepMs: t.keepMs, dedupeFix: 'raise its ?dedupe=', drops },
    get connected() {
      return state.connected;
    },
    publish(delivery) {
      if (closed) return Promise.reject(new SinkUnavailableError(`The sink ${t.shown} is closed.`));
      const m = encodeMessage(delivery);
      const args: (string | Buffer)[] = [];
      for (const [name, value] of m.fields) args.push(name, value);
      args.push(BODY_FIELD, Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength));
      return new Promise((resolve, reject) => {
        if (!queue.length) setImmediate(flush);
        queue.push({ key: m.key, args, bytes: m.body.byteLength, resolve, reject });
      });
    },
    async close() {
      closed = true;
      unwatch?.();
      if (queue.length) flush();
      await Promise.all(sending);
      await client.close().catch(() => client.destroy());
    },
  };
}

/** An entry's fields ([name, value, name, value...]) by name. */
function fieldsOf(flat: Reply): Map<string, Buffer> {
  const map = new Map<string, Buffer>();
  const list = Array.isArray(flat) ? flat : [];
  for (let i = 0; i + 1 < list.length; i += 2) {
    const v = list[i + 1];
    map.set(text(list[i]), Buffer.isBuffer(v) ? v : Buffer.from(text(v)));
  }
  return map;
}

const getter = (fields: Map<string, Buffer>) => (name: FieldName) => fields.get(name)?.toString('utf8');

export async function openRedisConsumer(t: Target, o: ConsumeOptions): Promise<SinkConsumer> {
  checkGroup(o.group);
  const { limits: settings, run: hs, stop: stopper } = runSettings(o);
  if (settings.retryDelayMs > settings.claimTimeoutMs) {
    throw new UsageError(`With Redis, the retry delay (${settings.retryDelayMs} ms) can be at most the claim timeout (${settings.claimTimeoutMs} ms).`, {
      hint: 'A failed entry is given back by making it look idle for the claim timeout less the delay: a longer delay cannot be said.',
    });
  }
  const name = o.name ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const state = new BrokerState(o.onConnection);
  const watch = { lost: (reason: string) => state.client(true, reason), back: () => state.client(false) };
  const client = await connectTo(t, watch);
  // XREADGROUP ... BLOCK holds its connection: it has one of its own
  let reader: Client;
  try {
    reader = await connectTo(t);
  } catch (err) {
    client.destroy();
    throw err;
  }
  const stream = t.name;
  const dead = deadStreamOf(stream);
  const createGroup = async () => {
    try {
      await client.sendCommand(['XGROUP', 'CREATE', stream, o.group, '0', 'MKSTREAM']);
    } catch (err) {
      if (!/BUSYGROUP/.test((err as Error).message)) throw err;
    }
  };
  try {
    await createGroup();
    await forgetIdleWorkers(client, stream, o.group, name);
  } catch (err) {
    client.destroy();
    reader.destroy();
    throw err;
  }
  const inflight = new Set<Promise<void>>();
  let slotFreed: (() => void) | undefined;
  // The turn's acknowledgements in one XACK: one a message was a command and a socket write each
  // (10,313 writes for 10,000 messages, 142-150 µs of the worker's CPU a message; 640 writes and 86-90 µs
  // this way, measured in turns on the same machine)
  let acking: { id: string; done: (err?: unknown) => void }[] = [];
  const ack = (id: string) =>
    new Promise<void>((resolve, reject) => {
      if (!acking.length) {
        setImmediate(() => {
          const all = acking;
          acking = [];
          client.sendCommand(['XACK', stream, o.group, ...all.map((a) => a.id)]).then(
            () => {
              for (const a of all) a.done();
            },
            (err: unknown) => {
              for (const a of all) a.done(err);
            },
          );
        });
      }
      acking.push({ id, done: (err) => (err ? reject(err) : resolve()) });
    });
  const inbound = (id: string, flat: Reply, deliveries: number): Inbound => {
    const fields = fieldsOf(flat);
    const setIdle = async (idleMs: number) => {
      await setIdleScript(client, [stream], [o.group, name, id, String(Math.max(0, Math.round(idleMs)))]);
    };
    return {
      id,
      deliveries,
      // the time the server gave the entry (its id, `*` in XADD): an id can only grow, so it cannot be set back
      storedAt: Number(id.slice(0, id.indexOf('-'))),
      decoded: decodeMessage(getter(fields), fields.get(BODY_FIELD)),
      ack: () => ack(id),
      // delivered again once it has been idle for the claim timeout: it is made to look idle for all but `delayMs` of it
      retry: (delayMs) => setIdle(settings.claimTimeoutMs - delayMs),
      touch: () => setIdle(0),
      async deadLetter(reason, count) {
        const copy: (string | Buffer)[] = [];
        for (const [k, v] of fields) copy.push(k, v);
        copy.push('dead_reason', reason, 'dead_id', id, 'dead_group', o.group, 'dead_deliveries', String(count), 'dead_at', new Date().toISOString());
        await deadLetterScript(client, [stream, dead], [o.group, id, String(t.keepMs), ...copy]);
        return dead;
      },
    };
  };
  const start = (entry: Inbound) => {
    const p = handleInbound(entry, hs).finally(() => {
      inflight.delete(p);
      slotFreed?.();
    });
    inflight.add(p);
  };
  /** How often entries left pending (failed ones whose delay is up, a dead worker's) are looked for. */
  const claimEvery = Math.max(50, Math.min(1000, settings.retryDelayMs / 4, settings.claimTimeoutMs / 4));
  const reading = (async () => {
    let cursor = '0-0';
    let claimedAt = 0;
    while (!stopper.stopping) {
      // read when half the slots (at least one) are free: a read of many costs about what a read of one does
      const free = Math.max(1, Math.floor(settings.concurrency / 2));
      while (settings.concurrency - inflight.size < free && !stopper.stopping) await new Promise<void>((r) => (slotFreed = r));
      if (stopper.stopping) break;
      const op = state.begin();
      try {
        if (performance.now() - claimedAt >= claimEvery) {
          claimedAt = performance.now();
          const [next, entries] = (await claimScript(client, [stream], [o.group, name, String(settings.claimTimeoutMs), cursor, String(settings.concurrency - inflight.size)])) as [Reply, Reply[][]];
          cursor = text(next);
          for (const [id, flat, count] of entries) start(inbound(text(id), flat!, Number(count)));
          if (inflight.size >= settings.concurrency) continue;
        }
        const r = (await reader.sendCommand<Reply>(
          ['XREADGROUP', 'GROUP', o.group, name, 'COUNT', String(settings.concurrency - inflight.size), 'BLOCK', String(claimEvery), 'STREAMS', stream, '>'],
          BYTES,
        )) as Reply[][] | null;
        state.ok(op);
        for (const [id, flat] of (r?.[0]?.[1] as Reply[][] | undefined) ?? []) start(inbound(text(id), flat!, 1));
      } catch (err) {
        if (stopper.stopping) break;
        // the stream (and its group) deleted under us: made again; else the broker is away: wait, and try again
        if (/NOGROUP/.test((err as Error).message)) await createGroup().catch(() => undefined);
        else state.failed(op, `the Redis server at ${where(t)} failed: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, claimEvery));
      }
    }
  })();
  return {
    group: o.group,
    name,
    where: t.shown,
    deadLetters: dead,
    async stop(options = {}) {
      stopper.begin();
      slotFreed?.();
      reader.destroy();
      await reading;
      await stopper.drain(inflight, options.timeoutMs);
      await client.close().catch(() => client.destroy());
    },
  };
}

/** Workers of the group with nothing pending and idle for an hour: gone (each worker has a name of its own), so forgotten. */
async function forgetIdleWorkers(client: Client, stream: string, group: string, self: string): Promise<void> {
  const workers = (await client.sendCommand<Reply[]>(['XINFO', 'CONSUMERS', stream, group])) as Reply[];
  for (const w of workers) {
    const info = pairsOf(w);
    if (text(info.get('name')) !== self && Number(info.get('pending')) === 0 && Number(info.get('idle')) > 3_600_000) {
      await client.sendCommand(['XGROUP', 'DELCONSUMER', stream, group, text(info.get('name'))]);
    }
  }
}

/** A reply of [name, value, name, value...] (XINFO), by name. */
function pairsOf(r: Reply): Map<string, Reply> {
  const map = new Map<string, Reply>();
  const list = Array.isArray(r) ? r : [];
  for (let i = 0; i + 1 < list.length; i += 2) map.set(text(list[i]), list[i + 1]!);
  return map;
}

/** What is in the stream (its newest `limit` entries), its consumer groups with their pending entries, and its dead letters. */
export async function readRedis(t: Target, limit: number): Promise<SinkView> {
  const client = await connectTo(t);
  try {
    let info: Map<string, Reply>;
    try {
      info = pairsOf(await client.sendCommand<Reply>(['XINFO', 'STREAM', t.name]));
    } catch (err) {
      if (/no such key/i.test((err as Error).message))
        throw new NotFoundError(`No stream ${t.name} on the Redis server at ${where(t)}.`, { hint: 'A sink creates it with its first message (or a consumer when it starts).' });
      throw err;
    }
    const newest = (await client.sendCommand<Reply[]>(['XREVRANGE', t.name, '+', '-', 'COUNT', String(limit)], BYTES)) as Reply[][];
    const deliveries = newest.map(([id, flat]) => {
      const fields = fieldsOf(flat!);
      return entryOf(text(id), getter(fields), fields.get(BODY_FIELD));
    });
    deliveries.reverse();
    const groups: SinkView['groups'] = [];
    for (const g of (await client.sendCommand<Reply[]>(['XINFO', 'GROUPS', t.name])) as Reply[]) {
      const gi = pairsOf(g);
      const name = text(gi.get('name'));
      const pending = (await client.sendCommand<Reply[]>(['XPENDING', t.name, name, '-', '+', String(limit)])) as Reply[][];
      const lag = gi.get('lag');
      groups.push({
        name,
        pending: Number(gi.get('pending')),
        waiting: lag === null || lag === undefined ? null : Number(lag),
        consumers: Number(gi.get('consumers')),
        pending_entries: pending.map(([id, consumer, idle, count]) => ({ id: text(id), consumer: text(consumer), idle_ms: Number(idle), deliveries: Number(count) })),
      });
    }
    const first = info.get('first-entry');
    const last = info.get('last-entry');
    return {
      sink: t.shown,
      broker: 'redis',
      stream: { name: t.name, messages: Number(info.get('length')), first: Array.isArray(first) ? text(first[0]) : undefined, last: Array.isArray(last) ? text(last[0]) : undefined },
      dead_letters: { name: deadStreamOf(t.name), messages: Number(await client.sendCommand(['XLEN', deadStreamOf(t.name)])) },
      groups,
      deliveries,
    };
  } finally {
    await client.close().catch(() => client.destroy());
  }
}

/** Redis Streams, as the registry (kinds.ts) holds it. */
export const REDIS: SinkDefinition<RedisSettings> & { kind: 'redis' } = defineSink<'redis', RedisSettings>({
  kind: 'redis',
  label: 'a Redis stream',
  schemes: { redis: { tls: false }, rediss: { tls: true } },
  defaultPort: 6379,
  example: 'redis://host:6379/STREAM',
  pathProblem: (path) => (path ? undefined : { problem: 'names no stream', hint: "The path is the stream's key: redis://host:6379/wxhooks:deliveries (the database, if not 0, is ?db=N)." }),
  pathFor: (label) => `${label}:deliveries`,
  settings: {
    names: ['db'],
    parse(get, what) {
      const db = get('db');
      if (db !== undefined && !/^\d{1,5}$/.test(db)) throw new UsageError(`${what}'s db must be a database number, not "${printable(db)}".`);
      return { db: db === undefined ? 0 : Number(db) };
    },
  },
  publisher: openRedisSink,
  consumer: openRedisConsumer,
  read: readRedis,
});
