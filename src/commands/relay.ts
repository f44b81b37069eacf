import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import bytes from 'bytes';
import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { InterruptedError, NotFoundError, UsageError } from '../errors.js';
import { emit, table } from '../output/render.js';
import { styleFor } from '../output/style.js';
import type { RelayEvent } from '../relay/relay.js';
import type { ChannelStatus, RelayAuth } from '../relay/status-client.js';
import { configDir } from '../store/paths.js';
import type { RelayStorage } from '../relay/storage.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { BODY_READS } from '../delivery/defaults.js';
import { formatDuration } from '../util/duration.js';
import { fsReason } from '../util/files.js';
import { isLoopback } from '../util/net.js';
import { hostPort, integer, size, timeLimit, type HostPort } from '../util/parse.js';
import { tracesAsked } from '../observe/asked.js';
import { version } from '../version.js';
import { printable } from '../util/printable.js';
import { addSensitive, redact } from '../util/redact.js';
import { msDefault, portOption, repeatable, sizeDefault, valued } from '../flags/options.js';

/** The relay token is given by the environment only, never by a flag (it would show in `ps` and the shell's history). */
export const RELAY_TOKEN_ENV = 'WXHOOKS_RELAY_TOKEN';
/** Shorter than this, a token could be guessed: the relay refuses to start with it. */
const MIN_TOKEN = 16;

/** How long deliveries are kept, as --keep is written: whole days as days (`7d`, not `168h`). */
const keptFor = (ms: number) => (ms >= 86_400_000 && ms % 86_400_000 === 0 ? `${ms / 86_400_000}d` : formatDuration(ms));

export function register(relay: Command, act: Act): void {
  relay
    .command('serve')
    .description('run a relay on this machine (a small VM): the service posts to it, listen --relay takes from it')
    .addOption(portOption(DEFAULTS.relayPort))
    .option('--host <host>', 'address to bind (behind a TLS proxy, keep 127.0.0.1)', DEFAULTS.host)
    .option('--store <store>', 'where deliveries wait: file (a folder, see --dir) or a postgres:// URL', DEFAULTS.relayStore)
    .option('--dir <dir>', 'the folder of --store file (default: relay/ in the store folder)')
    .option('--schema <name>', 'the PostgreSQL schema of --store postgres://', DEFAULTS.relaySchema)
    .addOption(valued('--keep <duration>', 'how long a delivery is kept for listen, and a channel unused', timeLimit, [DEFAULTS.relayKeepMs, keptFor(DEFAULTS.relayKeepMs)]))
    .addOption(valued('--max-bytes <size>', 'the bytes of deliveries kept at most; past it new ones are answered 503 with Retry-After', size, sizeDefault(DEFAULTS.relayMaxBytes)))
    .addOption(valued('--max-body <size>', 'the largest delivery accepted (413 past it)', size, sizeDefault(DEFAULTS.maxBodyBytes)))
    .addOption(valued('--max-inflight <size>', 'body bytes read at once across every request (503 past it)', size, sizeDefault(DEFAULTS.relayMaxInflightBytes)))
    .addOption(valued('--read-timeout <duration>', `headers must arrive within this, the whole request within ${BODY_READS} times it`, timeLimit, msDefault(DEFAULTS.readTimeoutMs)))
    .addOption(valued('--max-channels <n>', 'the channels kept at most: past it, the relay token creates no more', integer(1), [DEFAULTS.relayMaxChannels, String(DEFAULTS.relayMaxChannels)]))
    .option('--fsync', 'with --store file: sync each delivery to the disk before answering (survives a power loss; slower)')
    .addOption(valued('--metrics <[host:]port>', 'serve /healthz, /readyz and Prometheus /metrics on a port of their own (127.0.0.1 unless a host is given); traces: the OTEL_* variables', hostPort))
    .addHelpText(
      'after',
      `
Examples:
  $ export ${RELAY_TOKEN_ENV}=$(wxhooks relay token)     # once; listen needs the same one
  $ wxhooks relay serve                                    # http://127.0.0.1:8790, deliveries in a folder
  $ wxhooks relay serve --store postgres://relay:pw@db/relay --keep 3d --max-bytes 1GiB
  $ wxhooks relay serve --json | tee relay.log             # one JSON object a line

The service posts each delivery to https://<your relay>/in/<channel>: put a TLS proxy (Caddy, nginx) in
front. The token comes from ${RELAY_TOKEN_ENV} only (at least ${MIN_TOKEN} characters).`,
    )
    .action(act(runRelayServe, { longRunning: true }));
  channelOptions(
    relay.command('status').description('what a relay holds: each channel, what waits in it, what was refused, and whether a listen is connected').argument('<url>', "the relay's address"),
    'only this channel',
  )
    .addHelpText(
      'after',
      `\nEvery channel needs the relay token (${RELAY_TOKEN_ENV}); one channel (--webhook ID) only that webhook's secret.\n\nExamples:\n  $ wxhooks relay status https://wxhooks-relay.example.workers.dev\n  $ wxhooks relay status http://127.0.0.1:8790 --json\n  $ wxhooks relay status https://relay.example.com --webhook 7`,
    )
    .action(act(runRelayStatus));
  channelOptions(
    relay
      .command('refused')
      .description('the deliveries of a channel that a listen refused (it could not verify them), kept apart at the relay: when, and why')
      .argument('<url>', "the relay's address"),
    'the channel',
  )
    .addHelpText(
      'after',
      `\nA listen refuses what it cannot verify (another secret, a narrower --tolerance than the relay had): the relay keeps\nit, out of the queue, until it is dropped (\`wxhooks relay drop\`). Nothing refused is ever lost in silence.\n\nExamples:\n  $ wxhooks relay refused https://relay.example.com --webhook 7\n  $ wxhooks relay refused https://relay.example.com --channel wh-7-0c1d… --json`,
    )
    .action(act(runRelayRefused));
  channelOptions(
    relay.command('drop').description('drops refused deliveries of a channel for good: those named (--seq), or all of them (--all-refused)').argument('<url>', "the relay's address"),
    'the channel',
  )
    .addOption(repeatable('--seq <n>', 'a refused delivery, by its number in `relay refused` (repeatable)', integer(1)))
    .option('--all-refused', 'every refused delivery of the channel')
    .addHelpText('after', `\nExamples:\n  $ wxhooks relay drop https://relay.example.com --webhook 7 --seq 12 --seq 13\n  $ wxhooks relay drop https://relay.example.com --webhook 7 --all-refused`)
    .action(act(runRelayDrop));
  relay
    .command('token')
    .description('print a new random relay token (set it as WXHOOKS_RELAY_TOKEN on the relay and for listen)')
    .addHelpText(
      'after',
      `\nExamples:\n  $ export ${RELAY_TOKEN_ENV}=$(wxhooks relay token)          # keep it: the relay and listen need the same\n  $ echo "$${RELAY_TOKEN_ENV}" | npx wrangler secret put ${RELAY_TOKEN_ENV}`,
    )
    .action(act(runRelayToken));
  relay
    .command('worker')
    .description('write the relay as a Cloudflare Worker (its one file and a wrangler.toml) into a folder, to deploy with wrangler')
    .argument('<dir>', 'the folder to write (made if missing; must hold no other relay)')
    .option('--force', 'overwrite the files already there')
    .addHelpText('after', `\nExamples:\n  $ wxhooks relay worker ./my-relay && cd my-relay\n  $ echo "$${RELAY_TOKEN_ENV}" | npx wrangler secret put ${RELAY_TOKEN_ENV} && npx wrangler deploy`)
    .action(act(runRelayWorker));
}

/** `--webhook ID` or `--channel NAME`: which channel, and (with --webhook, without the relay token) its keys from the webhook's secret. */
function channelOptions(cmd: Command, what: string): Command {
  return cmd
    .option('--webhook <id>', `${what}: this webhook's (reached with its stored secret; no relay token needed)`)
    .option('--channel <name>', `${what}, by name (with the relay token, or with --webhook)`);
}

interface ChannelChoice {
  webhook?: string;
  channel?: string;
}

/**
 * Which channel a command is about, and how it reaches the relay: the relay token when it is set (every
 * channel), else the channel's keys from the stored secret of --webhook. The channel: --channel, else
 * --webhook's (its URL at the service names it, else the one this machine noted).
 */
async function channelTarget(ctx: Context, relay: string, o: ChannelChoice): Promise<{ auth: RelayAuth; channel: string }> {
  const token = ctx.env[RELAY_TOKEN_ENV]?.trim();
  if (token) addSensitive(token);
  if (o.webhook === undefined) {
    if (o.channel === undefined) throw new UsageError('Which channel? Give --webhook ID (or --channel NAME).');
    if (!token) throw new UsageError(`--channel needs the relay token (${RELAY_TOKEN_ENV}); with --webhook ID, the webhook's stored secret reaches its channel instead.`);
    return { auth: { token }, channel: o.channel };
  }
  const { baseUrlFor, serviceFor } = await import('../tasks/service.js');
  const { secretStoreFor } = await import('../tasks/secrets.js');
  const base = (await baseUrlFor(ctx)).url;
  const { channelOfUrl, notedChannel } = await import('../relay/channels.js');
  let channel = o.channel ?? (await notedChannel(configDir(ctx.env), relay, base, o.webhook));
  if (channel === undefined && (ctx.env.WX_API_KEY || ctx.env.WB_API_KEY)) {
    const hook = await (await serviceFor(ctx)).service.getWebhook(o.webhook).catch(() => undefined);
    channel = channelOfUrl(relay, hook?.url);
  }
  if (channel === undefined)
    throw new UsageError(`No channel of webhook ${o.webhook} at ${relay} is known here.`, {
      hint: `\`wxhooks listen --relay ${relay} --webhook ${o.webhook}\` opens it (and notes it here); or give --channel NAME (the end of the webhook's URL).`,
    });
  if (token) return { auth: { token }, channel };
  const entry = await (await secretStoreFor(ctx)).get(base, o.webhook);
  if (!entry) throw new UsageError(`No secret is stored for webhook ${o.webhook} at ${base}, and ${RELAY_TOKEN_ENV} is not set: neither reaches the channel.`);
  addSensitive(entry.secret);
  return { auth: { secrets: [entry.secret] }, channel };
}

export interface RelayServeOptions {
  port: number;
  host: string;
  store: string;
  dir?: string;
  schema: string;
  keep: number;
  maxBytes: number;
  maxBody: number;
  maxInflight: number;
  readTimeout: number;
  maxChannels: number;
  fsync?: boolean;
  metrics?: HostPort;
}

/** The relay token from the environment, checked. */
function relayToken(ctx: Context): string {
  const token = ctx.env[RELAY_TOKEN_ENV]?.trim();
  if (!token)
    throw new UsageError(`${RELAY_TOKEN_ENV} is not set: the relay needs a token, and so does every listen that connects to it.`, { hint: `export ${RELAY_TOKEN_ENV}=$(wxhooks relay token)` });
  if (token.length < MIN_TOKEN)
    throw new UsageError(`${RELAY_TOKEN_ENV} is ${token.length} characters long: a relay token needs at least ${MIN_TOKEN}.`, { hint: `Make one with \`wxhooks relay token\`.` });
  addSensitive(token);
  return token;
}

async function openStorage(ctx: Context, opts: RelayServeOptions): Promise<RelayStorage> {
  const { storeKind } = await import('../store/store-url.js');
  if (storeKind(opts.store) === 'postgres') {
    if (opts.dir !== undefined) throw new UsageError('--dir is for --store file; a postgres:// store keeps everything in the database.');
    if (opts.fsync) throw new UsageError('--fsync is for --store file; PostgreSQL commits each delivery before it is answered.');
    const { PgRelayStorage } = await import('../relay/postgres-storage.js');
    return PgRelayStorage.open({ url: opts.store, schema: opts.schema });
  }
  const { configDir } = await import('../store/paths.js');
  const { FileRelayStorage } = await import('../relay/file-storage.js');
  return FileRelayStorage.open({ dir: resolve(opts.dir ?? join(configDir(ctx.env), 'relay')), fsync: opts.fsync });
}

/** A line about the relay itself: JSON with --json, else for a person; both on stdout, as its log. */
const say = (ctx: Context, event: Record<string, unknown>, text: string) => line(ctx.stdout, ctx.global.json ? JSON.stringify(event) : text);

/** The relay's watch (src/observe/relay.ts), when --metrics or the OTEL_* variables ask for one: nothing is loaded otherwise. */
async function relayWatchFor(ctx: Context, opts: RelayServeOptions) {
  const tracing = tracesAsked(ctx.env);
  if (!opts.metrics && !tracing) return undefined;
  const { watchRelay } = await import('../observe/relay.js');
  return watchRelay({ metrics: opts.metrics, tracing, env: ctx.env, version: version(), now: () => ctx.clock.now(), warn: (text) => line(ctx.stderr, `warning: ${text}`) });
}

/** One line of the relay's log, for a person. */
function describe(e: RelayEvent, style: ReturnType<typeof styleFor>): string {
  const time = e.time.slice(11, 19);
  if ('event' in e) {
    const parts = [
      e.channel ? `channel ${e.channel}` : '',
      e.queued !== undefined ? `${e.queued} queued` : '',
      e.unacknowledged ? `${e.unacknowledged} not acknowledged` : '',
      e.deliveries !== undefined ? `${e.deliveries} deliveries` : '',
      e.message ?? '',
    ];
    return `${style.dim(time)} ${style.cyan('•')} ${e.event.replace(/_/g, ' ')}  ${parts.filter(Boolean).join(', ')}`;
  }
  const ok = e.status >= 200 && e.status < 300;
  const mark = ok ? style.green('✓') : style.red('✗');
  const what = [
    e.channel ? `channel ${e.channel}` : e.path,
    e.seq !== undefined ? `#${e.seq}` : '',
    e.size !== undefined ? bytes.format(e.size, { unitSeparator: ' ' }) : '',
    ok ? '' : (e.message ?? e.outcome),
  ];
  return `${style.dim(time)} ${mark} ${e.status}  ${what.filter(Boolean).join('  ')}`;
}

export async function runRelayServe(ctx: Context, opts: RelayServeOptions): Promise<void> {
  if (opts.metrics && opts.metrics.port !== 0 && opts.metrics.port === opts.port) {
    throw new UsageError(`--metrics ${opts.metrics.port} is the relay's own port: health and metrics are served on a port of their own.`, { hint: 'Give --metrics another port, such as 9464.' });
  }
  const token = relayToken(ctx);
  const storage = await openStorage(ctx, opts);
  const style = styleFor(ctx, ctx.stdout);
  const { startRelayServer } = await import('../relay/node-host.js');
  // what is logged never holds a secret: the token and the channels' secrets are registered, and every line passes redact
  const log = (e: RelayEvent) => line(ctx.stdout, redact(ctx.global.json ? JSON.stringify(e) : printable(describe(e, style))));
  // --metrics, OpenTelemetry (src/observe/relay.ts): loaded only when asked for
  const watch = await relayWatchFor(ctx, opts);
  let running: Awaited<ReturnType<typeof startRelayServer>>;
  try {
    running = await startRelayServer({
      host: opts.host,
      port: opts.port,
      storage,
      token,
      keepMs: opts.keep,
      maxBytes: opts.maxBytes,
      maxBody: opts.maxBody,
      maxInflight: opts.maxInflight,
      readTimeoutMs: opts.readTimeout,
      maxChannels: opts.maxChannels,
      clock: ctx.clock,
      onEvent: (e) => (watch?.event(e), log(e)),
      traced: watch?.traced,
    });
  } catch (err) {
    await watch?.close();
    await storage.close();
    throw err;
  }
  const served = await watch?.serve(running, storage.where);
  if (ctx.global.json) {
    line(ctx.stdout, JSON.stringify({ event: 'listening', url: running.url, store: storage.where, keep_seconds: Math.round(opts.keep / 1000), max_bytes: opts.maxBytes }));
  } else {
    line(
      ctx.stdout,
      `${style.green('●')} wxhooks relay on ${style.bold(running.url)} (deliveries in ${storage.where}, kept ${keptFor(opts.keep)}, at most ${bytes.format(opts.maxBytes, { unitSeparator: ' ' })})`,
    );
    line(ctx.stdout, style.dim(`  the service posts to ${running.url}/in/<channel>; listen --relay connects with ${RELAY_TOKEN_ENV}`));
  }
  if (served)
    say(ctx, { event: 'metrics', url: `${served.url}/metrics`, health: `${served.url}/healthz`, ready: `${served.url}/readyz` }, `  metrics: ${served.url}/metrics (health: /healthz, ready: /readyz)`);
  if (watch?.traces)
    say(ctx, { event: 'traces', url: watch.traces.url, protocol: watch.traces.protocol }, `  traces: each request a span, sent to ${watch.traces.url} (OTLP ${watch.traces.protocol})`);
  if (!isLoopback(opts.host)) line(ctx.stderr, `warning: the relay is reachable from other machines on ${opts.host} over plain HTTP: put a TLS proxy in front of it.`);
  const signal = await ctx.interrupted;
  await running.close();
  await watch?.close();
  await storage.close();
  throw new InterruptedError(signal);
}

const size0 = (n: number) => bytes.format(n, { unitSeparator: ' ' }) ?? '0 B';

function channelRow(c: ChannelStatus): string[] {
  return [c.channel, c.temporary ? 'temporary' : 'lasting', c.connected ? 'yes' : 'no', String(c.queued), String(c.refused), size0(c.bytes), c.oldest_at ?? ''];
}
const CHANNEL_COLUMNS = ['CHANNEL', 'KIND', 'CONNECTED', 'QUEUED', 'REFUSED', 'BYTES', 'OLDEST'];

export async function runRelayStatus(ctx: Context, url: string, o: ChannelChoice = {}): Promise<void> {
  const client = await import('../relay/status-client.js');
  if (o.webhook !== undefined || o.channel !== undefined) {
    const { auth, channel } = await channelTarget(ctx, url, o);
    const c = await client.channelStatus(url, auth, channel, ctx.global.timeoutMs);
    emit(
      ctx,
      c,
      () => table(CHANNEL_COLUMNS, [channelRow(c)], Boolean(ctx.stdout.isTTY)) + (c.refused ? `\n${c.refused} refused: \`wxhooks relay refused ${url} --channel ${c.channel}\` says why` : ''),
    );
    return;
  }
  const body = await client.relayStatus(url, relayToken(ctx), ctx.global.timeoutMs);
  const channels = body.channels;
  emit(ctx, body, () => {
    const head = `${channels.length} channel${channels.length === 1 ? '' : 's'}; ${size0(body.bytes)} of ${size0(body.max_bytes)} used; deliveries kept ${keptFor(body.keep_seconds * 1000)}${body.refused ? `; ${body.refused} refused, kept until dropped` : ''}\n`;
    return head + (channels.length ? table(CHANNEL_COLUMNS, channels.map(channelRow), Boolean(ctx.stdout.isTTY)) : '');
  });
}

/** The Trigger-Id a refused delivery's headers claim (it did not verify at listen: a claim, shown as such). */
const claimedTrigger = (headers: [string, string][]) => headers.find(([k]) => k.toLowerCase() === 'trigger-id')?.[1];

export async function runRelayRefused(ctx: Context, url: string, o: ChannelChoice): Promise<void> {
  const { refusedAt } = await import('../relay/status-client.js');
  const { auth, channel } = await channelTarget(ctx, url, o);
  const refused = await refusedAt(url, auth, channel, ctx.global.timeoutMs);
  emit(
    ctx,
    {
      channel,
      refused: refused.map(({ headers, ...r }) => ({ ...r, claimed_trigger_id: claimedTrigger(headers) ?? null })),
    },
    () =>
      refused.length
        ? `${table(
            ['SEQ', 'RECEIVED', 'REFUSED', 'TRIGGER (CLAIMED)', 'REASON', 'WHY'],
            refused.map((r) => [String(r.seq), r.received_at, r.refused_at, printable(claimedTrigger(r.headers) ?? ''), r.reason, printable(r.message)]),
            Boolean(ctx.stdout.isTTY),
          )}\nDrop them with \`wxhooks relay drop ${url} --channel ${channel} --all-refused\` (or --seq N).`
        : `Nothing refused in channel ${channel}.`,
  );
}

/** `deliveries list --relay URL`: a channel's refused deliveries at the relay, as the other sources of `deliveries list` are shown. */
export async function runDeliveriesRelay(ctx: Context, url: string, o: ChannelChoice): Promise<void> {
  const { refusedAt } = await import('../relay/status-client.js');
  const { auth, channel } = await channelTarget(ctx, url, o);
  const refused = await refusedAt(url, auth, channel, ctx.global.timeoutMs);
  if (!ctx.global.json && !refused.length) {
    line(ctx.stderr, `Nothing refused in channel ${channel} at ${url}.`);
    return;
  }
  const entries = refused.map((r) => ({
    received_at: r.received_at,
    claimed_trigger_id: claimedTrigger(r.headers) ?? null,
    outcome: 'unverified' as const,
    size: r.size,
    ref: `#${r.seq}`,
    kept: `relay ${url} channel ${channel}, refused at ${r.refused_at}`,
    reason: r.reason,
    message: r.message,
  }));
  emit(ctx, { deliveries: entries }, () =>
    table(
      ['RECEIVED', 'TRIGGER (CLAIMED)', 'OUTCOME', 'SIZE', 'SEQ', 'WHY'],
      entries.map((e) => [e.received_at, printable(e.claimed_trigger_id ?? ''), e.outcome, String(e.size), e.ref, printable(e.message)]),
      Boolean(ctx.stdout.isTTY),
    ),
  );
}

export async function runRelayDrop(ctx: Context, url: string, o: ChannelChoice & { seq?: number[]; allRefused?: boolean }): Promise<void> {
  if (!o.seq?.length && !o.allRefused) throw new UsageError('Say which refused deliveries to drop: --seq N (repeatable), or --all-refused.', { hint: '`wxhooks relay refused` lists them.' });
  if (o.seq?.length && o.allRefused) throw new UsageError('Give --seq or --all-refused, not both.');
  const { dropRefused } = await import('../relay/status-client.js');
  const { auth, channel } = await channelTarget(ctx, url, o);
  const r = await dropRefused(url, auth, channel, o.allRefused ? 'all' : o.seq!, ctx.global.timeoutMs);
  emit(ctx, { channel, ...r }, () =>
    [
      `Dropped ${r.dropped.length} refused ${r.dropped.length === 1 ? 'delivery' : 'deliveries'} of channel ${channel}${r.dropped.length ? ` (${r.dropped.map((n) => `#${n}`).join(', ')})` : ''}.`,
      ...(r.not_refused.length ? [`Not refused deliveries there (nothing done): ${r.not_refused.map((n) => `#${n}`).join(', ')}.`] : []),
    ].join('\n'),
  );
  if (r.not_refused.length && !r.dropped.length)
    throw new NotFoundError(`Channel ${channel} holds no refused delivery ${r.not_refused.map((n) => `#${n}`).join(', ')}.`, { hint: '`wxhooks relay refused` lists them.' });
}

export async function runRelayToken(ctx: Context): Promise<void> {
  const token = randomBytes(32).toString('base64url');
  emit(ctx, { token }, () => token);
}

export async function runRelayWorker(ctx: Context, dir: string, opts: { force?: boolean }): Promise<void> {
  // the package's dist/relay-worker/, from this module built (dist/bin/, dist/commands/) or not (src/commands/)
  const from = fileURLToPath(new URL('../../dist/relay-worker/', import.meta.url));
  const files = ['index.js', 'wrangler.toml'];
  const there = await readdir(dir).catch(() => [] as string[]);
  const clash = files.filter((f) => there.includes(f));
  if (clash.length && !opts.force)
    throw new UsageError(`${dir} already holds ${clash.join(' and ')}.`, { hint: 'Give another folder, or --force to overwrite them (your wrangler.toml changes would be lost).' });
  try {
    await mkdir(dir, { recursive: true });
    for (const f of files) await copyFile(join(from, f), join(dir, f));
  } catch (err) {
    throw new UsageError(`Cannot write the Worker into ${dir}: ${fsReason(err)}.`, { cause: err });
  }
  emit(ctx, { dir: resolve(dir), files }, () =>
    [
      `✓ the relay's Worker is in ${dir}: index.js (one file, no dependency) and wrangler.toml`,
      '',
      `  cd ${dir}`,
      `  export ${RELAY_TOKEN_ENV}=$(wxhooks relay token)     # keep it: listen needs the same one`,
      `  echo "$${RELAY_TOKEN_ENV}" | npx wrangler secret put ${RELAY_TOKEN_ENV}`,
      '  npx wrangler deploy',
    ].join('\n'),
  );
}
