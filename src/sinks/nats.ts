import { hostname } from 'node:os';
import { DEFAULTS } from '../delivery/defaults.js';
import type { JetStreamManager, JsMsg, StoredMsg, StreamInfo } from '@nats-io/jetstream';
import type { MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import { NotFoundError, UnreachableError, UsageError } from '../errors.js';
import { consumerSettings, handleInbound, type ConsumerEvent, type Inbound } from './consumer.js';
import { decodeMessage, encodeMessage, type FieldName } from './message.js';
import { BrokerState, checkGroup, SinkRefusedError, SinkUnavailableError, type ConsumeOptions, type Sink, type SinkConsumer, type SinkOptions, type SinkStream } from './sink.js';
import { streamNameFor, type SinkTarget } from './sink-url.js';
import { entryOf, type SinkView } from './view.js';

/**
 * The NATS JetStream sink (loaded only when a nats:// URL is given): publishes with the pair's key as
 * `Nats-Msg-Id`, so the stream drops a duplicate within its duplicate window; consumes as a durable pull
 * consumer; moves dead letters to `SUBJECT.dead`.
 */

/**
 * The clients, loaded on first use. They are CommonJS modules: their exports are taken from the import's
 * `default`, which Node and the CLI's bundle both give (esbuild's chunk of a CommonJS module has no named
 * exports, so `const { connect } = await import(…)` found nothing in the bundled CLI).
 */
const natsClient = async () => (await import('@nats-io/transport-node')).default;
const jetStreamClient = async () => (await import('@nats-io/jetstream')).default;

const ns = (ms: number) => ms * 1_000_000;
const ms = (ns: number) => Math.round(ns / 1_000_000);
const where = (t: SinkTarget) => `${t.host}:${t.port}`;
/** The subject dead letters of a subject go to: not held by its stream, which holds exactly the subject. */
export const deadSubjectOf = (subject: string) => `${subject}.dead`;

/** Connects; `watch` hears the connection go and come back. */
async function connectTo(t: SinkTarget, watch?: { lost(reason: string): void; back(): void }): Promise<NatsConnection> {
  const { connect } = await natsClient();
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: `${t.host.includes(':') ? `[${t.host}]` : t.host}:${t.port}`,
      ...(t.password !== undefined ? { user: t.username ?? '', pass: t.password } : t.username !== undefined ? { token: t.username } : {}),
      name: `wxhooks ${hostname()}:${process.pid}`,
      timeout: 5000,
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
async function managerOf(nc: NatsConnection, t: SinkTarget, timeout?: number): Promise<JetStreamManager> {
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

/** The stream that holds `subject`, or a new one with our settings (DECISIONS.md, "The sinks"). Two starting at once create it once. */
async function streamFor(jsm: JetStreamManager, t: SinkTarget, subject: string, newName: string): Promise<SinkStream> {
  const { RetentionPolicy, StorageType, DiscardPolicy } = await jetStreamClient();
  const described = (info: StreamInfo, created: boolean): SinkStream => ({
    name: info.config.name,
    subject,
    created,
    dedupeMs: ms(info.config.duplicate_window ?? 0),
    keepMs: ms(info.config.max_age ?? 0),
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
          discard: DiscardPolicy.Old,
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

/** A failed JetStream call in words, and whether the broker (not this message) is the reason. */
function unavailable(err: unknown, t: SinkTarget): SinkUnavailableError {
  const e = err as Error & { code?: unknown };
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

export async function openNatsSink(t: SinkTarget, options: SinkOptions = {}): Promise<Sink> {
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
    const stream = await streamFor(jsm, t, t.name, t.stream ?? streamNameFor(t.name));
    const acks = new Acks(createInbox(), timeout);
    nc.subscribe(`${acks.inbox}.*`, { callback: (_err, m) => acks.take(m.subject, m.data, m.headers) });
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
          state.failed(op, e.message);
          throw e;
        }
      },
      async close() {
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

export async function openNatsConsumer(t: SinkTarget, o: ConsumeOptions): Promise<SinkConsumer> {
  checkGroup(o.group);
  const { jetstream, AckPolicy, DeliverPolicy } = await jetStreamClient();
  const { headers } = await natsClient();
  const settings = consumerSettings(o);
  const state = new BrokerState(o.onConnection);
  const nc = await connectTo(t, { lost: (reason) => state.client(true, reason), back: () => state.client(false) });
  const stopping = new AbortController();
  try {
    const jsm = await managerOf(nc, t);
    const stream = await streamFor(jsm, t, t.name, t.stream ?? streamNameFor(t.name));
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
    const hs = { ...settings, store: o.store, handler: o.handler, stopping: stopping.signal, report: (e: ConsumerEvent) => o.onEvent?.(e) };
    let slotFreed: (() => void) | undefined;
    const reading = (async () => {
      for await (const m of messages) {
        if (stopping.signal.aborted) {
          m.nak();
          continue;
        }
        while (inflight.size >= settings.concurrency && !stopping.signal.aborted) await new Promise<void>((r) => (slotFreed = r));
        if (stopping.signal.aborted) {
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
      async stop() {
        stopping.abort();
        await messages.close();
        slotFreed?.();
        await reading.catch(() => undefined);
        await Promise.all(inflight);
        await nc.close();
      },
    };
  } catch (err) {
    await nc.close();
    throw err;
  }
}

/** What is in the stream (the newest `limit` messages of the subject), its consumer groups and its dead letters. */
export async function readNats(t: SinkTarget, limit: number): Promise<SinkView> {
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
