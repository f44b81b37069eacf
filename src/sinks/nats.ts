import { hostname } from 'node:os';
import type { JetStreamManager, JsMsg, StoredMsg, StreamConfig, StreamInfo } from '@nats-io/jetstream';
import type { MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import * as DEFAULTS from '../delivery/defaults.js';
import { NotFoundError, UnreachableError, UsageError } from '../errors.js';
import { printable } from '../util/printable.js';
import { handleInbound, runSettings, type Inbound } from './consumer.js';
import { decodeMessage, encodeMessage, type FieldName } from './message.js';
import {
  BrokerState,
  checkGroup,
  defineSink,
  watchEvery,
  SinkRefusedError,
  SinkUnavailableError,
  type ConsumeOptions,
  type DropRisk,
  type Sink,
  type SinkConsumer,
  type SinkDefinition,
  type SinkOptions,
  type SinkStream,
  type SinkTarget,
} from './sink.js';
import { entryOf, type SinkView } from './view.js';

/**
 * The NATS JetStream sink: publishes with the pair's key as `Nats-Msg-Id`, so the stream drops a
 * duplicate within its duplicate window; consumes as a durable pull consumer; moves dead letters to
 * `SUBJECT.dead`. Its client is loaded only when a nats:// URL is used. The kind's definition is at the end.
 */

/** A NATS sink's own URL settings: `?stream=NAME`, the stream to create when none holds the subject. */
export interface NatsSettings {
  stream?: string;
}
type Target = SinkTarget<NatsSettings>;

/**
 * The clients, loaded on first use. They are CommonJS modules: their exports are taken from the import's
 * `default`, which Node and the CLI's bundle both give (esbuild's chunk of a CommonJS module has no named
 * exports, so `const { connect } = await import(…)` found nothing in the bundled CLI).
 */
const natsClient = async () => (await import('@nats-io/transport-node')).default;
const jetStreamClient = async () => (await import('@nats-io/jetstream')).default;

const ns = (ms: number) => ms * 1_000_000;
const ms = (ns: number) => Math.round(ns / 1_000_000);
const where = (t: Target) => `${t.host}:${t.port}`;
/** The subject dead letters of a subject go to: not held by its stream, which holds exactly the subject. */
export const deadSubjectOf = (subject: string) => `${subject}.dead`;

/** The JetStream stream a subject gets when none holds it yet: the subject, its dots (and slashes) as underscores (`wxhooks.deliveries` → `wxhooks_deliveries`). */
export const streamNameFor = (subject: string): string => subject.replace(/[./\\]/g, '_');

/** A JetStream subject we publish to: dot-separated tokens, none empty, no wildcard, no whitespace. */
function subjectProblem(subject: string): string | undefined {
  if (!subject) return 'names no subject';
  if (/[\s*>]/.test(subject)) return 'has a wildcard (* or >) or whitespace in its subject: name one subject';
  if (subject.split('.').some((t) => t === '')) return 'has an empty token in its subject (a leading, trailing or doubled dot)';
  return undefined;
}

/** A JetStream stream name: no whitespace, dot, wildcard or path separator. */
const streamNameOk = (name: string) => name.length > 0 && name.length <= 255 && !/[\s.*>/\\]/.test(name);

/** A stream's size and count limits, in words. */
function limitsOf(c: StreamConfig): string[] {
  const limits: string[] = [];
  if (c.max_bytes > 0) limits.push(`max_bytes ${c.max_bytes}`);
  if (c.max_msgs > 0) limits.push(`max_msgs ${c.max_msgs}`);
  return limits;
}

/**
 * What a stream, as configured, drops that no group may have read: its oldest messages once a size or
 * count limit is reached with `discard: old` (NATS's default), all but the newest of a subject under a
 * per-subject limit (every delivery has the one subject), and, with interest retention, whatever is
 * published while no group exists. (Its age limit is `keep`, documented: not a risk.)
 */
export function streamDrops(c: StreamConfig): DropRisk[] {
  const risks: DropRisk[] = [];
  const limits = limitsOf(c);
  if (limits.length && c.discard !== 'new') {
    risks.push({
      what: `stream ${c.name} has ${limits.join(' and ')} with discard old: once it is full, NATS drops its oldest messages to take new ones, whether a worker read them or not`,
      fix: `nats stream edit ${c.name} --discard new (a full stream then refuses, and listen answers 503 until the workers catch up), or remove the limit`,
    });
  }
  if (c.max_msgs_per_subject > 0 && !(c.discard === 'new' && c.discard_new_per_subject)) {
    risks.push({
      what: `stream ${c.name} keeps ${c.max_msgs_per_subject} message${c.max_msgs_per_subject === 1 ? '' : 's'} per subject: every delivery is published to the one subject, so NATS drops the older ones, read or not`,
      fix: `nats stream edit ${c.name} --max-msgs-per-subject=-1`,
    });
  }
  if (c.retention === 'interest') {
    risks.push({
      what: `stream ${c.name} has interest retention: a message published while no consumer group exists is dropped at once, and a group made later never sees what came before it`,
      fix: 'a stream with limits retention for the subject (interest retention cannot be changed: remove the stream, and the sink makes one with limits retention)',
    });
  }
  return risks;
}

/** Connects; `watch` hears the connection go and come back. */
async function connectTo(t: Target, watch?: { lost(reason: string): void; back(): void }): Promise<NatsConnection> {
  const { connect } = await natsClient();
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: `${t.host.includes(':') ? `[${t.host}]` : t.host}:${t.port}`,
      ...(t.password !== undefined ? { user: t.username ?? '', pass: t.password } : t.username !== undefined ? { token: t.username } : {}),
      name: `wxhooks ${hostname()}:${process.pid}`,
      timeout: DEFAULTS.sinkConnectTimeoutMs,
      // reconnect for as long as it takes: the broker away is a state to report, not a reason to stop
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
    });
  } catch (err) {
    throw new UnreachableError(`Cannot reach the NATS server at ${where(t)}: ${(err as Error).message}.`, {
      hint: 'Check that nats-server runs with JetStream (-js) and accepts connections from here, and the user and password in the URL.',
      cause: err,
    });
  }
  if (watch) {
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') watch.lost(`the connection to the NATS server at ${where(t)} was lost`);
        else if (s.type === 'reconnect') watch.back();
      }
    })();
  }
  return nc;
}

/** JetStream's manager, once JetStream answers: a server without it is exit 6, saying how to turn it on. */
async function managerOf(nc: NatsConnection, t: Target, timeout?: number): Promise<JetStreamManager> {
  const { jetstreamManager } = await jetStreamClient();
  try {
    return await jetstreamManager(nc, timeout === undefined ? {} : { timeout });
  } catch (err) {
    throw new UnreachableError(`JetStream does not answer on the NATS server at ${where(t)}: ${(err as Error).message}.`, {
      hint: 'Start nats-server with JetStream (-js, or a jetstream block in its configuration); a user of an account needs JetStream enabled for it.',
      cause: err,
    });
  }
}

/**
 * The stream that holds `subject`, or a new one with our settings (DECISIONS.md, "The sinks"): limits
 * retention, `discard: new` (a full stream refuses a message rather than drop an unread one), `keep` as its
 * age limit. Two starting at once create it once.
 */
async function streamFor(jsm: JetStreamManager, t: Target, subject: string, newName: string): Promise<{ stream: SinkStream; config: StreamConfig }> {
  const { RetentionPolicy, StorageType, DiscardPolicy } = await jetStreamClient();
  const described = (info: StreamInfo, created: boolean) => ({
    config: info.config,
    stream: {
      name: info.config.name,
      subject,
      created,
      dedupeMs: ms(info.config.duplicate_window ?? 0),
      keepMs: ms(info.config.max_age ?? 0),
      dedupeFix: created ? 'raise its ?dedupe=' : `raise stream ${info.config.name}'s duplicate window (it is yours: wxhooks did not create it)`,
      drops: streamDrops(info.config),
    },
  });
  for (let attempt = 0; ; attempt++) {
    try {
      return described(await jsm.streams.info(await jsm.streams.find(subject)), false);
    } catch (err) {
      if ((err as { code?: number }).code !== 10059 && (err as Error).name !== 'StreamNotFoundError') throw err;
    }
    try {
      return described(
        await jsm.streams.add({
          name: newName,
          subjects: [subject],
          retention: RetentionPolicy.Limits,
          storage: StorageType.File,
          discard: DiscardPolicy.New,
          max_age: ns(t.keepMs),
          duplicate_window: ns(t.dedupeMs),
          num_replicas: 1,
        }),
        true,
      );
    } catch (err) {
      // another process made it at the same moment (a different configuration makes it "in use"): find it again
      if (attempt < 2) continue;
      throw new UsageError(`Cannot create the JetStream stream "${newName}" for ${subject} on ${where(t)}: ${(err as Error).message}.`, {
        hint: 'Another stream may already hold a subject that overlaps it: name the stream with ?stream=NAME, or create it yourself.',
        cause: err,
      });
    }
  }
}

/** JetStream's answer to a publish that a full stream (discard new), or a server out of storage, refused. */
const isFull = (err: unknown) => {
  const e = err as Error & { code?: unknown };
  return e.code === 10077 || e.code === 10023 || /maximum (messages|bytes)|insufficient resources|resource limits exceeded/i.test(e.message ?? '');
};

/** A failed JetStream call in words, and whether the broker (not this message) is the reason. */
function unavailable(err: unknown, t: Target): SinkUnavailableError {
  const e = err as Error & { code?: unknown };
  if (isFull(err)) {
    return new SinkUnavailableError(`The NATS stream for ${t.name} on ${where(t)} is full (${e.message}): it refuses new messages rather than drop unread ones.`, {
      cause: err,
      hint: "The service retries it: let the workers catch up, or raise the stream's max_bytes or max_msgs (or the server's JetStream storage).",
    });
  }
  const reason =
    e.name === 'NoRespondersError' || /no responders/i.test(e.message)
      ? 'JetStream did not answer (is it enabled, and the server up?)'
      : e.name === 'TimeoutError'
        ? 'no acknowledgement in time'
        : e.message;
  return new SinkUnavailableError(`The NATS server at ${where(t)} did not take the message: ${reason}.`, {
    cause: err,
    hint: 'Nothing is known to be in the stream: send it again (its Nats-Msg-Id makes a second copy a duplicate).',
  });
}

/**
 * The broker's answers to this sink's publishes, on one subscription (`INBOX.*`), each matched by its
 * reply subject's last token. (nats.js's `js.publish` makes a request of its own for each message, with
 * two Error objects for their stacks and a timer: 101-120 µs of CPU a 600-byte message, against 30-47 µs
 * this way, measured at 64 in flight in the same run: 2,300-3,000 against 5,300-9,100 publishes a second.
 * The PubAck is JetStream's own answer, read the same way.)
 */
class Acks {
  private readonly waiting = new Map<string, { resolve(ack: { seq: number; duplicate?: boolean }): void; reject(err: Error): void; timer: NodeJS.Timeout }>();
  private next = 0;

  constructor(
    readonly inbox: string,
    private readonly timeoutMs: number,
  ) {}

  /** A reply subject, and the answer that will come to it. */
  expect(): { reply: string; answer: Promise<{ seq: number; duplicate?: boolean }> } {
    const token = (++this.next).toString(36);
    const answer = new Promise<{ seq: number; duplicate?: boolean }>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(token);
        reject(Object.assign(new Error('no acknowledgement in time'), { name: 'TimeoutError' }));
      }, this.timeoutMs);
      this.waiting.set(token, { resolve, reject, timer });
    });
    return { reply: `${this.inbox}.${token}`, answer };
  }

  /** An answer: a PubAck, a JetStream error, or the server's "no responders" (no stream, or JetStream away). */
  take(subject: string, data: Uint8Array, status?: { hasError: boolean; code: number; description: string }): void {
    const token = subject.slice(this.inbox.length + 1);
    const w = this.waiting.get(token);
    if (!w) return;
    this.waiting.delete(token);
    clearTimeout(w.timer);
    if (status?.hasError) {
      w.reject(Object.assign(new Error(status.code === 503 ? 'no responders' : `${status.code} ${status.description}`), { name: status.code === 503 ? 'NoRespondersError' : 'Error' }));
      return;
    }
    let ack: { seq?: number; duplicate?: boolean; error?: { code?: number; err_code?: number; description?: string } } | undefined;
    try {
      ack = JSON.parse(new TextDecoder().decode(data)) as typeof ack;
    } catch {
      // not JSON: said below
    }
    if (!ack || typeof ack !== 'object') w.reject(new Error('an answer that is not a JetStream acknowledgement'));
    else if (ack.error) w.reject(Object.assign(new Error(ack.error.description ?? 'JetStream refused the message'), { code: ack.error.err_code }));
    else w.resolve({ seq: Number(ack.seq), duplicate: ack.duplicate });
  }
}

/**
 * Watches a stream for what it drops that a group had not read, and for a configuration changed to drop,
 * each said as it is found. A group's unread messages that went are counted two ways: those between the
 * last it was handed and the stream's first (seen while the group has not read on), and, on a stream of
 * the one subject, the messages it had waiting, plus those published, less those it was handed and those
 * still waiting (a lower bound: a redelivery counts as handed). With no group, whatever left the stream
 * went unread. Stops when the returned function is called.
 */
function watchStream(jsm: JetStreamManager, start: StreamInfo, subject: string, every: number, say: (what: string) => void): () => void {
  const name = start.config.name;
  const risky = new Set(streamDrops(start.config).map((r) => r.what));
  /** Each group as last looked at: its deliveries so far, its messages waiting, and its gap below the stream's first. */
  const groups = new Map<string, { handed: number; waiting: number; gap: number }>();
  let last = { first: start.state.first_seq, last: start.state.last_seq };
  const count = (n: number) => `${n} message${n === 1 ? '' : 's'}`;
  const look = async () => {
    const info = await jsm.streams.info(name);
    for (const r of streamDrops(info.config)) {
      if (risky.has(r.what)) continue;
      risky.add(r.what);
      say(`${r.what} (changed since the sink opened). To stop it: ${r.fix}`);
    }
    const limits = [...limitsOf(info.config), ...(info.config.max_age ? [`max_age ${Math.round(ms(info.config.max_age) / 1000)}s`] : [])].join(', ') || 'none';
    const gone = info.state.first_seq - 1;
    const published = info.state.last_seq - last.last;
    const oneSubject = info.config.subjects?.length === 1 && info.config.subjects[0] === subject;
    let seen = 0;
    for await (const c of jsm.consumers.list(name)) {
      if (c.config.filter_subject && c.config.filter_subject !== subject) continue;
      seen++;
      const now = { handed: c.delivered.consumer_seq, waiting: c.num_pending, gap: Math.max(0, gone - c.delivered.stream_seq) };
      const before = groups.get(c.name);
      groups.set(c.name, now);
      if (!before || now.handed < before.handed) continue; // first seen (or made again): what went before is not this watch's to say
      const counted = oneSubject ? before.waiting + published - now.waiting - (now.handed - before.handed) : 0;
      const lost = Math.max(counted, now.gap - before.gap, 0);
      if (lost) say(`stream ${name} dropped ${count(lost)} that group ${c.name} had not read (its limits: ${limits})`);
    }
    if (!seen && info.state.first_seq > last.first) say(`stream ${name} dropped ${count(info.state.first_seq - last.first)} before any consumer group read them (its limits: ${limits})`);
    last = { first: info.state.first_seq, last: info.state.last_seq };
  };
  return watchEvery(every, look);
}

export async function openNatsSink(t: Target, options: SinkOptions = {}): Promise<Sink> {
  const { headers, createInbox } = await natsClient();
  const timeout = options.timeoutMs ?? DEFAULTS.sinkPublishTimeoutMs;
  const state = new BrokerState(options.onConnection);
  let down = false;
  let jsm: JetStreamManager | undefined;
  const nc = await connectTo(t, {
    lost(reason) {
      down = true;
      state.client(true, reason);
    },
    back() {
      down = false;
      // connected again; JetStream may need a moment more, so it is "back" when a call to it works
      const op = state.begin();
      void jsm?.getAccountInfo().then(
        () => state.ok(op),
        () => undefined,
      );
    },
  });
  try {
    jsm = await managerOf(nc, t, timeout);
    const { stream } = await streamFor(jsm, t, t.name, t.settings.stream ?? streamNameFor(t.name));
    const acks = new Acks(createInbox(), timeout);
    nc.subscribe(`${acks.inbox}.*`, { callback: (_err, m) => acks.take(m.subject, m.data, m.headers) });
    const onDrops = options.onDrops;
    const unwatch = onDrops ? watchStream(jsm, await jsm.streams.info(stream.name), t.name, options.watchMs ?? DEFAULTS.sinkWatchMs, onDrops) : undefined;
    return {
      kind: 'nats',
      where: t.shown,
      stream,
      get connected() {
        return state.connected && !down;
      },
      async publish(delivery) {
        const m = encodeMessage(delivery);
        const h = headers();
        let size = m.body.length;
        for (const [name, value] of m.fields) {
          h.set(name, value);
          size += name.length + value.length + 4;
        }
        h.set('Nats-Msg-Id', m.key);
        const max = nc.info?.max_payload ?? Infinity;
        if (size > max) {
          throw new SinkRefusedError(`The delivery is ${size} bytes with its headers, over the NATS server's max_payload (${max} bytes).`, {
            hint: "Raise max_payload in the server's configuration (up to 64 MB), or use a Redis sink.",
          });
        }
        // while the connection is down, nats.js would hold the publish until it is back: fail now
        if (down) throw unavailable(new Error('the connection is down'), t);
        const op = state.begin();
        try {
          const { reply, answer } = acks.expect();
          answer.catch(() => undefined); // handled below, unless publish() throws first
          nc.publish(t.name, m.body, { reply, headers: h });
          const ack = await answer;
          state.ok(op);
          return { id: String(ack.seq), duplicate: Boolean(ack.duplicate) };
        } catch (err) {
          const e = unavailable(err, t);
          // a full stream answered: the broker is there
          if (isFull(err)) state.ok(op);
          else state.failed(op, e.message);
          throw e;
        }
      },
      async close() {
        unwatch?.();
        await nc.close();
      },
    };
  } catch (err) {
    await nc.close();
    throw err;
  }
}

/** Headers a dead letter does not copy: the broker's own (its Nats-Msg-Id would make it a duplicate of nothing). */
const copied = (h: MsgHdrs | undefined) => [...(h ?? [])].filter(([name]) => !/^nats-/i.test(name));

export async function openNatsConsumer(t: Target, o: ConsumeOptions): Promise<SinkConsumer> {
  checkGroup(o.group);
  const { limits: settings, run: hs, stop: stopper } = runSettings(o);
  const { jetstream, AckPolicy, DeliverPolicy } = await jetStreamClient();
  const { headers } = await natsClient();
  const state = new BrokerState(o.onConnection);
  const nc = await connectTo(t, { lost: (reason) => state.client(true, reason), back: () => state.client(false) });
  try {
    const jsm = await managerOf(nc, t);
    const { stream } = await streamFor(jsm, t, t.name, t.settings.stream ?? streamNameFor(t.name));
    const deadSubject = deadSubjectOf(t.name);
    await streamFor(jsm, t, deadSubject, `${stream.name}_dead`);
    const config = {
      durable_name: o.group,
      ack_policy: AckPolicy.Explicit,
      ack_wait: ns(settings.claimTimeoutMs),
      // the limit is ours (a failed message goes to the dead letters with why), not the server's, which would only stop delivering it
      max_deliver: -1,
      filter_subject: t.name,
      deliver_policy: DeliverPolicy.All,
    };
    try {
      const info = await jsm.consumers.info(stream.name, o.group);
      if (info.config.filter_subject !== t.name) {
        throw new UsageError(`The consumer group "${o.group}" of stream ${stream.name} reads ${info.config.filter_subject ?? 'every subject'}, not ${t.name}.`, { hint: 'Name another group.' });
      }
      if (info.config.ack_wait !== config.ack_wait) await jsm.consumers.update(stream.name, o.group, { ack_wait: config.ack_wait });
    } catch (err) {
      if ((err as Error).name !== 'ConsumerNotFoundError') throw err;
      await jsm.consumers.add(stream.name, config);
    }
    const js = jetstream(nc);
    const consumer = await js.consumers.get(stream.name, o.group);
    const messages = await consumer.consume({ max_messages: settings.concurrency });
    const inflight = new Set<Promise<void>>();
    // The turn's acknowledgements go out together: nats.js writes to the socket in a microtask after a
    // message is queued, so acknowledgements made one by one, as handlers resolve, were a write each
    // (10,012 writes for 10,000 messages, and 222-242 µs of the worker's CPU a message; 1,619 writes and
    // 128-182 µs together, measured in turns on the same machine).
    let acking: JsMsg[] = [];
    const ack = (m: JsMsg) => {
      if (!acking.length) {
        setImmediate(() => {
          const all = acking;
          acking = [];
          for (const a of all) a.ack();
        });
      }
      acking.push(m);
    };
    const inbound = (m: JsMsg): Inbound => ({
      id: String(m.seq),
      deliveries: m.info.deliveryCount,
      // the time the server stored it (in the acknowledgement subject it hands out): no publisher can set it
      storedAt: Math.floor(m.info.timestampNanos / 1_000_000),
      decoded: decodeMessage((name: FieldName) => (m.headers?.has(name) ? m.headers.get(name) : undefined), m.data),
      async ack() {
        ack(m);
      },
      async retry(delayMs) {
        m.nak(delayMs);
      },
      async touch() {
        m.working();
      },
      async deadLetter(reason, deliveries) {
        const h = headers();
        for (const [name, values] of copied(m.headers)) for (const v of values) h.append(name, v);
        h.set('dead_reason', reason.replace(/[\r\n]+/g, ' '));
        h.set('dead_id', String(m.seq));
        h.set('dead_group', o.group);
        h.set('dead_deliveries', String(deliveries));
        h.set('dead_at', new Date().toISOString());
        await js.publish(deadSubject, m.data, { msgID: `${stream.name}/${m.seq}`, headers: h });
        m.term();
        return deadSubject;
      },
    });
    let slotFreed: (() => void) | undefined;
    const reading = (async () => {
      for await (const m of messages) {
        if (stopper.stopping) {
          m.nak();
          continue;
        }
        while (inflight.size >= settings.concurrency && !stopper.stopping) await new Promise<void>((r) => (slotFreed = r));
        if (stopper.stopping) {
          m.nak();
          continue;
        }
        const p = handleInbound(inbound(m), hs).finally(() => {
          inflight.delete(p);
          slotFreed?.();
        });
        inflight.add(p);
      }
    })();
    return {
      group: o.group,
      name: o.name ?? `${hostname()}:${process.pid}`,
      where: t.shown,
      deadLetters: deadSubject,
      async stop(options = {}) {
        stopper.begin();
        await messages.close();
        slotFreed?.();
        await reading.catch(() => undefined);
        await stopper.drain(inflight, options.timeoutMs);
        await nc.close();
      },
    };
  } catch (err) {
    await nc.close();
    throw err;
  }
}

/** What is in the stream (the newest `limit` messages of the subject), its consumer groups and its dead letters. */
export async function readNats(t: Target, limit: number): Promise<SinkView> {
  const nc = await connectTo(t);
  try {
    const jsm = await managerOf(nc, t);
    let name: string;
    try {
      name = await jsm.streams.find(t.name);
    } catch (err) {
      throw new NotFoundError(`No JetStream stream on ${where(t)} holds ${t.name}.`, { hint: 'A sink creates it with its first message (or a consumer when it starts).', cause: err });
    }
    const info = await jsm.streams.info(name);
    // the newest messages of the subject, read 32 at a time (one request each); in a stream that holds
    // other subjects too, at most ten times `limit` are looked at
    const deliveries: SinkView['deliveries'] = [];
    const oldest = Math.max(info.state.first_seq, info.state.last_seq - limit * 10 + 1);
    for (let seq = info.state.last_seq; seq >= oldest && seq > 0 && deliveries.length < limit; seq -= 32) {
      const batch = Array.from({ length: Math.min(32, seq - oldest + 1) }, (_, i) => seq - i);
      const got = await Promise.all(batch.map((s) => jsm.streams.getMessage(name, { seq: s }).catch((): StoredMsg | null => null)));
      for (const m of got) {
        if (!m || m.subject !== t.name || deliveries.length >= limit) continue;
        deliveries.push(entryOf(String(m.seq), (n) => (m.header?.has(n) ? m.header.get(n) : undefined), m.data));
      }
    }
    deliveries.reverse();
    const groups: SinkView['groups'] = [];
    for await (const c of jsm.consumers.list(name)) {
      if (c.config.filter_subject && c.config.filter_subject !== t.name) continue;
      groups.push({ name: c.name, pending: c.num_ack_pending, waiting: c.num_pending, redelivered: c.num_redelivered });
    }
    const deadName = await jsm.streams.find(deadSubjectOf(t.name)).catch(() => undefined);
    const dead = deadName ? await jsm.streams.info(deadName, { subjects_filter: deadSubjectOf(t.name) }) : undefined;
    return {
      sink: t.shown,
      broker: 'nats',
      stream: {
        name,
        subject: t.name,
        messages: info.state.messages,
        bytes: info.state.bytes,
        first: info.state.first_seq ? String(info.state.first_seq) : undefined,
        last: info.state.last_seq ? String(info.state.last_seq) : undefined,
      },
      dead_letters: { name: deadSubjectOf(t.name), messages: dead?.state.subjects?.[deadSubjectOf(t.name)] ?? dead?.state.messages ?? 0 },
      groups,
      deliveries,
    };
  } finally {
    await nc.close();
  }
}

/** NATS JetStream, as the registry (kinds.ts) holds it. */
export const NATS: SinkDefinition<NatsSettings> & { kind: 'nats' } = defineSink<'nats', NatsSettings>({
  kind: 'nats',
  label: 'NATS JetStream',
  schemes: { nats: { tls: false } },
  defaultPort: 4222,
  example: 'nats://host:4222/SUBJECT',
  userIsToken: true,
  pathProblem(path) {
    const problem = subjectProblem(path);
    return problem ? { problem, hint: 'The path is the subject deliveries are published to: nats://host:4222/wxhooks.deliveries' } : undefined;
  },
  pathFor: (label) => `${label.replace(/[^A-Za-z0-9]/g, '_')}.deliveries`,
  settings: {
    names: ['stream'],
    parse(get, what) {
      const stream = get('stream');
      if (stream !== undefined && !streamNameOk(stream)) throw new UsageError(`${what}'s stream "${printable(stream)}" is not a JetStream stream name (no dot, space, *, > or slash).`);
      return stream === undefined ? {} : { stream };
    },
  },
  publisher: openNatsSink,
  consumer: openNatsConsumer,
  read: readNats,
});
