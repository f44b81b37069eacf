import { randomBytes } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { hostname } from 'node:os';
import type { Command } from 'commander';
import { NGROK_API, ngrokPublicUrl } from '../api/ngrok.js';
import type { Webhook } from '../api/normalize.js';
import { createTemporary, type Temporary } from '../api/temporary.js';
import { line, type Act, type Context } from '../context.js';
import { InterruptedError, NotVerifiedError, StorageError, UsageError, type WxError } from '../errors.js';
import { describeCheck, describeNotice, describeTemporary, formatEvent } from '../output/listen.js';
import { reportWriter } from '../output/report-writer.js';
import { progressBar, progressLine, StatusLine } from '../output/run-progress.js';
import { styleFor, type Style } from '../output/style.js';
import { checkChain, EventLog } from '../receiver/check.js';
import { History, PgHistory, type HistorySource } from '../receiver/history.js';
import { startInspector, type RunningInspector } from '../receiver/inspector.js';
import type { ReceiverEvent } from '../receiver/event.js';
import { replayable, replayCommands, replayFromHistory } from '../receiver/replay.js';
import { describeRoutes, forwardRoute, routeFor, shownRoutes } from '../receiver/routes.js';
import { openSaveDir, readSavedDir, saveKeyOf, savedAsEvent, savedBody } from '../receiver/saved.js';
import { isDelivered } from '../delivery/outcomes.js';
import { compressHours, parseRunName, RunTracker } from '../delivery/runs.js';
import { startReceiver, type RawDelivery, type RunningReceiver } from '../receiver/server.js';
import { closeSinks, openSinks } from '../receiver/sinks-step.js';
import { sinkFlagHelp } from '../sinks/kinds.js';
import type { Sink } from '../sinks/sink.js';
import { sinkUrls } from '../sinks/sink-url.js';
import { startRelayDoor, type RunningRelayDoor } from '../receiver/relay-door.js';
import { reconcileWebhook, storeLookup, type RunWatch } from '../receiver/reconcile.js';
import type { LateNotification } from '../delivery/reconcile.js';
import type { RunFigures } from '../observe/figures.js';
import { watchLateRuns } from '../output/late.js';
import { describeRelayLink, relayLinkEvent } from '../output/listen-relay.js';
import { checkRelayOptions, relayTemporary, type RelayTarget } from '../receiver/relay-target.js';
import { lastingChannel } from '../relay/channels.js';
import { BODY_READS, DEFAULTS } from '../delivery/defaults.js';
import { DIAGNOSES_PER_MINUTE } from '../signing/rules.js';
import { Verifier } from '../signing/verify.js';
import { HISTORY_DEFAULTS, type HistoryLimits } from '../store/history-limits.js';
import { openPairStore } from '../store/open.js';
import type { PairStore } from '../store/pair-store.js';
import { announceListen, listenOnPort, type Announced } from '../store/running.js';
import { configDir } from '../store/paths.js';
import { storeKind } from '../store/store-url.js';
import { formatDuration } from '../util/duration.js';
import type { LineBuffer } from '../util/line-buffer.js';
import { BindError, isLoopback } from '../util/net.js';
import { collect, duration, hostPort, hours, integer, isoTime, size, timeLimit, url } from '../util/parse.js';
import { printable } from '../util/printable.js';
import { addSensitive } from '../util/redact.js';
import { isKnownType, SUBSCRIPTION_TYPES, suggestion } from '../vocabulary.js';
import { declare, type OptionsOf } from '../flags/option-types.js';
import { accumulated, msDefault, portOption, schemeOption, sizeDefault, toleranceOption, valued } from '../flags/options.js';
import { baseUrlFor, serviceFor } from '../tasks/service.js';
import { resolveSecrets, secretStoreFor, type SecretSource } from '../tasks/secrets.js';
import { secretSourceOptions } from '../flags/sources.js';
import { tracesAsked } from '../observe/asked.js';
import type { ListenWatch, Serving } from '../observe/listen.js';
import { version } from '../version.js';

/**
 * Bodies over this are parsed for their small members only (what the report shows): a 450 KB gridded
 * forecast parsed whole leaves ~1.2 MB of strings and numbers per delivery for the garbage collector, and
 * 300 of them at once took RSS to three times --max-inflight (test/hostile/public-url.hostile.test.ts).
 */
const SHALLOW_ABOVE = 64 * 1024;

/** listen's flags, in the groups its help shows; `ListenOptions` is derived from them. */
function declareListen(cmd: Command) {
  return declare(cmd)
    .optionsGroup('Where it listens:')
    .addOption(portOption(8787))
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--path <path>', 'the path deliveries are POSTed to', '/')
    .option('--relay <url>', 'no port of its own: take deliveries from your relay (`wxhooks relay`), token from WXHOOKS_RELAY_TOKEN; without --webhook, a temporary webhook whose URL is the relay')
    .optionsGroup('What it verifies with:')
    .with<Pick<SecretSource, 'webhook' | 'secretEnv'>>((c) => secretSourceOptions(c, 'verify with'))
    .addOption(schemeOption('signature layout: auto tries each that signs the timestamp, then pins it'))
    .addOption(toleranceOption('how far a timestamp may be off, either way'))
    .optionsGroup('A webhook of its own, from the real service:')
    .option('--public-url <url>', 'create a temporary webhook pointing at this public URL (a tunnel to here), deleted on exit; "ngrok" asks the local ngrok agent')
    .option('--subscribe <spec>', 'with --public-url or --relay: a subscription of the temporary webhook, TYPE[:key=value;...] (repeatable; default: one of each type)', collect)
    .option('--clean', 'with --public-url: delete the temporary webhooks of this host that no running listen holds')
    .option('--check', 'once ready, ping each subscription through the service and say which link of the chain works')
    .optionsGroup('What it does with a verified delivery:')
    .addOption(
      accumulated('--forward-to <url|type=url>', 'POST each verified delivery (exact bytes and headers) to your app: TYPE=URL for a type (repeatable), a URL alone for every other type', forwardRoute),
    )
    .addOption(valued('--forward-timeout <duration>', 'how long your app may take', timeLimit, msDefault(DEFAULTS.forwardTimeoutMs)))
    .addOption(accumulated('--sink <url>', sinkFlagHelp(), sinkUrls))
    .option('--save-dir <dir>', 'write each verified delivery to a file that `verify` and `send` read back')
    .addOption(valued('--respond-status <code>', 'answer verified deliveries with this status (e.g. 500, to watch the retries)', integer(200, 599)))
    .optionsGroup('Processed once (the processed pairs):')
    .addOption(valued('--dedupe-ttl <duration>', 'how long a processed (trigger, subscription) pair is remembered', duration, msDefault(DEFAULTS.pairTtlMs)))
    .option('--fsync', 'sync each processed pair to the disk before answering (survives a power loss; slower)')
    .option(
      '--store <url>',
      `where processed pairs (and the history) are kept: "file" (the store folder), or postgres://user:password@host/db shared by several receivers (else WXHOOKS_STORE_URL, else "${DEFAULTS.storeUrl}")`,
    )
    .option('--store-schema <name>', 'with a postgres store: the schema its tables are in', DEFAULTS.schema)
    .addOption(
      valued('--claim-timeout <duration>', 'with a postgres store: how long a claim holds before another instance takes it over (its holder died)', timeLimit, msDefault(DEFAULTS.claimLeaseMs)),
    )
    .optionsGroup('When it stops (a CI gate):')
    .addOption(valued('--exit-after <n>', 'exit 0 after N verified new deliveries', integer(1)))
    .option('--until <type>', 'exit 0 at the first verified delivery of this type')
    .option('--until-run [model@init]', 'exit 0 once a model run is complete: every --expect-hours hour, and its initialization_time.available (default: the first run seen)')
    .addOption(valued('--expect-hours <range>', "with --until-run (or --inspect's runs view): the forecast hours that make a run complete, such as 0-240/6 or 0-72/3,78-240/6", hours))
    .option('--no-init-event', 'with --until-run: the run is complete without its initialization_time.available')
    .addOption(valued('--within <duration>', 'with --until or --until-run: exit 9 if it has not come by then (and say what is missing)', duration))
    .optionsGroup('Limits (what any sender can make it hold):')
    .addOption(valued('--max-body <size>', 'refuse bodies over this size with 413', size, sizeDefault(DEFAULTS.maxBodyBytes)))
    .addOption(
      valued(
        '--max-inflight <size>',
        'the body bytes all requests together may hold while they are read and processed (with --save-dir, each counts twice); past it, 503',
        size,
        sizeDefault(DEFAULTS.maxInflightBytes),
      ),
    )
    .addOption(valued('--read-timeout <duration>', `slow-client guard: headers must arrive within this, the whole request within ${BODY_READS} times it`, timeLimit, msDefault(DEFAULTS.readTimeoutMs)))
    .optionsGroup('The inspector page:')
    .addOption(
      valued(
        '--inspect [host:port]',
        'serve the inspector page: every delivery live, in detail, replayable (default 127.0.0.1:8789); listen prints its link, with the token it needs',
        hostPort,
      ).preset('127.0.0.1:8789'),
    )
    .option('--inspect-allow-remote', 'let --inspect bind an address other machines can reach (the token is still needed)')
    .option('--inspect-host <name>', 'with --inspect-allow-remote: a host name the page is reached by (repeatable), besides its address', collect)
    .addOption(
      valued('--history <n>', 'with --inspect, or a postgres store: how many verified requests are kept (refused ones apart: the last 100, their first 4 KiB)', integer(1, 1_000_000), [
        HISTORY_DEFAULTS.rows,
        String(HISTORY_DEFAULTS.rows),
      ]),
    )
    .addOption(valued('--history-size <size>', 'the body bytes the kept verified requests may hold together; past it, older bodies are kept in part', size, [HISTORY_DEFAULTS.bytes, '64MiB']))
    .optionsGroup('Late runs (the forecast API against what arrived):')
    .option('--watch-runs', "ask the forecast API what it published for the webhook's subscriptions, and say which forecast hours are late: available for longer than --late-after and not delivered")
    .addOption(valued('--watch-interval <duration>', 'with --watch-runs: how often the forecast API is asked', timeLimit, msDefault(DEFAULTS.watchIntervalMs)))
    .addOption(valued('--late-after <duration>', 'with --watch-runs: how long an available hour may take to arrive', duration, msDefault(DEFAULTS.lateAfterMs)))
    .option('--on-late <cmd>', 'with --watch-runs: a shell command run for each late notification, its details in WXHOOKS_LATE_* (WXHOOKS_LATE_JSON: all of them)')
    .option('--watch-model <model>', 'with --watch-runs: a model a subscription without a model filter receives (repeatable)', collect)
    .optionsGroup('In production:')
    .addOption(
      valued(
        '--metrics <[host:]port>',
        "serve /healthz, /readyz and Prometheus /metrics on a port of their own (never the receiver's; the host is 127.0.0.1 unless given). Traces: the OTEL_* variables (docs/production.md)",
        hostPort,
      ),
    );
}

/** What `runListen` is given: every flag of `declareListen`, parsed. */
export type ListenOptions = OptionsOf<ReturnType<typeof declareListen>>;

/** The three commonest uses, at the top of `listen --help` (the help is long: its examples came last). */
const FIRST_USES = `
The commonest uses:
  $ wxhooks listen --webhook 7             # each delivery verified, on a line
  $ wxhooks listen --webhook 7 --forward-to http://localhost:3000/webhooks
  $ wxhooks listen --public-url ngrok --check   # from the service, by a tunnel`;

export function register(cmd: Command, act: Act): void {
  cmd.summary(cmd.description()).description(`${cmd.description()}.\n${FIRST_USES}`);
  declareListen(cmd)
    .cmd.addHelpText(
      'after',
      `
The secret comes from --webhook ID (the store), --secret-env VAR, or stdin; never from a flag. With
--public-url, listen creates a webhook of its own pointing there, verifies with its secret (kept in
memory only) and deletes it when it exits, however it exits.
Answers: 200 verified (or your app's 2xx), 200 duplicate (skipped), 409 same delivery still in progress,
502 your app failed (not marked processed, so the retry can succeed), 401 bad signature or stale
timestamp, 400 missing header or not a JSON object, 413 too large, 503 the processed pair could not
be stored, too many bodies in flight, or a --sink's broker away (502: it refused the delivery for good).
A 2xx is sent only once the delivery's pair is written (and, with --sink, every broker has it).
If stdout is closed (listen --json | head), listen answers what is in flight, stores it, and exits 141.

More examples:
  $ wxhooks listen --public-url ngrok --subscribe forecast_hour.available --check   # only some types
  $ wxhooks listen --public-url https://abc.example.dev --forward-to http://localhost:3000/hooks
  $ wxhooks listen --secret-env WX_WEBHOOK_SECRET --json | jq 'select(.outcome=="accepted")'
  $ wxhooks listen --webhook 7 --until initialization_time.available --within 10m   # a CI gate
  $ wxhooks listen --webhook 7 --until-run wm-6 --expect-hours 0-240/6 --within 6h  # a whole run
  $ wxhooks listen --webhook 7 --forward-to forecast_hour.available=http://localhost:3000/forecast \\
      --forward-to http://localhost:3000/other                                      # by type, the rest to one URL
  $ wxhooks listen --webhook 7 --respond-status 500                                 # watch the retries
  $ wxhooks listen --webhook 7 --forward-to http://localhost:3000/hooks --inspect   # open the link it prints
  $ wxhooks listen --webhook 7 --sink nats://localhost:4222/wxhooks.deliveries      # into a stream workers consume`,
    )
    .action(act(runListen, { longRunning: true }));
}

/** Every check that needs more than one flag, or the environment: before anything starts (exit 2). */
function checkOptions(ctx: Context, o: ListenOptions): void {
  checkRelayOptions(ctx, o);
  if (!o.path.startsWith('/')) throw new UsageError(`--path must start with "/", not "${o.path}".`);
  if (o.within !== undefined && o.until === undefined && o.untilRun === undefined) throw new UsageError('--within goes with --until TYPE or --until-run.');
  if (o.until !== undefined && o.untilRun !== undefined) throw new UsageError('Give --until or --until-run, not both.');
  if (o.until !== undefined && !isKnownType(o.until)) {
    // it would wait for ever: no delivery of an unknown type comes
    throw new UsageError(`--until ${printable(o.until)}: no delivery has that type (${suggestion(o.until, SUBSCRIPTION_TYPES)}).`, { hint: `The types: ${SUBSCRIPTION_TYPES.join(', ')}.` });
  }
  if (o.untilRun !== undefined && o.expectHours === undefined) throw new UsageError('--until-run needs --expect-hours: the forecast hours that make the run complete, such as 0-240/6.');
  if (o.untilRun === undefined && !o.initEvent) throw new UsageError('--no-init-event goes with --until-run.');
  if (o.expectHours !== undefined && o.untilRun === undefined && o.inspect === undefined)
    throw new UsageError('--expect-hours goes with --until-run (the run to wait for), or --inspect (its runs view checks each run against them).');
  if (o.publicUrl !== undefined && (o.webhook !== undefined || o.secretEnv !== undefined)) {
    throw new UsageError('--public-url creates a temporary webhook of its own: it cannot be given with --webhook or --secret-env.', {
      hint: 'An existing webhook is never re-pointed. Drop --public-url to listen for an existing webhook (and point it here yourself).',
    });
  }
  if (o.publicUrl === undefined && o.relay === undefined && (o.subscribe !== undefined || o.clean)) throw new UsageError('--subscribe and --clean go with --public-url (or --relay).');
  if (o.publicUrl !== undefined && o.publicUrl !== 'ngrok') url(o.publicUrl, '--public-url');
  if (o.publicUrl === 'ngrok' && o.port === 0) throw new UsageError('--public-url ngrok needs a fixed --port: the ngrok tunnel forwards to one.');
  if (o.check && o.webhook === undefined && o.publicUrl === undefined) throw new UsageError('--check pings the webhook: give --webhook ID or --public-url.');
  if ((o.inspectAllowRemote || o.inspectHost) && o.inspect === undefined) throw new UsageError('--inspect-allow-remote and --inspect-host go with --inspect.');
  if (o.inspectHost && !o.inspectAllowRemote) throw new UsageError('--inspect-host names the page by a name other machines use: it goes with --inspect-allow-remote.');
  if (o.inspect && !isLoopback(o.inspect.host) && !o.inspectAllowRemote) {
    throw new UsageError(`--inspect on ${o.inspect.host} would show every delivery, in full, to other machines.`, {
      hint: 'Add --inspect-allow-remote if that is what you want (the page still needs its token).',
    });
  }
  const storeUrl = o.store ?? ctx.env.WXHOOKS_STORE_URL ?? DEFAULTS.storeUrl;
  if (storeKind(storeUrl) === 'file' && o.inspect === undefined && (ctx.given('history') || ctx.given('historySize'))) {
    throw new UsageError('--history and --history-size are for what --inspect keeps, or a postgres --store keeps: give one of them.');
  }
  if (!o.watchRuns && (ctx.given('watchInterval') || ctx.given('lateAfter') || o.onLate !== undefined || o.watchModel !== undefined)) {
    throw new UsageError('--watch-interval, --late-after, --on-late and --watch-model go with --watch-runs.');
  }
  if (o.watchRuns && o.webhook === undefined && o.publicUrl === undefined && o.relay === undefined) {
    throw new UsageError("--watch-runs asks the forecast API what the webhook's subscriptions should have been sent: give --webhook ID (or --public-url, --relay).");
  }
  if (o.metrics && o.relay === undefined && o.metrics.port !== 0 && o.metrics.port === o.port) {
    throw new UsageError(`--metrics ${o.metrics.port} is the receiver's own port: health and metrics are served on a port of their own.`, { hint: 'Give --metrics another port, such as 9464.' });
  }
  if (o.claimTimeout <= o.forwardTimeout) {
    throw new UsageError(
      `--claim-timeout (${formatDuration(o.claimTimeout)}) must be longer than --forward-timeout (${formatDuration(o.forwardTimeout)}): a claim must outlive the forward it covers.`,
    );
  }
}

/** What `listen` has counted so far towards its end. */
export interface Seen {
  /** Verified new deliveries (`--exit-after`). */
  accepted: number;
}

/** Why `listen` stops: what it waited for came (`done`), the store failed for good, or `--within` ran out first. */
export type Stop = 'done' | 'storage_failed' | 'not_complete';

/** What happened: a request's report (and, with --until-run, whether it completed the run), or `--within` ran out. */
export type StopInput = { event: Pick<ReceiverEvent, 'outcome' | 'type' | 'fatal'>; runComplete?: boolean } | 'expired';

/**
 * When `listen` stops, as a function of its flags, what it has counted and what just happened: after
 * `--exit-after N` verified new deliveries; at the first verified `--until TYPE` (a duplicate counts: the
 * delivery came); once `--until-run`'s run is complete; when the processed pairs can no longer be written;
 * and, when `--within` runs out first, not complete (exit 9).
 */
export function whenToStop(o: Pick<ListenOptions, 'exitAfter' | 'until' | 'untilRun' | 'within'>, seen: Seen, input: StopInput): { seen: Seen; stop?: Stop } {
  if (input === 'expired') return { seen, stop: o.within !== undefined && (o.until !== undefined || o.untilRun !== undefined) ? 'not_complete' : undefined };
  const { event } = input;
  const now = event.outcome === 'accepted' ? { accepted: seen.accepted + 1 } : seen;
  if (event.fatal) return { seen: now, stop: 'storage_failed' };
  if (o.exitAfter !== undefined && now.accepted >= o.exitAfter) return { seen: now, stop: 'done' };
  if (o.until !== undefined && event.type === o.until && isDelivered(event.outcome)) return { seen: now, stop: 'done' };
  if (o.untilRun !== undefined && input.runComplete) return { seen: now, stop: 'done' };
  return { seen: now };
}

/** The run `--until-run` waits for, from its value: `MODEL`, `MODEL@INIT` or `@INIT` (an ISO time), or nothing. */
function runTarget(o: ListenOptions): RunTracker | undefined {
  if (o.untilRun === undefined) return undefined;
  const named = parseRunName(o.untilRun);
  const init = named.init === undefined ? undefined : isoTime(named.init, `--until-run's initialisation time ("${named.init}")`);
  return new RunTracker({ model: named.model, init, expect: o.expectHours!, needInit: o.initEvent });
}

/** What `listen` is listening for: a temporary webhook of its own, or an existing one whose secret it is given. */
interface Listening {
  secrets: string[];
  from: string;
  temporary?: Temporary;
  /** The existing webhook, when it could be looked up. */
  hook?: Webhook;
  /** The service said it has no such webhook (its stored secret is of an older one). */
  missing?: boolean;
  /** The service's base URL, when known: what the stored secret is keyed by. */
  base?: string;
  /** With --relay: the relay and channel deliveries come from. */
  relay?: RelayTarget;
}

/**
 * `wxhooks listen`: check the flags; take the secret (or create a temporary webhook at the public URL);
 * open the processed-pairs store; start the receiver, which verifies, dedupes, forwards and reports each
 * request; with --inspect, the page; with --check, ping each subscription; then wait for what ends it
 * (--exit-after, --until, --until-run, --within, a signal, a closed stdout), and close everything in
 * order, so that what was answered is stored.
 */
export async function runListen(ctx: Context, o: ListenOptions): Promise<void> {
  checkOptions(ctx, o);
  const runs = runTarget(o);
  const saveWarning = o.saveDir === undefined ? undefined : await openSaveDir(o.saveDir, configDir(ctx.env)); // writable; its files marked as verified (#32.9)
  if (saveWarning) line(ctx.stderr, `warning: ${saveWarning}`);
  const json = ctx.global.json;
  const style = styleFor(ctx, ctx.stdout);
  const styleErr = styleFor(ctx, ctx.stderr);
  // the run's progress: a line kept at the bottom of a terminal, else a line for each hour that arrives
  const status = runs && !json && ctx.stderr.isTTY ? new StatusLine(ctx.stderr as typeof ctx.stderr & { columns?: number }) : undefined;
  const output = reportWriter(ctx.stdout, json, ctx.stdout.isTTY ? status : undefined);
  /** How a line is shown: fitted to the terminal's width of the moment, the layout pinned said with --verbose. */
  const view = () => ({ width: ctx.stdout.isTTY ? ctx.stdout.columns : undefined, verbose: ctx.global.verbose });
  /** `--metrics`, `--inspect`, OpenTelemetry: what listen knows of itself (src/observe/listen.ts); none otherwise. */
  let watch: ListenWatch | undefined;
  /** A line about listen itself: NDJSON on stdout with --json, else on stderr. (Its readiness and late hours follow the same lines.) */
  const say = (event: Record<string, unknown>, text: string) => (watch?.said(event), json ? output.push(JSON.stringify(event)) : line(ctx.stderr, text));
  const log = o.check ? new EventLog() : undefined; // what --check waits on (only then: nothing else reads it)

  watch = await watchListenFor(ctx, o);
  const listening = await listeningFor(ctx, o, say, styleErr);
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
      history: ctx.given('history') || ctx.given('historySize') || o.inspect ? limits : undefined,
      clock: ctx.clock,
      onConnection(state, reason) {
        if (state === 'lost') say({ event: 'store_lost', reason }, styleErr.red(`The PostgreSQL store is unreachable (${printable(reason ?? '?')}): deliveries are answered 503 until it is back.`));
        else say({ event: 'store_restored' }, styleErr.green('The PostgreSQL store is back.'));
      },
      onNotice: (notice) => say({ event: notice.kind, ...notice }, describeNotice(notice)),
    });
    store = opened.store;
    if (opened.kind === 'postgres' && o.fsync) line(ctx.stderr, 'warning: --fsync is for the file store; PostgreSQL commits each batch before its answers anyway.');
    const history: HistorySource | undefined =
      opened.kind === 'postgres' ? (ctx.given('history') || ctx.given('historySize') || o.inspect ? new PgHistory(opened.store, limits) : undefined) : o.inspect ? new History(limits) : undefined;

    if (o.sink) sinks = await startSinks(ctx, o, say, styleErr);
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
        watch?.event(event);
        output.push(json ? JSON.stringify(event) : formatEvent(event, style, view()));
        log?.push(event);
        history?.add(event, raw);
        let runComplete: boolean | undefined;
        if (runs && isDelivered(event.outcome) && runs.add(event)?.counted) {
          const p = runs.progress()!;
          if (json) {
            output.push(JSON.stringify({ event: 'run_progress', ...p }));
            if (p.complete) output.push(JSON.stringify({ event: 'run_complete', ...p }));
          } else if (status) status.show(progressBar(p, o.initEvent, styleErr));
          else line(ctx.stderr, progressLine(p, event.type === 'initialization_time.available' ? 'its initialization_time.available in' : `+${event.forecast_hour}h in`));
          runComplete = p.complete;
        }
        const step = whenToStop(o, seen, { event, runComplete });
        seen = step.seen;
        if (step.stop === 'storage_failed') fatal ??= event.message;
        if (step.stop) finish(step.stop);
      },
    };
    if (listening.relay) {
      const relayed = await startRelayDoor({
        ...door,
        ...listening.relay,
        relay: listening.relay.url,
        secrets: listening.secrets,
        tolerance: o.tolerance,
        scheme: o.scheme,
        onLink: (e) => say(relayLinkEvent(e), describeRelayLink(e, styleErr, listening.relay!)),
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
    reportReady(ctx, o, receiver, listening, output, styleErr);
    if (o.webhook !== undefined && listening.base !== undefined)
      secretWatch = watchSecret(ctx, o.webhook, listening.base, listening.secrets[0]!, verifier, say, (secrets) => relayDoor?.rekey(secrets));
    if (o.watchRuns) runWatch = await watchRuns(ctx, o, listening, store, say, styleErr);
    await serveWatch(watch, { store, sinks, inflight: receiver.inflight, relay: Boolean(listening.relay), late: runWatch?.late.bind(runWatch) }, say, styleErr);

    if (history && o.inspect) {
      const watching = runWatch;
      inspector = await startPage(
        ctx,
        o,
        history,
        receiver,
        listening,
        (event, id) => output.push(json ? JSON.stringify({ ...event, replay_of: id }) : formatEvent(event, style, view())),
        watching && (() => watching.late()),
        watch && (() => watch!.figures.figures()),
      );
      await announced.update({ inspector: inspector.url.replace(/\?token=.*$/, '') }); // for `wxhooks mcp` to find, without its token
      say({ event: 'inspector', url: inspector.url }, `Inspector: ${styleErr.bold(inspector.url)}`);
      if (!isLoopback(o.inspect.host))
        line(ctx.stderr, `warning: the inspector on ${o.inspect.host} can be reached from other machines: whoever has its link sees every delivery in full, and can replay it to your app.`);
    }
    if (log) await reportCheck(ctx, output, listening, o, receiver, log);
    if (status) status.show(styleErr.dim(`waiting for ${runs!.waitingFor()}: ${o.expectHours!.length} forecast hours${o.initEvent ? ' and its initialization_time.available' : ''}…`));

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
    output.flush();
    status?.done();
  }
}

/**
 * `--sink`: every sink opened before the port is (exit 6 naming the broker, never its password; exit 2
 * for a broker set to drop what no worker has read, unless its URL says ?drops=accept); a line when a
 * broker goes and when it is back, and when it is found to have dropped what no worker read; a warning
 * for each drop accepted, and when a broker forgets a pair sooner than the store.
 */
async function startSinks(ctx: Context, o: ListenOptions, say: (event: Record<string, unknown>, text: string) => void, style: Style): Promise<Sink[]> {
  const sinks = await openSinks(o.sink!, {
    connection(sink, state, reason) {
      if (state === 'lost') say({ event: 'sink_lost', sink, reason }, style.red(`The sink ${sink} is unreachable (${printable(reason ?? '?')}): deliveries are answered 503 until it is back.`));
      else say({ event: 'sink_restored', sink }, style.green(`The sink ${sink} is back.`));
    },
    drops: (sink, what) => say({ event: 'sink_dropped', sink, reason: what }, style.red(`The sink ${sink}: ${printable(what)}.`)),
  });
  for (const s of sinks) {
    say(
      { event: 'sink', sink: s.where, stream: s.stream.name, created: s.stream.created, dedupe_ms: s.stream.dedupeMs },
      `Publishing verified deliveries to ${s.where} (stream ${s.stream.name}${s.stream.created ? ', created now' : ''})`,
    );
    for (const d of s.stream.drops) line(ctx.stderr, `warning: the sink ${s.where} may drop what no worker has read (accepted with ?drops=accept): ${d.what}. To stop it: ${d.fix}.`);
    if (s.stream.dedupeMs < o.dedupeTtl) {
      line(
        ctx.stderr,
        `warning: the sink ${s.where} drops a second copy of a pair for ${formatDuration(s.stream.dedupeMs)} only, less than --dedupe-ttl (${formatDuration(o.dedupeTtl)}): the same delivery given to two receivers further apart than that is in the stream twice. To match, ${s.stream.dedupeFix}.`,
      );
    }
  }
  return sinks;
}

/**
 * The inspector page: its token kept in the store folder (so a page left open reconnects to a restarted
 * listen), the history it shows filled first, with --save-dir, with what was saved before, replay (with
 * changes) to --forward-to, and commands to send a delivery again.
 */
async function startPage(
  ctx: Context,
  o: ListenOptions,
  history: HistorySource,
  receiver: RunningReceiver,
  l: Listening,
  reportReplay: (event: ReceiverEvent, id: number) => void,
  late?: () => LateNotification[],
  figures?: () => RunFigures,
): Promise<RunningInspector> {
  const { keptValue } = await import('../store/kept.js');
  const token = await keptValue(configDir(ctx.env), 'inspector-token.json', () => randomBytes(24).toString('base64url'));
  if (token.warning) line(ctx.stderr, `warning: ${token.warning}`);
  const saveKey = o.saveDir ? saveKeyOf(o.saveDir) : undefined; // the key openSaveDir took from the store folder
  if (o.saveDir && history instanceof History) {
    // what was saved before: accepted if it shows it verified (the store's mark, or its signature), else listed as not verified
    const { deliveries } = await readSavedDir(o.saveDir, saveKey);
    for (const d of deliveries.slice(-history.limits.rows))
      history.add(savedAsEvent(d, saveKey, l.secrets), { headers: d.saved.headers, body: savedBody(d.saved), received: Date.parse(d.saved.received_at), ms: 0 });
  }
  const secret = l.secrets[0]!;
  const page = await startInspector({
    ...o.inspect!,
    hostNames: o.inspectHost,
    history,
    token: token.value,
    late,
    figures,
    about: {
      url: receiver.url,
      ...shownRoutes(o.forwardTo),
      keep: o.history,
      expect_hours: o.expectHours ?? null,
      need_init: o.initEvent,
      webhook_id: l.temporary?.hook.id ?? o.webhook ?? null,
      relay: l.relay ? { url: l.relay.url, channel: l.relay.channel } : null,
    },
    replay: o.forwardTo
      ? async (id, edited) => {
          const r = await replayFromHistory(history, id, { secret, to: o.forwardTo!, timeoutMs: o.forwardTimeout, clock: ctx.clock, edited, saveKey });
          if (!r.ok) return { status: r.status, body: { error: r.error } };
          reportReplay(r.event, id);
          return { status: 200, body: r.result };
        }
      : undefined,
    async commands(id) {
      const found = await replayable(history, id, { secrets: l.secrets, saveKey });
      if (!found.ok) return { status: found.status, body: { error: found.error } };
      const to = (o.forwardTo && routeFor(o.forwardTo, found.record.type)) ?? receiver.url;
      return { status: 200, body: replayCommands(found.record, found.body, secret, to, l.temporary ? undefined : o.webhook) };
    },
  });
  return page;
}

/** listen's watch (src/observe/listen.ts), loaded only for --metrics, --inspect or the OTEL_* variables. */
async function watchListenFor(ctx: Context, o: ListenOptions): Promise<ListenWatch | undefined> {
  const tracing = tracesAsked(ctx.env);
  if (!o.metrics && !tracing && o.inspect === undefined) return undefined;
  const { watchListen } = await import('../observe/listen.js');
  return watchListen({ metrics: o.metrics, tracing, inspect: o.inspect !== undefined, env: ctx.env, now: ctx.clock.now(), version: version(), warn: (text) => line(ctx.stderr, `warning: ${text}`) });
}

/** `--metrics`: its port served once listen takes deliveries, and said (a `metrics` line); where traces go, said too. */
async function serveWatch(watch: ListenWatch | undefined, serving: Serving, say: (event: Record<string, unknown>, text: string) => void, style: Style): Promise<void> {
  if (!watch) return;
  const served = await watch.serve(serving);
  if (served)
    say(
      { event: 'metrics', url: `${served.url}/metrics`, health: `${served.url}/healthz`, ready: `${served.url}/readyz` },
      `Metrics: ${style.bold(`${served.url}/metrics`)} (health: /healthz, ready: /readyz)`,
    );
  const t = watch.traces;
  if (t) say({ event: 'traces', url: t.url, protocol: t.protocol }, `Traces: each delivery a span, sent to ${t.url} (OTLP ${t.protocol})`);
}

/**
 * `--watch-runs`: every --watch-interval, what the forecast API published for the webhook's subscriptions
 * against what this listen's store holds as handed over; each notification available for longer than
 * --late-after and not delivered is said once (a line, a `late_hour` event), run through --on-late, and
 * listed in the inspector's Runs view while it is late. A look that fails is said, and the next tries again.
 */
async function watchRuns(ctx: Context, o: ListenOptions, l: Listening, store: PairStore, say: (event: Record<string, unknown>, text: string) => void, style: Style): Promise<RunWatch> {
  const { service } = l.temporary ?? (await serviceFor(ctx));
  const hook = l.temporary?.hook ?? l.hook ?? (await service.getWebhook(o.webhook!));
  return watchLateRuns(
    {
      look: () => reconcileWebhook({ service, webhook: hook, window: { since: ctx.clock.now() - DEFAULTS.reconcileSinceMs }, models: o.watchModel, lookup: storeLookup(store) }),
      lateAfterMs: o.lateAfter,
      intervalMs: o.watchInterval,
      clock: ctx.clock,
      onLate: o.onLate,
      what: '--watch-runs',
    },
    { say, stderr: ctx.stderr, env: ctx.env, style },
  );
}

/** The secret to verify with: the temporary webhook's (created now), or the one given; and the webhook, looked up when it can be. */
async function listeningFor(ctx: Context, o: ListenOptions, say: (event: Record<string, unknown>, text: string) => void, style: Style): Promise<Listening> {
  if (o.relay !== undefined && o.webhook === undefined) {
    const { service } = await serviceFor(ctx);
    const { temporary, target, base } = await relayTemporary(ctx, service, { relay: o.relay, subscribe: o.subscribe, clean: o.clean }, (event) => say(event, describeTemporary(event, style)));
    return { secrets: [temporary.hook.secret!], from: `the secret of temporary webhook ${temporary.hook.id} (in memory, and in the relay)`, temporary, base, relay: target };
  }
  if (o.publicUrl !== undefined) {
    const { service } = await serviceFor(ctx);
    const base = o.publicUrl === 'ngrok' ? await ngrokPublicUrl(ctx.env.NGROK_API_URL || NGROK_API, o.port) : o.publicUrl;
    const temporary = await createTemporary(service, {
      url: o.path === '/' ? base : `${base.replace(/\/+$/, '')}${o.path}`,
      subscribe: o.subscribe ?? [...SUBSCRIPTION_TYPES],
      host: hostname(),
      pid: process.pid,
      started: new Date(ctx.clock.now()).toISOString(),
      clean: Boolean(o.clean),
      report: (event) => say(event, describeTemporary(event, style)),
    });
    return { secrets: [temporary.hook.secret!], from: `the secret of temporary webhook ${temporary.hook.id} (in memory only)`, temporary, base: service.http.baseUrl };
  }
  const { secrets, from } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv, command: 'listen' });
  const base = o.webhook === undefined ? undefined : (await baseUrlFor(ctx)).url;
  const looked = o.webhook === undefined ? {} : await lookUp(ctx, o.webhook);
  // a lasting channel: the one the webhook's URL names, else the one noted here, else a new one (its name no one can work out)
  const relay =
    o.relay !== undefined && o.webhook !== undefined && base !== undefined
      ? {
          url: o.relay,
          token: ctx.env.WXHOOKS_RELAY_TOKEN,
          channel: (await lastingChannel({ dir: configDir(ctx.env), relay: o.relay, base, webhook: o.webhook, hookUrl: looked.hook?.url })).channel,
          temporary: false,
        }
      : undefined;
  return { secrets, from, base, relay, ...looked };
}

/**
 * The webhook `--webhook ID` names, when credentials are at hand to ask the service; `missing` when the
 * service has none (said once listen knows its own address), nothing (and a warning) when it cannot be
 * asked. Listening goes on either way: the secret is what verifies.
 */
async function lookUp(ctx: Context, id: string): Promise<{ hook?: Webhook; missing?: boolean }> {
  if (!ctx.env.WX_API_KEY && !ctx.env.WB_API_KEY) return {};
  try {
    const { service } = await serviceFor(ctx);
    return { hook: await service.getWebhook(id) };
  } catch (err) {
    const e = err as WxError;
    if (e.status === 404) return { missing: true };
    line(ctx.stderr, `warning: could not look up webhook ${id} (${printable(e.message)}); listening anyway.`);
    return {};
  }
}

function reportReady(ctx: Context, o: ListenOptions, receiver: RunningReceiver, l: Listening, output: LineBuffer, style: Style): void {
  if (ctx.global.json) {
    output.push(
      JSON.stringify({
        event: 'listening',
        url: receiver.url,
        port: receiver.port,
        scheme: o.scheme,
        tolerance: o.tolerance,
        secret_from: l.from,
        ...shownRoutes(o.forwardTo),
        fsync: Boolean(o.fsync),
        webhook_id: l.temporary?.hook.id ?? o.webhook ?? null,
        ...(l.relay ? { relay: l.relay.url, channel: l.relay.channel } : {}),
      }),
    );
  } else {
    if (l.relay) line(ctx.stderr, `${style.green('Ready.')} Taking deliveries from the relay ${l.relay.url} (no port of its own); the webhook's URL: ${style.bold(receiver.url)}`);
    line(ctx.stderr, `${l.relay ? 'Verifying' : `${style.green('Ready.')} Listening on ${style.bold(receiver.url)}, verifying`} with ${l.from} (scheme ${o.scheme}, tolerance ${o.tolerance} s)`);
    if (l.temporary) {
      const subs = l.temporary.hook.subscriptions.map((s) => `${s.type} (${s.id})`).join(', ');
      line(ctx.stderr, `Temporary webhook ${style.bold(l.temporary.hook.id)} → ${printable(l.temporary.hook.url)}, subscribed to ${subs || 'nothing'}; deleted when listen exits.`);
    }
    const routes = describeRoutes(shownRoutes(o.forwardTo));
    if (routes.length === 1) line(ctx.stderr, `Forwarding verified deliveries to ${routes[0]}`);
    else if (routes.length) line(ctx.stderr, `Forwarding verified deliveries by type:\n${routes.map((r) => `  ${r}`).join('\n')}`);
    if (o.webhook && !l.missing && l.hook?.url !== receiver.url) line(ctx.stderr, style.dim(`Point the webhook here with: wxhooks webhook update ${o.webhook} --url ${receiver.url}`));
    line(ctx.stderr, style.dim('Ctrl-C to stop.'));
  }
  if (l.missing) {
    line(
      ctx.stderr,
      style.yellow(
        `warning: the service has no webhook ${o.webhook}: its stored secret is of an older one (a deleted webhook, or an emulator started afresh), so nothing will be delivered here for it.`,
      ),
    );
    line(ctx.stderr, `  Create one that points here: wxhooks webhook create --url ${receiver.url} --subscribe forecast_hour.available`);
    line(ctx.stderr, style.dim(`  then listen with its id (if it is ${o.webhook} again, this listen takes its new secret by itself).`));
  }
  if (o.scheme === 'hex-body') line(ctx.stderr, 'warning: --scheme hex-body does not sign the timestamp or Trigger-Id: captured deliveries can be replayed.');
}

/** `--check`: pings each subscription and reports, for each, which link of the chain works. */
async function reportCheck(ctx: Context, output: LineBuffer, l: Listening, o: ListenOptions, receiver: RunningReceiver, log: EventLog): Promise<void> {
  const { service } = l.temporary ?? (await serviceFor(ctx));
  const hook = l.temporary?.hook ?? l.hook ?? (await service.getWebhook(o.webhook!));
  const checks = await checkChain(service, hook, log, ctx.global.timeoutMs, { port: receiver.port, path: o.path });
  for (const c of checks) {
    if (ctx.global.json) output.push(JSON.stringify({ event: 'check', webhook_id: hook.id, ...c }));
    else line(ctx.stderr, describeCheck(c, styleFor(ctx, ctx.stderr)));
  }
}

/**
 * The port listen was to bind is taken: by another `wxhooks listen` (named, when it said so in the store
 * folder), or by something else. Another port is no cure by itself: the webhook delivers to its URL, so a
 * new port needs the webhook pointed there too.
 */
async function portTaken(ctx: Context, o: ListenOptions, l: Listening, err: BindError): Promise<BindError> {
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

/**
 * A Verifier whose secrets can be replaced while the receiver runs (the webhook was re-created, and its
 * stored secret changed): the receiver keeps the object it was given, and each verification goes to the
 * session of the secrets of the moment.
 */
class RekeyableVerifier extends Verifier {
  private current: Verifier;
  constructor(private readonly settings: ConstructorParameters<typeof Verifier>[0]) {
    super(settings);
    this.current = new Verifier(settings);
  }

  override verify(...args: Parameters<Verifier['verify']>): ReturnType<Verifier['verify']> {
    return this.current.verify(...args);
  }

  /** From now on, verify with these secrets (a new session: auto pins again at the next match). */
  rekey(secrets: string[]): void {
    this.current = new Verifier({ ...this.settings, secret: secrets });
  }
}

/**
 * Watches the secret store for the stored secret of `--webhook ID`: when it changes (the webhook was
 * re-created, `secret set`), listen verifies with the new one from then on, and says so. Inotify tells
 * of a change at once; a store folder that cannot be watched is looked at every 2 s instead.
 */
function watchSecret(
  ctx: Context,
  webhook: string,
  base: string,
  secret: string,
  verifier: RekeyableVerifier,
  say: (event: Record<string, unknown>, text: string) => void,
  onChange?: (secrets: string[]) => void,
): { close(): void } {
  const dir = configDir(ctx.env);
  let known = secret;
  let looking: Promise<void> = Promise.resolve();
  const look = () => {
    looking = looking.then(async () => {
      const entry = await (await secretStoreFor(ctx)).get(base, webhook).catch(() => undefined);
      if (!entry || entry.secret === known) return; // removed (the webhook deleted?): the secret in use stays
      known = entry.secret;
      addSensitive(entry.secret);
      verifier.rekey([entry.secret]);
      onChange?.([entry.secret]); // --relay: the relay verifies with it too from now on
      say({ event: 'secret_changed', webhook_id: webhook }, `The stored secret of webhook ${webhook} changed (re-created?): verifying with the new one from now on.`);
    });
  };
  look();
  let watcher: FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    watcher = watch(dir, (_event, name) => {
      if (name === null || name === 'secrets.json') look();
    });
    watcher.on('error', () => undefined);
  } catch {
    timer = setInterval(look, 2000);
    timer.unref();
  }
  return {
    close() {
      watcher?.close();
      clearInterval(timer);
    },
  };
}

/** What `--within` running out means: the delivery `--until` waits for, or the hours of the run `--until-run` waits for, that did not come. */
function notComplete(o: ListenOptions, runs: RunTracker | undefined): NotVerifiedError {
  const hint = 'Check that the webhook points here, is active and subscribed to those types (`wxhooks webhook get ID`), and `wxhooks doctor`.';
  if (!runs) return new NotVerifiedError(`No verified ${o.until} delivery arrived within ${formatDuration(o.within!)}.`, { hint });
  const p = runs.progress();
  if (!p) return new NotVerifiedError(`No delivery of ${runs.waitingFor()} arrived within ${formatDuration(o.within!)}.`, { hint });
  const what = [p.missing.length ? `missing ${compressHours(p.missing)}` : '', o.initEvent && !p.init_event ? 'its initialization_time.available has not come' : ''].filter(Boolean).join('; ');
  // some of the run came, so the chain works: sending the user to check the webhook (or doctor) would mislead
  const partial = `The rest of the run came, so deliveries reach listen: the service has not sent ${p.missing.length === 1 ? 'this hour' : 'these'} (yet). Wait longer with a larger --within${o.saveDir ? `; see what came with \`wxhooks runs --dir ${o.saveDir}\`` : ''}.`;
  return new NotVerifiedError(`Run ${p.model} ${p.initialization_time} is not complete after ${formatDuration(o.within!)} (${p.have.length}/${p.have.length + p.missing.length} hours): ${what}.`, {
    hint: partial,
  });
}
