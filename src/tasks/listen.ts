import type { TemporaryEvent } from '../api/temporary.js';
import type { Context } from '../context.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { isDelivered } from '../delivery/outcomes.js';
import type { LateNotification, Reconciled } from '../delivery/reconcile.js';
import type { RunProgress, RunTracker } from '../delivery/runs.js';
import type { StoreNotice } from '../delivery/store.js';
import { InterruptedError, StorageError } from '../errors.js';
import { tracesAsked } from '../observe/asked.js';
import type { ListenWatch, Serving } from '../observe/listen.js';
import { checkChain, EventLog, type SubscriptionCheck } from '../receiver/check.js';
import type { ReceiverEvent } from '../receiver/event.js';
import { History, PgHistory, type HistorySource } from '../receiver/history.js';
import type { RunningInspector } from '../receiver/inspector.js';
import { historyFromSaved, startListenPage } from '../receiver/listen-page.js';
import { reconcileWebhook, storeLookup, type RunWatch } from '../receiver/reconcile.js';
import { startRelayDoor, type RunningRelayDoor } from '../receiver/relay-door.js';
import type { RelayTarget } from '../receiver/relay-target.js';
import type { ForwardRoutes } from '../receiver/routes.js';
import { shownRoutes } from '../receiver/routes.js';
import { openSaveDir, saveKeyOf } from '../receiver/saved.js';
import { startReceiver, type RawDelivery, type RunningReceiver } from '../receiver/server.js';
import { closeSinks, openSinks } from '../receiver/sinks-step.js';
import { notComplete, whenToStop, type Seen, type Stop, type StopRules } from '../receiver/stop.js';
import type { RelayClientEvent } from '../relay/client.js';
import type { Scheme } from '../signing/layouts.js';
import { DIAGNOSES_PER_MINUTE } from '../signing/rules.js';
import type { Sink, SinkTarget } from '../sinks/sink.js';
import { HISTORY_DEFAULTS, type HistoryLimits } from '../store/history-limits.js';
import { openPairStore } from '../store/open.js';
import type { PairStore } from '../store/pair-store.js';
import { configDir } from '../store/paths.js';
import { announceListen, listenOnPort, type Announced } from '../store/running.js';
import { formatDuration } from '../util/duration.js';
import { BindError, isLoopback } from '../util/net.js';
import type { HostPort } from '../util/parse.js';
import { printable } from '../util/printable.js';
import { addSensitive } from '../util/redact.js';
import { listeningFor, RekeyableVerifier, watchSecret, type Listening, type SecretSourceFlags } from './listen-secrets.js';
import { serviceFor } from './service.js';
import { version } from '../version.js';

/**
 * A listen, from its flags to its end: the secret (or a temporary webhook), the processed-pairs store,
 * the sinks, the history, the door (its own port, or a relay), the record in the store folder, the
 * secret's rotation, the run watch, the inspector page, `--check`; then it waits for what ends it
 * (--exit-after, --until, --until-run, --within, a signal, a closed stdout, a relay that refuses it for
 * good) and closes everything in order, so that what was answered is stored. It prints nothing: what it
 * has to say goes to the command's view (`ListenView`), which renders it.
 */

/** listen's flags, parsed: what the task reads of them (`ListenOptions` of the command). */
export interface ListenSettings extends SecretSourceFlags, StopRules {
  host: string;
  scheme: Scheme;
  tolerance: number;
  check?: boolean;
  forwardTo?: ForwardRoutes;
  forwardTimeout: number;
  sink?: SinkTarget[];
  saveDir?: string;
  respondStatus?: number;
  dedupeTtl: number;
  fsync?: boolean;
  store?: string;
  storeSchema: string;
  claimTimeout: number;
  initEvent: boolean;
  maxBody: number;
  maxInflight: number;
  readTimeout: number;
  inspect?: HostPort;
  inspectHost?: string[];
  history: number;
  historySize: number;
  watchRuns?: boolean;
  watchModel?: string[];
  expectHours?: number[];
  metrics?: HostPort;
}

/** What a store notice is said as: its kind as the event. */
export type StoreNoticeEvent = { [K in StoreNotice['kind']]: Extract<StoreNotice, { kind: K }> & { event: K } }[StoreNotice['kind']];

/** What listen says of itself while it runs (each its JSON line, as it is, with --json). */
export type ListenNotice =
  | { event: 'store_lost'; reason?: string }
  | { event: 'store_restored' }
  | StoreNoticeEvent
  | { event: 'sink'; sink: string; stream: string; created: boolean; dedupe_ms: number }
  | { event: 'sink_lost'; sink: string; reason?: string }
  | { event: 'sink_restored'; sink: string }
  | { event: 'sink_dropped'; sink: string; reason: string }
  | TemporaryEvent
  | { event: 'secret_changed'; webhook_id: string }
  | { event: 'inspector'; url: string }
  | { event: 'metrics'; url: string; health: string; ready: string }
  | { event: 'traces'; url: string; protocol: string };

/** Where a listen's doings go: the command renders each (text or JSON). */
export interface ListenView {
  /** A request's report; with --until-run, the run's progress when this delivery counted towards it. */
  delivery(event: ReceiverEvent, progress?: RunProgress): void;
  /** A replay made from the inspector page, of request `of`. */
  replayed(event: ReceiverEvent, of: number): void;
  notice(notice: ListenNotice): void;
  /** What happens to the link with the relay (--relay). */
  link(event: RelayClientEvent, relay: RelayTarget): void;
  /** Something the user should know; listening goes on. */
  warn(text: string): void;
  /** Deliveries are taken now: where, and for what. */
  ready(receiver: Pick<RunningReceiver, 'url' | 'port'>, listening: Listening): void;
  /** `--check`: one subscription's link of the chain. */
  checked(check: SubscriptionCheck, webhookId: string): void;
  /** `--watch-runs`: starts the run watch that says each late notification (and runs --on-late), with this look; `told` hears each too. */
  watchRuns(look: () => Promise<Reconciled>, told?: (late: LateNotification) => void): RunWatch;
  /** Everything is up: listen waits for what ends it. */
  waiting(): void;
  /** Everything is closed: what is still buffered goes out. */
  closed(): void;
}

/**
 * Bodies over this are parsed for their small members only (what the report shows): a 450 KB gridded
 * forecast parsed whole leaves ~1.2 MB of strings and numbers per delivery for the garbage collector, and
 * 300 of them at once took RSS to three times --max-inflight (test/hostile/public-url.hostile.test.ts).
 */
const SHALLOW_ABOVE = 64 * 1024;

export async function listen(ctx: Context, o: ListenSettings, runs: RunTracker | undefined, shown: ListenView): Promise<void> {
  // --metrics, --inspect, OpenTelemetry: what listen knows of itself (src/observe/listen.ts) hears what the view is told
  const watch = await watchListenFor(ctx, o, shown);
  const view = watch ? watchedView(shown, watch) : shown;
  const saveWarning = o.saveDir === undefined ? undefined : await openSaveDir(o.saveDir, configDir(ctx.env)); // writable; its files marked as verified (#32.9)
  if (saveWarning) view.warn(saveWarning);
  const log = o.check ? new EventLog() : undefined; // what --check waits on (only then: nothing else reads it)

  const listening = await listeningFor(ctx, o, { temporary: (event) => view.notice(event), warn: (text) => view.warn(text) });
  listening.secrets.forEach(addSensitive);
  const { temporary } = listening;
  let receiver: RunningReceiver | undefined;
  let relayFailed: Promise<never> | undefined;
  let relayDoor: RunningRelayDoor | undefined;
  let store: PairStore | undefined;
  let inspector: RunningInspector | undefined;
  let announced: Announced | undefined;
  let secretWatch: { close(): void } | undefined;
  let sinks: Sink[] | undefined;
  let runWatch: RunWatch | undefined;
  try {
    const keepsHistory = ctx.given('history') || ctx.given('historySize') || o.inspect !== undefined;
    const limits: HistoryLimits = { ...HISTORY_DEFAULTS, rows: o.history, bytes: o.historySize };
    const opened = await openPairStore({
      url: o.store ?? ctx.env.WXHOOKS_STORE_URL ?? DEFAULTS.storeUrl,
      dir: configDir(ctx.env),
      webhook: temporary?.hook.id ?? o.webhook,
      temporary: temporary !== undefined, // a file of its own per webhook
      ttlMs: o.dedupeTtl,
      fsync: o.fsync,
      schema: o.storeSchema,
      leaseMs: o.claimTimeout,
      history: keepsHistory ? limits : undefined,
      clock: ctx.clock,
      onConnection: (state, reason) => view.notice(state === 'lost' ? { event: 'store_lost', reason } : { event: 'store_restored' }),
      onNotice: (notice) => view.notice({ event: notice.kind, ...notice } as StoreNoticeEvent),
    });
    store = opened.store;
    if (opened.kind === 'postgres' && o.fsync) view.warn('--fsync is for the file store; PostgreSQL commits each batch before its answers anyway.');
    const history: HistorySource | undefined = opened.kind === 'postgres' ? (keepsHistory ? new PgHistory(opened.store, limits) : undefined) : o.inspect ? new History(limits) : undefined;
    // what --save-dir holds from before, listed first: read before the door takes a request, so that what
    // this listen saves is listed once, as it comes
    const saveKey = o.saveDir ? saveKeyOf(o.saveDir) : undefined; // the key openSaveDir took from the store folder
    if (o.saveDir && history && o.inspect) await historyFromSaved(history, o.saveDir, saveKey, listening.secrets);

    if (o.sink) sinks = await startSinks(o, view);
    const verifier = new RekeyableVerifier({ secret: listening.secrets, scheme: o.scheme, tolerance: o.tolerance, diagnosePerMinute: DIAGNOSES_PER_MINUTE, shallowAbove: SHALLOW_ABOVE });
    let seen: Seen = { accepted: 0 };
    let fatal: string | undefined;
    let finish: (why: Stop) => void = () => undefined;
    const finished = new Promise<Stop>((resolve) => (finish = resolve));
    const door = {
      host: o.host,
      path: o.path,
      verifier,
      store,
      maxBody: o.maxBody,
      maxInflight: o.maxInflight,
      forwardTo: o.forwardTo,
      forwardTimeoutMs: o.forwardTimeout,
      sinks,
      saveDir: o.saveDir,
      respondStatus: o.respondStatus,
      readTimeoutMs: o.readTimeout,
      clock: ctx.clock,
      keepsRaw: history !== undefined,
      watch: watch?.receive,
      onEvent(event: ReceiverEvent, raw?: RawDelivery) {
        const progress = runs && isDelivered(event.outcome) && runs.add(event)?.counted ? runs.progress()! : undefined;
        view.delivery(event, progress);
        log?.push(event);
        history?.add(event, raw);
        const step = whenToStop(o, seen, { event, runComplete: progress?.complete });
        seen = step.seen;
        if (step.stop === 'storage_failed') fatal ??= event.message;
        if (step.stop) finish(step.stop);
      },
    };
    if (listening.relay) {
      const relay = listening.relay;
      const relayed = await startRelayDoor({
        ...door,
        ...relay,
        relay: relay.url,
        secrets: listening.secrets,
        tolerance: o.tolerance,
        scheme: o.scheme,
        onLink: (e) => view.link(e, relay),
      });
      receiver = relayed;
      relayDoor = relayed;
      relayFailed = relayed.failed;
      // it keeps trying until the channel is open (a line at every try): a signal meanwhile stops it as it would later, in order
      await Promise.race([
        relayed.ready,
        ctx.interrupted.then((signal) => {
          throw new InterruptedError(signal);
        }),
      ]);
    } else receiver = await startReceiver({ ...door, port: o.port });
    announced = await announceListen(configDir(ctx.env), {
      pid: process.pid,
      host: o.host,
      port: receiver.port,
      receiver: receiver.url,
      inspector: null,
      ...shownRoutes(o.forwardTo),
      webhook_id: listening.temporary?.hook.id ?? o.webhook ?? null,
      base_url: listening.base ?? null,
      started: new Date(ctx.clock.now()).toISOString(),
    });
    view.ready(receiver, listening);
    if (o.webhook !== undefined && listening.base !== undefined) {
      const webhook = o.webhook;
      secretWatch = watchSecret(ctx, webhook, listening.base, listening.secrets[0]!, verifier, (secrets) => {
        relayDoor?.rekey(secrets); // --relay: the relay verifies with it too from now on
        view.notice({ event: 'secret_changed', webhook_id: webhook });
      });
    }
    if (o.watchRuns) runWatch = await watchRuns(ctx, o, listening, store, view);
    if (watch) await serveWatch(watch, { store, sinks, inflight: receiver.inflight, relay: Boolean(listening.relay), late: runWatch?.late.bind(runWatch) }, view);

    if (history && o.inspect) {
      const watching = runWatch;
      const page = await startListenPage({
        ...o.inspect,
        hostNames: o.inspectHost,
        history,
        dir: configDir(ctx.env),
        clock: ctx.clock,
        secrets: listening.secrets,
        saveKey,
        forwardTo: o.forwardTo,
        forwardTimeoutMs: o.forwardTimeout,
        receiverUrl: receiver.url,
        webhook: listening.temporary ? undefined : o.webhook,
        replayed: (event, of) => view.replayed(event, of),
        late: watching && (() => watching.late()),
        figures: watch && (() => watch.figures.figures()),
        about: {
          url: receiver.url,
          ...shownRoutes(o.forwardTo),
          keep: o.history,
          expect_hours: o.expectHours ?? null,
          need_init: o.initEvent,
          webhook_id: listening.temporary?.hook.id ?? o.webhook ?? null,
          relay: listening.relay ? { url: listening.relay.url, channel: listening.relay.channel } : null,
        },
      });
      if (page.warning) view.warn(page.warning);
      inspector = page.inspector;
      await announced.update({ inspector: inspector.url.replace(/\?token=.*$/, '') }); // for `wxhooks mcp` to find, without its token
      view.notice({ event: 'inspector', url: inspector.url });
      if (!isLoopback(o.inspect.host))
        view.warn(`the inspector on ${o.inspect.host} can be reached from other machines: whoever has its link sees every delivery in full, and can replay it to your app.`);
    }
    if (log) await check(ctx, o, listening, receiver, log, view);
    view.waiting();

    if (o.within !== undefined) {
      void ctx.clock.after(o.within).then(() => {
        const step = whenToStop(o, seen, 'expired');
        if (step.stop) finish(step.stop);
      });
    }
    const why = await Promise.race([finished, ctx.interrupted, ...(relayFailed ? [relayFailed] : [])]);
    if (why === 'not_complete') throw notComplete(o, runs);
    if (why === 'storage_failed')
      throw new StorageError(`Stopped: ${fatal ?? 'the processed pairs can no longer be written.'}`, {
        hint: 'Free some space or fix the store, then start listen again: the service retries what was not acknowledged.',
      });
    if (why !== 'done') throw new InterruptedError(why);
  } catch (err) {
    throw err instanceof BindError && err.reason === 'in_use' && receiver === undefined ? await portTaken(ctx, o, listening, err) : err;
  } finally {
    await runWatch?.stop();
    secretWatch?.close();
    await announced?.remove();
    // in this order: no new request, every request taken answered and its pair stored, then the store closed
    await inspector?.close();
    await receiver?.close();
    await watch?.close(); // after the last delivery's span ended: it is sent
    await closeSinks(sinks); // after the last delivery in flight was published and answered
    await store?.close();
    await temporary?.remove();
    view.closed();
  }
}

/**
 * `--sink`: every sink opened before the port is (exit 6 naming the broker, never its password; exit 2
 * for a broker set to drop what no worker has read, unless its URL says ?drops=accept); a notice when a
 * broker goes and when it is back, and when it is found to have dropped what no worker read; a warning
 * for each drop accepted, and when a broker forgets a pair sooner than the store.
 */
async function startSinks(o: ListenSettings, view: ListenView): Promise<Sink[]> {
  const sinks = await openSinks(o.sink!, {
    connection: (sink, state, reason) => view.notice(state === 'lost' ? { event: 'sink_lost', sink, reason } : { event: 'sink_restored', sink }),
    drops: (sink, what) => view.notice({ event: 'sink_dropped', sink, reason: what }),
  });
  for (const s of sinks) {
    view.notice({ event: 'sink', sink: s.where, stream: s.stream.name, created: s.stream.created, dedupe_ms: s.stream.dedupeMs });
    for (const d of s.stream.drops) view.warn(`the sink ${s.where} may drop what no worker has read (accepted with ?drops=accept): ${d.what}. To stop it: ${d.fix}.`);
    if (s.stream.dedupeMs < o.dedupeTtl) {
      view.warn(
        `the sink ${s.where} drops a second copy of a pair for ${formatDuration(s.stream.dedupeMs)} only, less than --dedupe-ttl (${formatDuration(o.dedupeTtl)}): the same delivery given to two receivers further apart than that is in the stream twice. To match, ${s.stream.dedupeFix}.`,
      );
    }
  }
  return sinks;
}

/** The webhook listen is for, at the service (the temporary one, or the one looked up, else asked now). */
async function webhookOf(ctx: Context, o: ListenSettings, l: Listening) {
  const { service } = l.temporary ?? (await serviceFor(ctx));
  const hook = l.temporary?.hook ?? l.hook ?? (await service.getWebhook(o.webhook!));
  return { service, hook };
}

/**
 * `--watch-runs`: every --watch-interval, what the forecast API published for the webhook's subscriptions
 * against what this listen's store holds as handed over; each notification available for longer than
 * --late-after and not delivered is said once by the view's watch, and listed in the inspector's Runs view
 * while it is late.
 */
async function watchRuns(ctx: Context, o: ListenSettings, l: Listening, store: PairStore, view: ListenView): Promise<RunWatch> {
  const { service, hook } = await webhookOf(ctx, o, l);
  return view.watchRuns(() => reconcileWebhook({ service, webhook: hook, window: { since: ctx.clock.now() - DEFAULTS.reconcileSinceMs }, models: o.watchModel, lookup: storeLookup(store) }));
}

/** listen's watch (src/observe/listen.ts), loaded only for --metrics, --inspect or the OTEL_* variables. */
async function watchListenFor(ctx: Context, o: ListenSettings, view: ListenView): Promise<ListenWatch | undefined> {
  const tracing = tracesAsked(ctx.env);
  if (!o.metrics && !tracing && o.inspect === undefined) return undefined;
  const { watchListen } = await import('../observe/listen.js');
  return watchListen({ metrics: o.metrics, tracing, inspect: o.inspect !== undefined, env: ctx.env, now: ctx.clock.now(), version: version(), warn: (text) => view.warn(text) });
}

/** The view, with the watch told what it is told: each request, listen's notices, the relay link, each late notification. */
export function watchedView(view: ListenView, watch: ListenWatch): ListenView {
  return {
    ...view,
    delivery(event, progress) {
      watch.event(event);
      view.delivery(event, progress);
    },
    notice(notice) {
      watch.said(notice);
      view.notice(notice);
    },
    link(event, relay) {
      watch.relayLink(event.kind === 'connected' ? undefined : `unreachable: ${event.reason}`);
      view.link(event, relay);
    },
    watchRuns: (look, told) =>
      view.watchRuns(look, (late) => {
        watch.figures.late(late);
        told?.(late);
      }),
  };
}

/** `--metrics`: its port served once listen takes deliveries, and said (a `metrics` notice); where traces go, said too. */
async function serveWatch(watch: ListenWatch, serving: Serving, view: ListenView): Promise<void> {
  const served = await watch.serve(serving);
  if (served) view.notice({ event: 'metrics', url: `${served.url}/metrics`, health: `${served.url}/healthz`, ready: `${served.url}/readyz` });
  const t = watch.traces;
  if (t) view.notice({ event: 'traces', url: t.url, protocol: t.protocol });
}

/** `--check`: pings each subscription and says, for each, which link of the chain works. */
async function check(ctx: Context, o: ListenSettings, l: Listening, receiver: RunningReceiver, log: EventLog, view: ListenView): Promise<void> {
  const { service, hook } = await webhookOf(ctx, o, l);
  const checks = await checkChain(service, hook, log, ctx.global.timeoutMs, { port: receiver.port, path: o.path });
  for (const c of checks) view.checked(c, hook.id);
}

/**
 * The port listen was to bind is taken: by another `wxhooks listen` (named, when it said so in the store
 * folder), or by something else. Another port is no cure by itself: the webhook delivers to its URL, so a
 * new port needs the webhook pointed there too.
 */
async function portTaken(ctx: Context, o: ListenSettings, l: Listening, err: BindError): Promise<BindError> {
  const other = await listenOnPort(configDir(ctx.env), err.port);
  const who = other
    ? `by another \`wxhooks listen\` (pid ${other.pid}${other.webhook_id ? `, for webhook ${other.webhook_id}` : ''}, since ${other.started.slice(11, 19)})`
    : 'perhaps by another `wxhooks listen` (or another program)';
  const webhook = l.temporary?.hook.id ?? o.webhook;
  const url = l.hook?.url ?? (webhook ? `http://127.0.0.1:${err.port}${o.path}` : undefined);
  const hint = [
    other ? `Stop it first (\`kill ${other.pid}\`, or Ctrl-C in its terminal)` : `Stop what holds port ${err.port} first`,
    webhook
      ? `or listen on another port: but webhook ${webhook} delivers to ${printable(url!)}, so a new port needs \`wxhooks webhook update ${webhook} --url http://127.0.0.1:NEW_PORT${o.path}\` as well.`
      : 'or listen on another one with --port (and point the webhook there).',
  ].join(', ');
  return new BindError(`Port ${err.port} on ${err.host} is already in use, ${who}.`, { hint, reason: err.reason, port: err.port, host: err.host, cause: err });
}
