import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import * as harness from '../../scripts/harness.js';
import { eachLine, type Broker } from '../../scripts/harness.js';
import { pairFrom } from '../../src/delivery/pair.js';
import { MessageRefusedError, type ConsumedMessage, type VerifiedMessage } from '../../src/sinks/consumer.js';
import { SINKS, type SinkKind } from '../../src/sinks/kinds.js';
import { sinkDelivery, type SinkDelivery } from '../../src/sinks/message.js';
import { parseSinkUrl } from '../../src/sinks/sink-url.js';
import { signDelivery, verifyDelivery } from '../../src/signing/index.js';
import { sharedBroker, type SharedBroker } from './services.js';

export const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;

/** A broker as a test uses it: where it is, and (the run's shared one) a prefix that keeps this file's names apart. */
export type TestBroker = Pick<Broker, 'url' | 'password' | 'port'> & { prefix?: string };

/**
 * The tests' broker table, read from the registry of sinks: for each kind, `shared()`, the run's (full
 * tier: test/full/global-setup.ts), with names of the file's own; `start()`, one of the test's own (the
 * harness's `start<Kind>`: startNats, startRedis), for a test that stops, restarts, kills, pauses or
 * reconfigures it; and the sink URL of a stream of its own on either.
 */
export const BROKERS = Object.fromEntries(
  SINKS.map((kind) => {
    const name = `start${kind.kind[0]!.toUpperCase()}${kind.kind.slice(1)}`;
    const start = (harness as unknown as Record<string, (() => Promise<Broker>) | undefined>)[name];
    if (!start) throw new Error(`scripts/harness.js has no ${name}() for the ${kind.kind} sink's test server`);
    return [kind.kind, { start, shared: () => sharedBroker(kind.kind), url: (b: TestBroker, label: string) => `${b.url}/${kind.pathFor(`${b.prefix ?? ''}${label}`)}` }];
  }),
) as Record<SinkKind, { start: () => Promise<Broker>; shared: () => SharedBroker; url: (b: TestBroker, label: string) => string }>;

/**
 * A consumer's `verify` with SECRET, as a worker's own code would write it with the library's signing
 * functions: verified as of when the broker stored the message, the pair from what is signed.
 */
export function verifyWith(secret = SECRET): (m: ConsumedMessage) => VerifiedMessage {
  return (m) => {
    const v = verifyDelivery({ secret, headers: m.headers, body: m.body, now: m.storedAt });
    if (!v.ok) throw new MessageRefusedError(`it does not verify: ${v.message}`);
    const pair = pairFrom(v);
    if (!('trigger' in pair)) throw new MessageRefusedError('its pair needs a hash (a layout that does not sign the Trigger-Id)');
    return { pair, type: typeof v.payload.type === 'string' ? v.payload.type : undefined, timestamp: v.timestamp };
  };
}

/** A delivery as `listen` would publish it: signed as the service signs, verified, its pair taken. */
export function delivery(trigger: string, data: Record<string, unknown> = { model: 'wm-6', forecast_hour: 6 }): SinkDelivery {
  const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '7', trigger_id: trigger, data }));
  const headers = { 'content-type': 'application/json', ...Object.fromEntries(Object.entries(signDelivery({ secret: SECRET, body, triggerId: trigger })).map(([k, v]) => [k.toLowerCase(), v])) };
  const v = verifyDelivery({ secret: SECRET, headers, body });
  if (!v.ok) throw new Error(v.message);
  const pair = pairFrom(v);
  if (!('trigger' in pair)) throw new Error('a delivery with a trigger_id has its pair');
  return sinkDelivery(v, pair, headers, body, Date.now());
}

/** A delivery signed `secondsAgo` before now, as the service would have sent it then (its received_at that time too). */
export function signedAgo(trigger: string, secondsAgo: number): SinkDelivery {
  const d = delivery(trigger);
  const timestamp = Math.floor(Date.now() / 1000) - secondsAgo;
  const headers = Object.fromEntries(Object.entries(signDelivery({ secret: SECRET, body: Buffer.from(d.body), triggerId: trigger, timestamp })).map(([k, v]) => [k.toLowerCase(), v as string]));
  return { ...d, headers: { ...d.headers, ...headers }, timestamp, receivedAt: new Date(timestamp * 1000).toISOString() };
}

/** Publishes the deliveries through a sink of its own, one after another, and closes it. */
export async function publish(url: string, ...deliveries: SinkDelivery[]): Promise<void> {
  const { openSink } = await import('../../src/sinks/index.js');
  const sink = await openSink(url);
  try {
    for (const d of deliveries) await sink.publish(d);
  } finally {
    await sink.close();
  }
}

export interface Worker {
  lines: Record<string, unknown>[];
  /** Resolves with the first line (from the start) that matches. */
  waitFor(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  pid: number;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts test/helpers/sink-worker.js (a consumer in a process of its own, verifying with SECRET unless told); resolves once it reads. */
export async function startWorker(options: Record<string, unknown>): Promise<Worker> {
  const child = spawn(process.execPath, [resolve(import.meta.dirname, 'sink-worker.js'), JSON.stringify({ secret: SECRET, ...options })], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Record<string, unknown>[] = [];
  let err = '';
  const wake: (() => void)[] = [];
  eachLine(child.stdout, (line) => {
    lines.push(JSON.parse(line) as Record<string, unknown>);
    for (const w of wake.splice(0)) w();
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | null>((r) =>
    child.on('close', (code) => {
      for (const w of wake.splice(0)) w();
      r(code);
    }),
  );
  const worker: Worker = {
    lines,
    pid: child.pid!,
    exited,
    async waitFor(match, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (let seen = 0; ; ) {
        for (; seen < lines.length; seen++) if (match(lines[seen]!)) return lines[seen]!;
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the worker exited (${child.exitCode ?? child.signalCode}) first; stderr: ${err}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for a worker's line; stderr: ${err}`);
        await new Promise<void>((r) => {
          wake.push(r);
          setTimeout(r, 200);
        });
      }
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  await worker.waitFor((l) => 'ready' in l);
  return worker;
}

/** Resolves when `check` holds (looked at every 25 ms); rejects after `timeoutMs`, saying what did not come. */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** What the tests ask of Redis's client: raw commands (a narrow type: the client's own full type costs the type checker seconds). */
interface RedisCommands {
  sendCommand(args: string[]): Promise<unknown>;
}

/** The broker's own client, for what a test does behind the sink's back (a foreign message, the dead letters). */
async function withClient<T>(url: string, run: (c: { nats?: import('@nats-io/transport-node').NatsConnection; redis?: RedisCommands }) => Promise<T>): Promise<T> {
  const t = parseSinkUrl(url);
  if (t.kind === 'nats') {
    const { connect } = await import('@nats-io/transport-node');
    const nats = await connect({ servers: `${t.host}:${t.port}`, user: t.username, pass: t.password });
    try {
      return await run({ nats });
    } finally {
      await nats.close();
    }
  }
  const { createClient } = await import('redis');
  const client = createClient({ socket: { host: t.host, port: t.port }, password: t.password });
  await client.connect();
  try {
    return await run({ redis: client as unknown as RedisCommands });
  } finally {
    client.destroy();
  }
}

/** Writes a message that is not one of ours (these fields or headers, this body) to the sink's stream. */
export function writeForeign(url: string, fields: Record<string, string>, body: string): Promise<void> {
  const t = parseSinkUrl(url);
  return withClient(url, async ({ nats, redis }) => {
    if (nats) {
      const { jetstream } = await import('@nats-io/jetstream');
      const { headers } = await import('@nats-io/transport-node');
      const h = headers();
      for (const [k, v] of Object.entries(fields)) h.set(k, v);
      await jetstream(nats).publish(t.name, body, { headers: h });
    } else {
      await redis!.sendCommand(['XADD', t.name, '*', ...Object.entries(fields).flat(), 'body', body]);
    }
  });
}

/** The dead letters of a sink's stream, oldest first: each one's fields (NATS: headers) and body. */
export function readDeadLetters(url: string): Promise<{ fields: Record<string, string>; body: string }[]> {
  const t = parseSinkUrl(url);
  return withClient(url, async ({ nats, redis }) => {
    if (nats) {
      const { jetstreamManager } = await import('@nats-io/jetstream');
      const jsm = await jetstreamManager(nats);
      const name = await jsm.streams.find(`${t.name}.dead`);
      const info = await jsm.streams.info(name);
      const out = [];
      for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages; seq++) {
        const m = await jsm.streams.getMessage(name, { seq });
        if (!m || m.subject !== `${t.name}.dead`) continue;
        out.push({ fields: Object.fromEntries([...(m.header ?? [])].map(([k, v]) => [k, v[0]!])), body: new TextDecoder().decode(m.data) });
      }
      return out;
    }
    const entries = (await redis!.sendCommand(['XRANGE', `${t.name}:dead`, '-', '+'])) as [string, string[]][];
    return entries.map(([, flat]) => {
      const fields: Record<string, string> = {};
      for (let i = 0; i < flat.length; i += 2) fields[flat[i]!] = flat[i + 1]!;
      const { body = '', ...rest } = fields;
      return { fields: rest, body };
    });
  });
}
