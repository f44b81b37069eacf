import type { Command } from 'commander';
import type { Scheme } from '../signing/layouts.js';
import { line, type Act, type Context } from '../context.js';
import { UsageError } from '../errors.js';
import { describeCheck, describeListenNotice, formatEvent } from '../output/listen.js';
import { watchLateRuns } from '../output/late.js';
import { describeRelayLink, relayLinkEvent } from '../output/listen-relay.js';
import { reportWriter } from '../output/report-writer.js';
import { progressBar, progressLine, StatusLine } from '../output/run-progress.js';
import { styleFor, type Style } from '../output/style.js';
import { checkRelayOptions } from '../receiver/relay-target.js';
import { describeRoutes, type ForwardRoutes, forwardRoute, shownRoutes } from '../receiver/routes.js';
import type { RunningReceiver } from '../receiver/server.js';
import { parseRunName, RunTracker } from '../delivery/runs.js';
import { sinkFlagHelp } from '../sinks/kinds.js';
import type { SinkTarget } from '../sinks/sink.js';
import { sinkUrls } from '../sinks/sink-url.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { BODY_READS } from '../delivery/defaults.js';
import { HISTORY_DEFAULTS } from '../store/history-limits.js';
import { storeKind } from '../store/store-url.js';
import { formatDuration } from '../util/duration.js';
import type { LineBuffer } from '../util/line-buffer.js';
import { isLoopback } from '../util/net.js';
import { collect, duration, type HostPort, hostPort, hours, integer, isoTime, size, timeLimit, url } from '../util/parse.js';
import { printable } from '../util/printable.js';
import { isKnownType, SUBSCRIPTION_TYPES, suggestion } from '../vocabulary.js';
import { type Declared, declare, type Expect, type OptionsOf, type Same } from '../flags/option-types.js';
import { accumulated, msDefault, portOption, schemeOption, sizeDefault, toleranceOption, valued } from '../flags/options.js';
import type { SecretSource } from '../tasks/secrets.js';
import { secretSourceOptions } from '../flags/sources.js';
import { listen } from '../tasks/listen.js';
import type { Listening } from '../tasks/listen-secrets.js';

/** `--inspect` without an address. */
const INSPECT_DEFAULT = `${DEFAULTS.host}:${DEFAULTS.inspectPort}`;

/** listen's flags, in the groups its help shows; `ListenOptions` is derived from them. */
function declareListen(cmd: Command) {
  return declare(cmd)
    .optionsGroup('Where it listens:')
    .addOption(portOption(DEFAULTS.listenPort))
    .option('--host <host>', 'address to bind', DEFAULTS.host)
    .option('--path <path>', 'the path deliveries are POSTed to', DEFAULTS.listenPath)
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
        `serve the inspector page: every delivery live, in detail, replayable (default ${INSPECT_DEFAULT}); listen prints its link, with the token it needs`,
        hostPort,
      ).preset(INSPECT_DEFAULT),
    )
    .option('--inspect-allow-remote', 'let --inspect bind an address other machines can reach (the token is still needed)')
    .option('--inspect-host <name>', 'with --inspect-allow-remote: a host name the page is reached by (repeatable), besides its address', collect)
    .addOption(
      valued(
        '--history <n>',
        `with --inspect, or a postgres store: how many verified requests are kept (refused ones apart: the last ${DEFAULTS.historyRefusedRows}, their first ${DEFAULTS.historyPartBytes / 1024} KiB)`,
        integer(1, 1_000_000),
        [HISTORY_DEFAULTS.rows, String(HISTORY_DEFAULTS.rows)],
      ),
    )
    .addOption(valued('--history-size <size>', 'the body bytes the kept verified requests may hold together; past it, older bodies are kept in part', size, sizeDefault(HISTORY_DEFAULTS.bytes)))
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

/**
 * What `runListen` is given: every flag of `declareListen`, parsed. Written out, as a declaration emitted
 * file by file (isolatedDeclarations) cannot infer it, and checked below to be exactly what the flags give.
 */
export type ListenOptions = Pick<SecretSource, 'webhook' | 'secretEnv'> & {
  port: number;
  host: string;
  path: string;
  relay?: string | undefined;
  scheme: Scheme;
  tolerance: number;
  publicUrl?: string | undefined;
  subscribe?: string[] | undefined;
  clean?: true | undefined;
  check?: true | undefined;
  forwardTo?: ForwardRoutes | undefined;
  forwardTimeout: number;
  sink?: SinkTarget<unknown>[] | undefined;
  saveDir?: string | undefined;
  respondStatus?: number | undefined;
  dedupeTtl: number;
  fsync?: true | undefined;
  store?: string | undefined;
  storeSchema: string;
  claimTimeout: number;
  exitAfter?: number | undefined;
  until?: string | undefined;
  untilRun?: string | true | undefined;
  expectHours?: number[] | undefined;
  initEvent: boolean;
  within?: number | undefined;
  maxBody: number;
  maxInflight: number;
  readTimeout: number;
  inspect?: HostPort | undefined;
  inspectAllowRemote?: true | undefined;
  inspectHost?: string[] | undefined;
  history: number;
  historySize: number;
  watchRuns?: true | undefined;
  watchInterval: number;
  lateAfter: number;
  onLate?: string | undefined;
  watchModel?: string[] | undefined;
  metrics?: HostPort | undefined;
};
type _ListenOptionsDeclared = Expect<Same<OptionsOf<ReturnType<typeof declareListen>>, OptionsOf<Declared<ListenOptions>>>>;

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
  if (o.metrics && o.relay === undefined && o.metrics.port !== 0 && o.metrics.port === o.port) {
    throw new UsageError(`--metrics ${o.metrics.port} is the receiver's own port: health and metrics are served on a port of their own.`, { hint: 'Give --metrics another port, such as 9464.' });
  }
  if (o.watchRuns && o.webhook === undefined && o.publicUrl === undefined && o.relay === undefined) {
    throw new UsageError("--watch-runs asks the forecast API what the webhook's subscriptions should have been sent: give --webhook ID (or --public-url, --relay).");
  }
  if (o.claimTimeout <= o.forwardTimeout) {
    throw new UsageError(
      `--claim-timeout (${formatDuration(o.claimTimeout)}) must be longer than --forward-timeout (${formatDuration(o.forwardTimeout)}): a claim must outlive the forward it covers.`,
    );
  }
}

/** The run `--until-run` waits for, from its value: `MODEL`, `MODEL@INIT` or `@INIT` (an ISO time), or nothing. */
function runTarget(o: ListenOptions): RunTracker | undefined {
  if (o.untilRun === undefined) return undefined;
  const named = parseRunName(o.untilRun);
  const init = named.init === undefined ? undefined : isoTime(named.init, `--until-run's initialisation time ("${named.init}")`);
  return new RunTracker({ model: named.model, init, expect: o.expectHours!, needInit: o.initEvent });
}

/**
 * `wxhooks listen`: its flags checked (exit 2 before anything starts), then the listen itself (the task,
 * src/tasks/listen.ts: the secret, the store, the door, the page, in order, and closed in order), with
 * this view of it: each request's line (or JSON), the run's progress, and what listen says of itself.
 */
export async function runListen(ctx: Context, o: ListenOptions): Promise<void> {
  checkOptions(ctx, o);
  const runs = runTarget(o);
  const json = ctx.global.json;
  const style = styleFor(ctx, ctx.stdout);
  const styleErr = styleFor(ctx, ctx.stderr);
  // the run's progress: a line kept at the bottom of a terminal, else a line for each hour that arrives
  const status = runs && !json && ctx.stderr.isTTY ? new StatusLine(ctx.stderr as typeof ctx.stderr & { columns?: number }) : undefined;
  const output = reportWriter(ctx.stdout, json, ctx.stdout.isTTY ? status : undefined);
  /** How a line is shown: fitted to the terminal's width of the moment, the layout pinned said with --verbose. */
  const view = () => ({ width: ctx.stdout.isTTY ? ctx.stdout.columns : undefined, verbose: ctx.global.verbose });
  /** A line about listen itself: NDJSON on stdout with --json, else on stderr. */
  const say = (event: object, text: string) => (json ? output.push(JSON.stringify(event)) : line(ctx.stderr, text));
  const warn = (text: string) => line(ctx.stderr, `warning: ${text}`);

  await listen(ctx, o, runs, {
    delivery(event, p) {
      output.push(json ? JSON.stringify(event) : formatEvent(event, style, view()));
      if (!p) return;
      if (json) {
        output.push(JSON.stringify({ event: 'run_progress', ...p }));
        if (p.complete) output.push(JSON.stringify({ event: 'run_complete', ...p }));
      } else if (status) status.show(progressBar(p, o.initEvent, styleErr));
      else line(ctx.stderr, progressLine(p, event.type === 'initialization_time.available' ? 'its initialization_time.available in' : `+${event.forecast_hour}h in`));
    },
    replayed: (event, id) => output.push(json ? JSON.stringify({ ...event, replay_of: id }) : formatEvent(event, style, view())),
    notice: (n) => say(n, describeListenNotice(n, styleErr)),
    link: (e, relay) => say(relayLinkEvent(e), describeRelayLink(e, styleErr, relay)),
    warn,
    ready: (receiver, l) => reportReady(ctx, o, receiver, l, output, styleErr),
    checked(c, webhookId) {
      if (json) output.push(JSON.stringify({ event: 'check', webhook_id: webhookId, ...c }));
      else line(ctx.stderr, describeCheck(c, styleErr));
    },
    watchRuns: (look, told) =>
      watchLateRuns(
        { look, lateAfterMs: o.lateAfter, intervalMs: o.watchInterval, clock: ctx.clock, onLate: o.onLate, what: '--watch-runs', told },
        { say, stderr: ctx.stderr, env: ctx.env, style: styleErr },
      ),
    waiting() {
      if (status) status.show(styleErr.dim(`waiting for ${runs!.waitingFor()}: ${o.expectHours!.length} forecast hours${o.initEvent ? ' and its initialization_time.available' : ''}…`));
    },
    closed() {
      output.flush();
      status?.done();
    },
  });
}

function reportReady(ctx: Context, o: ListenOptions, receiver: Pick<RunningReceiver, 'url' | 'port'>, l: Listening, output: LineBuffer, style: Style): void {
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
