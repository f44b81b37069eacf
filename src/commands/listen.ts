import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Command } from 'commander';
import { NGROK_API, ngrokPublicUrl } from '../api/ngrok.js';
import type { Webhook } from '../api/normalize.js';
import { createWebhookBody } from '../api/requests.js';
import type { Service } from '../api/service.js';
import { leftoverWebhooks, temporaryName, temporaryNote } from '../api/temporary.js';
import { line, type Act, type Context, type Out } from '../context.js';
import { InterruptedError, NotVerifiedError, UsageError, WxError } from '../errors.js';
import { formatEvent } from '../output/listen.js';
import { printable } from '../output/printable.js';
import { styleFor } from '../output/style.js';
import { checkChain, EventLog, type SubscriptionCheck } from '../receiver/check.js';
import { compressHours, parseRunName, RunTracker } from '../receiver/runs.js';
import { progressBar, progressLine, StatusLine } from '../output/run-progress.js';
import type { ReceiverEvent } from '../receiver/event.js';
import { History, PgHistory, type HistorySource } from '../receiver/history.js';
import { startInspector, type RunningInspector } from '../receiver/inspector.js';
import { replayDelivery } from '../receiver/replay.js';
import { savedBody, type SavedDelivery } from '../receiver/saved.js';
import { startReceiver, type RunningReceiver } from '../receiver/server.js';
import { isoMillis } from '../util/clock.js';
import type { Scheme } from '../signing/layouts.js';
import { Verifier } from '../signing/verify.js';
import { FilePairStore } from '../store/file-pairs.js';
import type { PairStore } from '../store/pair-store.js';
import { storeKind } from '../store/store-url.js';
import { configDir } from '../store/paths.js';
import { formatDuration } from '../util/duration.js';
import { ensureWritableDir } from '../util/files.js';
import { LineBuffer } from '../util/line-buffer.js';
import { isLoopback } from '../util/net.js';
import { collect, duration, hours, integer, isoTime, size, timeLimit, url } from '../util/parse.js';
import { addSensitive } from '../util/redact.js';
import { SUBSCRIPTION_TYPES } from '../vocabulary.js';
import { portOption, schemeOption, toleranceOption, valued } from './options.js';
import { resolveSecrets, secretSourceOptions, serviceFor } from './shared.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .addOption(portOption(8787))
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--path <path>', 'the path deliveries are POSTed to', '/');
  secretSourceOptions(cmd, 'verify with');
  cmd
    .option('--public-url <url>', 'create a temporary webhook pointing at this public URL (a tunnel to here), deleted on exit; "ngrok" asks the local ngrok agent')
    .option('--subscribe <spec>', 'with --public-url: a subscription of the temporary webhook, TYPE[:key=value;...] (repeatable; default: one of each type)', collect)
    .option('--clean', 'with --public-url: delete the temporary webhooks of this host that no running listen holds')
    .option('--check', 'once ready, ping each subscription through the service and say which link of the chain works')
    .addOption(schemeOption('signature layout: auto tries each that signs the timestamp, then pins it'))
    .addOption(toleranceOption('how far a timestamp may be off, either way'))
    .addOption(valued('--forward-to <url>', 'POST each verified delivery (exact bytes and headers) to your app', url))
    .addOption(valued('--forward-timeout <duration>', 'how long your app may take', timeLimit, [30_000, '30s']))
    .option('--save-dir <dir>', 'write each verified delivery to a file that `verify` and `send` read back')
    .addOption(valued('--max-body <size>', 'refuse bodies over this size with 413', size, [25 * 1024 * 1024, '25MiB']))
    .addOption(valued('--max-inflight <size>', 'the body bytes all connections together may hold; past it, 503', size, [256 * 1024 * 1024, '256MiB']))
    .addOption(valued('--respond-status <code>', 'answer verified deliveries with this status (e.g. 500, to watch the retries)', integer(200, 599)))
    .addOption(valued('--dedupe-ttl <duration>', 'how long a processed (trigger, subscription) pair is remembered', duration, [24 * 3_600_000, '24h']))
    .option('--fsync', 'sync each processed pair to the disk before answering (survives a power loss; slower)')
    .option('--store <url>', 'where processed pairs (and the history) are kept: "file" (the store folder), or postgres://user:password@host/db shared by several receivers (else WXHOOKS_STORE_URL)')
    .option('--store-schema <name>', 'with a postgres store: the schema its tables are in', 'wxhooks')
    .addOption(valued('--claim-timeout <duration>', "with a postgres store: how long a claim holds before another instance takes it over (its holder died)", timeLimit, [60_000, '60s']))
    .addOption(valued('--exit-after <n>', 'exit 0 after N verified new deliveries', integer(1)))
    .option('--until <type>', 'exit 0 at the first verified delivery of this type')
    .option('--until-run [model@init]', 'exit 0 once a model run is complete: every --expect-hours hour, and its initialization_time.available (default: the first run seen)')
    .addOption(valued('--expect-hours <range>', 'with --until-run: the forecast hours that make the run complete, such as 0-240/6 or 0-72/3,78-240/6', hours))
    .option('--no-init-event', "with --until-run: the run is complete without its initialization_time.available")
    .addOption(valued('--within <duration>', 'with --until or --until-run: exit 9 if it has not come by then (and say what is missing)', duration))
    .addOption(valued('--read-timeout <duration>', 'slow-client guard: headers must arrive within this, the whole request within 6 times it', timeLimit, [10_000, '10s']))
    .option('--inspect [host:port]', 'serve the inspector page: every delivery live, in detail, replayable (default 127.0.0.1:8789)')
    .option('--inspect-allow-remote', 'let --inspect bind an address other machines can reach')
    .addOption(valued('--history <n>', 'with --inspect: how many requests are kept in memory, bodies up to 1 MiB whole; with a postgres store: kept there, for every instance\'s inspector and `deliveries --store`', integer(1, 1_000_000), [500, '500']))
    .addHelpText(
      'after',
      `
The secret comes from --webhook ID (the store), --secret-env VAR, or stdin; never from a flag. With
--public-url, listen creates a webhook of its own pointing there, verifies with its secret (kept in
memory only) and deletes it when it exits, however it exits.
Answers: 200 verified (or your app's 2xx), 200 duplicate (skipped), 409 same delivery still in progress,
502 your app failed (not marked processed, so the retry can succeed), 401 bad signature or stale
timestamp, 400 missing header or not a JSON object, 413 too large, 503 the processed pair could not
be stored or too many bodies in flight. A 2xx is sent only once the delivery's pair is written.

Examples:
  $ wxhooks listen --webhook 7 --forward-to http://localhost:3000/webhooks
  $ wxhooks listen --public-url ngrok --subscribe forecast_hour.available --check   # from the real service
  $ wxhooks listen --public-url https://abc.example.dev --forward-to http://localhost:3000/hooks
  $ wxhooks listen --secret-env WX_WEBHOOK_SECRET --json | jq 'select(.outcome=="accepted")'
  $ wxhooks listen --webhook 7 --until initialization_time.available --within 10m   # a CI gate
  $ wxhooks listen --webhook 7 --until-run wm-6 --expect-hours 0-240/6 --within 6h  # a whole run
  $ wxhooks listen --webhook 7 --respond-status 500                                 # watch the retries
  $ wxhooks listen --webhook 7 --forward-to http://localhost:3000/hooks --inspect  # open http://127.0.0.1:8789/`,
    )
    .action(act(runListen, { longRunning: true }));
}

export interface ListenOptions {
  port: number;
  host: string;
  path: string;
  webhook?: string;
  secretEnv?: string;
  publicUrl?: string;
  subscribe?: string[];
  clean?: boolean;
  check?: boolean;
  scheme: Scheme;
  tolerance: number;
  forwardTo?: string;
  forwardTimeout: number;
  saveDir?: string;
  maxBody: number;
  maxInflight: number;
  respondStatus?: number;
  dedupeTtl: number;
  fsync?: boolean;
  store?: string;
  storeSchema: string;
  claimTimeout: number;
  exitAfter?: number;
  until?: string;
  untilRun?: string | true;
  expectHours?: number[];
  initEvent: boolean;
  within?: number;
  readTimeout: number;
  inspect?: string | true;
  inspectAllowRemote?: boolean;
  history: number;
}

/** What `listen` keeps unwritten for a stdout nobody reads before it drops lines (and counts them). */
export const OUTPUT_LIMIT = 8 * 1024 * 1024;

/**
 * The report's lines, gathered and written at most every 20 ms (a burst costs one write). When the
 * reader does not keep up (`listen | sleep 300`), lines past OUTPUT_LIMIT unwritten are dropped rather
 * than kept, counted, and the count is reported once stdout drains: the answers never wait for it.
 */
function reportWriter(out: Out, json: boolean, status?: StatusLine): LineBuffer {
  let dropped = 0;
  const output: LineBuffer = new LineBuffer((chunk, lines) => {
    if ((out.writableLength ?? 0) <= OUTPUT_LIMIT) {
      if (status) status.above(() => out.write(chunk));
      else out.write(chunk);
      return;
    }
    if (dropped === 0) {
      out.once?.('drain', () => {
        const n = dropped;
        dropped = 0;
        output.push(json ? JSON.stringify({ event: 'output_dropped', lines: n }) : `… ${n} line${n === 1 ? '' : 's'} of output dropped: stdout was not being read`);
      });
    }
    dropped += lines;
  });
  return output;
}

/** Whether a `wxhooks listen` still runs as this process id (on Linux it must be one; elsewhere, any live process counts). */
export function listenRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('wxhooks') && cmdline.includes('listen');
  } catch {
    return true;
  }
}

/** The temporary webhook a `listen --public-url` holds, and how to let it go. */
interface Temporary {
  hook: Webhook;
  service: Service;
  /** Deletes it; says what happened, on one line (or what to run by hand). */
  remove(): Promise<void>;
}

function checkOptions(o: ListenOptions): void {
  if (!o.path.startsWith('/')) throw new UsageError(`--path must start with "/", not "${o.path}".`);
  if (o.within !== undefined && o.until === undefined && o.untilRun === undefined) throw new UsageError('--within goes with --until TYPE or --until-run.');
  if (o.until !== undefined && o.untilRun !== undefined) throw new UsageError('Give --until or --until-run, not both.');
  if (o.untilRun !== undefined && o.expectHours === undefined) throw new UsageError('--until-run needs --expect-hours: the forecast hours that make the run complete, such as 0-240/6.');
  if (o.untilRun === undefined && (o.expectHours !== undefined || !o.initEvent)) throw new UsageError('--expect-hours and --no-init-event go with --until-run.');
  if (o.publicUrl !== undefined && (o.webhook !== undefined || o.secretEnv !== undefined)) {
    throw new UsageError('--public-url creates a temporary webhook of its own: it cannot be given with --webhook or --secret-env.', {
      hint: 'An existing webhook is never re-pointed. Drop --public-url to listen for an existing webhook (and point it here yourself).',
    });
  }
  if (o.publicUrl === undefined && (o.subscribe !== undefined || o.clean)) throw new UsageError('--subscribe and --clean go with --public-url.');
  if (o.publicUrl !== undefined && o.publicUrl !== 'ngrok') url(o.publicUrl, '--public-url');
  if (o.publicUrl === 'ngrok' && o.port === 0) throw new UsageError('--public-url ngrok needs a fixed --port: the ngrok tunnel forwards to one.');
  if (o.check && o.webhook === undefined && o.publicUrl === undefined) throw new UsageError('--check pings the webhook: give --webhook ID or --public-url.');
  if (o.inspectAllowRemote && o.inspect === undefined) throw new UsageError('--inspect-allow-remote goes with --inspect.');
  if (o.claimTimeout <= o.forwardTimeout) {
    throw new UsageError(`--claim-timeout (${formatDuration(o.claimTimeout)}) must be longer than --forward-timeout (${formatDuration(o.forwardTimeout)}): a claim must outlive the forward it covers.`);
  }
}

/** The run `--until-run` waits for, from its value: `MODEL`, `MODEL@INIT` or `@INIT` (an ISO time), or nothing. */
function runTarget(o: ListenOptions): RunTracker | undefined {
  if (o.untilRun === undefined) return undefined;
  const named = parseRunName(o.untilRun);
  const init = named.init === undefined ? undefined : isoTime(named.init, `--until-run's initialisation time ("${named.init}")`);
  return new RunTracker({ model: named.model, init, expect: o.expectHours!, needInit: o.initEvent });
}

export async function runListen(ctx: Context, o: ListenOptions): Promise<void> {
  checkOptions(o);
  const inspectAt = o.inspect === undefined ? undefined : inspectAddress(o);
  const runs = runTarget(o);
  if (o.saveDir !== undefined) await ensureWritableDir(o.saveDir, '--save-dir');
  const json = ctx.global.json;
  const style = styleFor(ctx, ctx.stdout);
  const styleErr = styleFor(ctx, ctx.stderr);
  // the run's progress: a line kept at the bottom of a terminal, else a line for each hour that arrives
  const status = runs && !json && ctx.stderr.isTTY ? new StatusLine(ctx.stderr as Out & { columns?: number }) : undefined;
  const output = reportWriter(ctx.stdout, json, ctx.stdout.isTTY ? status : undefined);
  // what --check waits on (only then: nothing else reads it)
  const log = o.check ? new EventLog() : undefined;

  // the webhook: a temporary one of our own, or an existing one whose secret we are given
  let temporary: Temporary | undefined;
  let secrets: string[];
  let from: string;
  if (o.publicUrl !== undefined) {
    temporary = await createTemporary(ctx, o, output);
    secrets = [temporary.hook.secret!];
    from = `the secret of temporary webhook ${temporary.hook.id} (in memory only)`;
  } else {
    ({ secrets, from } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv }));
  }
  secrets.forEach(addSensitive);

  let receiver: RunningReceiver | undefined;
  let store: PairStore | undefined;
  let inspector: RunningInspector | undefined;
  let history: HistorySource | undefined;
  try {
    const opened = await openStore(ctx, o, output);
    store = opened.store;
    history = opened.history;
    let accepted = 0;
    let finish: (why: 'done' | WxError) => void = () => undefined;
    const finished = new Promise<'done' | WxError>((resolve) => (finish = resolve));
    receiver = await startReceiver({
      port: o.port,
      host: o.host,
      path: o.path,
      verifier: new Verifier({ secret: secrets, scheme: o.scheme, tolerance: o.tolerance }),
      store,
      maxBody: o.maxBody,
      maxInflight: o.maxInflight,
      forwardTo: o.forwardTo,
      forwardTimeoutMs: o.forwardTimeout,
      saveDir: o.saveDir,
      respondStatus: o.respondStatus,
      readTimeoutMs: o.readTimeout,
      onEvent(event, raw) {
        output.push(json ? JSON.stringify(event) : formatEvent(event, style));
        log?.push(event);
        history?.add(event, raw);
        if (event.outcome === 'accepted') accepted++;
        if (o.exitAfter !== undefined && accepted >= o.exitAfter) finish('done');
        if (o.until !== undefined && event.type === o.until && (event.outcome === 'accepted' || event.outcome === 'duplicate')) finish('done');
        if (runs && (event.outcome === 'accepted' || event.outcome === 'duplicate') && runs.add(event)?.counted) {
          const p = runs.progress()!;
          if (json) {
            output.push(JSON.stringify({ event: 'run_progress', ...p }));
            if (p.complete) output.push(JSON.stringify({ event: 'run_complete', ...p }));
          } else if (status) status.show(progressBar(p, o.initEvent, styleErr));
          else line(ctx.stderr, progressLine(p, event.type === 'initialization_time.available' ? 'its initialization_time.available in' : `+${event.forecast_hour}h in`));
          if (p.complete) finish('done');
        }
        if (event.fatal) {
          finish(new UsageError(`Stopped: ${event.message ?? 'the processed pairs can no longer be written.'}`, { hint: 'Free some space or fix the store folder, then start listen again.' }));
        }
      },
    });

    if (json) {
      output.push(JSON.stringify({ outcome: 'listening', url: receiver.url, port: receiver.port, scheme: o.scheme, tolerance: o.tolerance, secret_from: from, forward_to: o.forwardTo ?? null, fsync: Boolean(o.fsync), webhook_id: temporary?.hook.id ?? o.webhook ?? null }));
    } else {
      line(ctx.stderr, `${styleErr.green('Ready.')} Listening on ${styleErr.bold(receiver.url)}, verifying with ${from} (scheme ${o.scheme}, tolerance ${o.tolerance} s)`);
      if (temporary) {
        const subs = temporary.hook.subscriptions.map((s) => `${s.type} (${s.id})`).join(', ');
        line(ctx.stderr, `Temporary webhook ${styleErr.bold(temporary.hook.id)} → ${printable(temporary.hook.url)}, subscribed to ${subs || 'nothing'}; deleted when listen exits.`);
      }
      if (o.forwardTo) line(ctx.stderr, `Forwarding verified deliveries to ${o.forwardTo}`);
      if (o.webhook) line(ctx.stderr, styleErr.dim(`Point the webhook here with: wxhooks webhook update ${o.webhook} --url ${receiver.url}`));
      line(ctx.stderr, styleErr.dim('Ctrl-C to stop.'));
    }
    if (o.scheme === 'hex-body') line(ctx.stderr, 'warning: --scheme hex-body does not sign the timestamp or Trigger-Id: captured deliveries can be replayed.');

    if (history && inspectAt) {
      const source = history;
      inspector = await startInspector({
        ...inspectAt,
        history: source,
        about: { url: receiver.url, forward_to: o.forwardTo ?? null, keep: o.history },
        replay: o.forwardTo ? (id) => replayFromHistory(source, id, secrets[0]!, o, output, style, json) : undefined,
      });
      if (json) output.push(JSON.stringify({ event: 'inspector', url: inspector.url }));
      else line(ctx.stderr, `Inspector: ${styleErr.bold(inspector.url)}`);
      if (!isLoopback(inspectAt.host)) line(ctx.stderr, `warning: the inspector on ${inspectAt.host} can be reached from other machines, and shows every delivery in full.`);
    }
    if (log) await reportCheck(ctx, output, temporary, o, receiver, log);
    if (status) status.show(styleErr.dim(`waiting for ${runs!.waitingFor()}: ${o.expectHours!.length} forecast hours${o.initEvent ? ' and its initialization_time.available' : ''}…`));

    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => {
      if (o.within !== undefined) timer = setTimeout(() => resolve('expired'), o.within);
    });
    const why = await Promise.race([finished, expired, ctx.interrupted]);
    clearTimeout(timer);
    if (why === 'expired') throw notComplete(o, runs);
    if (typeof why === 'object') throw why;
    if (why !== 'done') throw new InterruptedError(why);
  } finally {
    await inspector?.close();
    await receiver?.close();
    await store?.close();
    await temporary?.remove();
    output.flush();
    status?.done();
  }
}

/**
 * Creates the temporary webhook: at the public URL (or the ngrok tunnel's) with --path appended, named
 * after this host, its note saying it is temporary with this process's id and start time. Then the
 * temporary webhooks of this host that no running listen holds are listed, or deleted with --clean.
 */
async function createTemporary(ctx: Context, o: ListenOptions, output: LineBuffer): Promise<Temporary> {
  const { service } = await serviceFor(ctx);
  const base = o.publicUrl === 'ngrok' ? await ngrokPublicUrl(ctx.env.NGROK_API_URL || NGROK_API, o.port) : o.publicUrl!;
  const target = o.path === '/' ? base : `${base.replace(/\/+$/, '')}${o.path}`;
  const host = hostname();
  const report = (event: Record<string, unknown>, text: string) => (ctx.global.json ? output.push(JSON.stringify(event)) : line(ctx.stderr, text));

  const started = new Date(ctx.now()).toISOString();
  const { body } = createWebhookBody(undefined, {
    url: target,
    name: temporaryName(host),
    note: temporaryNote({ host, pid: process.pid, started }),
    subscribe: o.subscribe ?? [...SUBSCRIPTION_TYPES],
  });
  const hook = await service.createWebhook(body);
  if (!hook.secret) {
    await service.deleteWebhook(hook.id).catch(() => undefined);
    throw new WxError(`The service created webhook ${hook.id} but returned no signing secret, so its deliveries could not be verified; it was deleted.`);
  }
  report(
    { event: 'webhook_created', webhook_id: hook.id, url: hook.url, subscriptions: hook.subscriptions.map((s) => ({ id: s.id, type: s.type })), temporary: true },
    `Created temporary webhook ${hook.id} → ${printable(hook.url)}`,
  );
  const temporary: Temporary = {
    hook,
    service,
    async remove() {
      try {
        await service.deleteWebhook(hook.id);
        report({ event: 'webhook_deleted', webhook_id: hook.id }, `Deleted temporary webhook ${hook.id}.`);
      } catch (err) {
        const command = `wxhooks webhook delete ${hook.id} --yes`;
        report(
          { event: 'webhook_not_deleted', webhook_id: hook.id, reason: (err as Error).message, delete: command },
          `warning: temporary webhook ${hook.id} could not be deleted (${(err as Error).message}). Delete it yourself: ${command}`,
        );
      }
    },
  };
  // the ones left by a listen that was killed (this one's own is held: it runs)
  try {
    for (const left of await leftoverWebhooks(service, host, listenRunning)) {
      if (o.clean) {
        await service.deleteWebhook(left.id);
        report({ event: 'leftover_deleted', webhook_id: left.id, pid: left.mark.pid }, `Deleted webhook ${left.id}, left over by listen ${left.mark.pid} (started ${left.mark.started}).`);
      } else {
        report(
          { event: 'leftover', webhook_id: left.id, pid: left.mark.pid, started: left.mark.started, delete: `wxhooks webhook delete ${left.id} --yes` },
          `Left over: temporary webhook ${left.id} of listen ${left.mark.pid} (started ${left.mark.started}), which no longer runs. Delete it: wxhooks webhook delete ${left.id} --yes (or run with --clean)`,
        );
      }
    }
  } catch (err) {
    await temporary.remove();
    throw err;
  }
  return temporary;
}

/** `--check`: pings each subscription and reports, for each, which link of the chain works. */
async function reportCheck(ctx: Context, output: LineBuffer, temporary: Temporary | undefined, o: ListenOptions, receiver: RunningReceiver, log: EventLog): Promise<void> {
  const { service } = temporary ?? (await serviceFor(ctx));
  const hook = temporary?.hook ?? (await service.getWebhook(o.webhook!));
  const checks = await checkChain(service, hook, log, ctx.global.timeoutMs, { port: receiver.port, path: o.path });
  for (const c of checks) {
    if (ctx.global.json) output.push(JSON.stringify({ event: 'check', webhook_id: hook.id, ...c }));
    else line(ctx.stderr, describeCheck(c, styleFor(ctx, ctx.stderr)));
  }
}

/** A line (and its advice) for one subscription's check. */
export function describeCheck(c: SubscriptionCheck, style: ReturnType<typeof styleFor>): string {
  const mark = c.result === 'verified' ? style.green('✓') : style.red('✗');
  return `${mark} ${c.type} (subscription ${c.subscription_id}): ${printable(c.detail)}${c.hint ? `\n    ${style.dim(printable(c.hint))}` : ''}`;
}


/** `--inspect [HOST:]PORT`: 127.0.0.1:8789 unless told; an address others can reach only with --inspect-allow-remote. */
function inspectAddress(o: ListenOptions): { host: string; port: number } {
  const text = o.inspect === true || o.inspect === undefined ? '' : o.inspect;
  const m = /^(?:(.*):)?(\d+)$/.exec(text);
  if (text && !m) throw new UsageError(`--inspect takes [HOST:]PORT, such as 8789 or 127.0.0.1:8789, not "${text}".`);
  const host = m?.[1]?.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = m ? integer(0, 65535)(m[2]!, '--inspect\'s port') : 8789;
  if (!isLoopback(host) && !o.inspectAllowRemote) {
    throw new UsageError(`--inspect on ${host} would show every delivery, in full, to other machines.`, { hint: 'Add --inspect-allow-remote if that is what you want.' });
  }
  return { host, port };
}

/**
 * Re-sends a delivery of the history to the app (--forward-to), signed afresh with the current time and
 * the same Trigger-Id, marked `X-Wxhooks-Replay: 1`. The replay is reported and kept in the history as
 * one, and never counted as processed.
 */
async function replayFromHistory(history: HistorySource, id: number, secret: string, o: ListenOptions, output: LineBuffer, style: ReturnType<typeof styleFor>, json: boolean): Promise<{ status: number; body: unknown }> {
  const record = await history.get(id);
  const kept = await history.bodyOf(id);
  if (!record || !kept) return { status: 404, body: { error: 'that delivery is no longer kept, or had no body' } };
  let body = kept.body;
  if (!kept.whole) {
    if (!record.saved_to) return { status: 409, body: { error: 'only the first 1 MiB of this body is kept: run listen with --save-dir to replay large deliveries' } };
    body = savedBody(JSON.parse(readFileSync(record.saved_to, 'utf8')) as SavedDelivery);
  }
  const { Agent } = await import('undici');
  const agent = new Agent();
  try {
    const result = await replayDelivery({ headers: record.headers, body, secret, layout: record.layout, to: o.forwardTo!, timeoutMs: o.forwardTimeout, dispatcher: agent });
    const { id: _id, ms: _ms, replay_of: _of, ...rest } = record;
    const event: ReceiverEvent = { ...rest, time: isoMillis(Date.now()), outcome: 'replayed', status: result.status ?? 0, forward: result };
    output.push(json ? JSON.stringify({ ...event, replay_of: id }) : formatEvent(event, style));
    history.add(event, { headers: record.headers, body, received: Date.now(), ms: result.ms }, id);
    return { status: 200, body: result };
  } finally {
    await agent.close();
  }
}

/** What `--within` running out means: the delivery `--until` waits for, or the hours of the run `--until-run` waits for, that did not come. */
function notComplete(o: ListenOptions, runs: RunTracker | undefined): NotVerifiedError {
  const hint = 'Check that the webhook points here, is active and subscribed to those types (`wxhooks webhook get ID`), and `wxhooks doctor`.';
  if (!runs) return new NotVerifiedError(`No verified ${o.until} delivery arrived within ${formatDuration(o.within!)}.`, { hint });
  const p = runs.progress();
  if (!p) return new NotVerifiedError(`No delivery of ${runs.waitingFor()} arrived within ${formatDuration(o.within!)}.`, { hint });
  const what = [p.missing.length ? `missing ${compressHours(p.missing)}` : '', o.initEvent && !p.init_event ? 'its initialization_time.available has not come' : ''].filter(Boolean).join('; ');
  return new NotVerifiedError(`Run ${p.model} ${p.initialization_time} is not complete after ${formatDuration(o.within!)} (${p.have.length}/${p.have.length + p.missing.length} hours): ${what}.`, { hint });
}

/**
 * The store: the file in the store folder, or PostgreSQL (`--store postgres://...`, or WXHOOKS_STORE_URL),
 * whose driver is loaded only then. The history (for the inspector) is in memory, or, with PostgreSQL,
 * in the database, where every instance's page sees every instance's deliveries.
 */
async function openStore(ctx: Context, o: ListenOptions, output: LineBuffer): Promise<{ store: PairStore; history?: HistorySource }> {
  const url = o.store ?? ctx.env.WXHOOKS_STORE_URL ?? 'file';
  const keepHistory = o.inspect !== undefined || ctx.given('history');
  if (storeKind(url) === 'file') {
    if (keepHistory && o.inspect === undefined) throw new UsageError('--history keeps requests for --inspect, or in a postgres --store: give one of them.');
    const store = await FilePairStore.open({ dir: configDir(ctx.env), ttlMs: o.dedupeTtl, fsync: o.fsync, giveUpMs: giveUpMs(ctx) });
    return { store, history: keepHistory ? new History(o.history) : undefined };
  }
  if (o.fsync) line(ctx.stderr, 'warning: --fsync is for the file store; PostgreSQL commits each batch before its answers anyway.');
  const { PgStore } = await import('../store/postgres.js');
  const styleErr = styleFor(ctx, ctx.stderr);
  const store = await PgStore.open({
    url,
    schema: o.storeSchema,
    ttlMs: o.dedupeTtl,
    leaseMs: o.claimTimeout,
    historyRows: keepHistory ? o.history : undefined,
    onConnection(state, reason) {
      if (ctx.global.json) output.push(JSON.stringify(state === 'lost' ? { event: 'store_lost', reason } : { event: 'store_restored' }));
      else if (state === 'lost') line(ctx.stderr, styleErr.red(`The PostgreSQL store is unreachable (${printable(reason ?? '?')}): deliveries are answered 503 until it is back.`));
      else line(ctx.stderr, styleErr.green('The PostgreSQL store is back.'));
    },
  });
  return { store, history: keepHistory ? new PgHistory(store) : undefined };
}

/** How long the pairs file may stay unwritable before listen stops (60 s; WXHOOKS_STORE_GIVE_UP_MS for tests). */
function giveUpMs(ctx: Context): number | undefined {
  const v = ctx.env.WXHOOKS_STORE_GIVE_UP_MS;
  return v && /^\d+$/.test(v) ? Number(v) : undefined;
}
