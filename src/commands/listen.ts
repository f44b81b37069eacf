import type { Command } from 'commander';
import { line, type Act, type Context, type Out } from '../context.js';
import { InterruptedError, NotVerifiedError, UsageError, type WxError } from '../errors.js';
import { formatEvent } from '../output/listen.js';
import { styleFor } from '../output/style.js';
import type { ReceiverEvent } from '../receiver/event.js';
import { startReceiver } from '../receiver/server.js';
import { Verifier } from '../signing/verify.js';
import type { Scheme } from '../signing/layouts.js';
import { FilePairStore } from '../store/file-pairs.js';
import { configDir } from '../store/paths.js';
import { formatDuration } from '../util/duration.js';
import { ensureWritableDir } from '../util/files.js';
import { LineBuffer } from '../util/line-buffer.js';
import { duration, integer, size, timeLimit, url } from '../util/parse.js';
import { addSensitive } from '../util/redact.js';
import { portOption, schemeOption, toleranceOption, valued } from './options.js';
import { resolveSecrets, secretSourceOptions } from './shared.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .addOption(portOption(8787))
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--path <path>', 'the path deliveries are POSTed to', '/');
  secretSourceOptions(cmd, 'verify with');
  cmd
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
    .addOption(valued('--exit-after <n>', 'exit 0 after N verified new deliveries', integer(1)))
    .option('--until <type>', 'exit 0 at the first verified delivery of this type')
    .addOption(valued('--within <duration>', 'with --until: exit 9 if it has not come by then', duration))
    .addOption(valued('--read-timeout <duration>', 'slow-client guard: headers must arrive within this, the whole request within 6 times it', timeLimit, [10_000, '10s']))
    .addHelpText(
      'after',
      `
The secret comes from --webhook ID (the store), --secret-env VAR, or stdin; never from a flag.
Answers: 200 verified (or your app's 2xx), 200 duplicate (skipped), 409 same delivery still in progress,
502 your app failed (not marked processed, so the retry can succeed), 401 bad signature or stale
timestamp, 400 missing header or not a JSON object, 413 too large, 503 the processed pair could not
be stored or too many bodies in flight. A 2xx is sent only once the delivery's pair is written.

Examples:
  $ wxhooks listen --webhook 7 --forward-to http://localhost:3000/webhooks
  $ wxhooks listen --secret-env WX_WEBHOOK_SECRET --json | jq 'select(.outcome=="accepted")'
  $ wxhooks listen --webhook 7 --until initialization_time.available --within 10m   # a CI gate
  $ wxhooks listen --webhook 7 --respond-status 500                                 # watch the retries`,
    )
    .action(act(runListen, { longRunning: true }));
}

export interface ListenOptions {
  port: number;
  host: string;
  path: string;
  webhook?: string;
  secretEnv?: string;
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
  exitAfter?: number;
  until?: string;
  within?: number;
  readTimeout: number;
}

/** What `listen` keeps unwritten for a stdout nobody reads before it drops lines (and counts them). */
export const OUTPUT_LIMIT = 8 * 1024 * 1024;

/**
 * The report's lines, gathered and written at most every 20 ms (a burst costs one write). When the
 * reader does not keep up (`listen | sleep 300`), lines past OUTPUT_LIMIT unwritten are dropped rather
 * than kept, counted, and the count is reported once stdout drains: the answers never wait for it.
 */
function reportWriter(out: Out, json: boolean): LineBuffer {
  let dropped = 0;
  const output: LineBuffer = new LineBuffer((chunk, lines) => {
    if ((out.writableLength ?? 0) <= OUTPUT_LIMIT) {
      out.write(chunk);
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

export async function runListen(ctx: Context, o: ListenOptions): Promise<void> {
  if (!o.path.startsWith('/')) throw new UsageError(`--path must start with "/", not "${o.path}".`);
  if (o.within !== undefined && o.until === undefined) throw new UsageError('--within goes with --until TYPE.');
  if (o.saveDir !== undefined) await ensureWritableDir(o.saveDir, '--save-dir');

  const { secrets, from } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv });
  secrets.forEach(addSensitive);
  const verifier = new Verifier({ secret: secrets, scheme: o.scheme, tolerance: o.tolerance });

  const style = styleFor(ctx, ctx.stdout);
  const styleErr = styleFor(ctx, ctx.stderr);
  const json = ctx.global.json;
  const output = reportWriter(ctx.stdout, json);
  const print = (event: ReceiverEvent) => output.push(json ? JSON.stringify(event) : formatEvent(event, style));

  const store = await FilePairStore.open({ dir: configDir(ctx.env), ttlMs: o.dedupeTtl, fsync: o.fsync, giveUpMs: giveUpMs(ctx) });
  let accepted = 0;
  let finish: (why: 'done' | WxError) => void = () => undefined;
  const finished = new Promise<'done' | WxError>((resolve) => (finish = resolve));

  let receiver;
  try {
    receiver = await startReceiver({
      port: o.port,
      host: o.host,
      path: o.path,
      verifier,
      store,
      maxBody: o.maxBody,
      maxInflight: o.maxInflight,
      forwardTo: o.forwardTo,
      forwardTimeoutMs: o.forwardTimeout,
      saveDir: o.saveDir,
      respondStatus: o.respondStatus,
      readTimeoutMs: o.readTimeout,
      onEvent(event) {
        print(event);
        if (event.outcome === 'accepted') accepted++;
        if (o.exitAfter !== undefined && accepted >= o.exitAfter) finish('done');
        if (o.until !== undefined && event.type === o.until && (event.outcome === 'accepted' || event.outcome === 'duplicate')) finish('done');
        if (event.fatal) {
          finish(new UsageError(`Stopped: ${event.message ?? 'the processed pairs can no longer be written.'}`, { hint: 'Free some space or fix the store folder, then start listen again.' }));
        }
      },
    });
  } catch (err) {
    await store.close();
    throw err;
  }

  if (json) {
    output.push(JSON.stringify({ outcome: 'listening', url: receiver.url, port: receiver.port, scheme: o.scheme, tolerance: o.tolerance, secret_from: from, forward_to: o.forwardTo ?? null, fsync: Boolean(o.fsync) }));
  } else {
    line(ctx.stderr, `${styleErr.green('Ready.')} Listening on ${styleErr.bold(receiver.url)}, verifying with ${from} (scheme ${o.scheme}, tolerance ${o.tolerance} s)`);
    if (o.forwardTo) line(ctx.stderr, `Forwarding verified deliveries to ${o.forwardTo}`);
    if (o.webhook) line(ctx.stderr, styleErr.dim(`Point the webhook here with: wxhooks webhook update ${o.webhook} --url ${receiver.url}`));
    line(ctx.stderr, styleErr.dim('Ctrl-C to stop.'));
  }
  if (o.scheme === 'hex-body') line(ctx.stderr, 'warning: --scheme hex-body does not sign the timestamp or Trigger-Id: captured deliveries can be replayed.');

  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'expired'>((resolve) => {
    if (o.within !== undefined) timer = setTimeout(() => resolve('expired'), o.within);
  });
  const why = await Promise.race([finished, expired, ctx.interrupted]);
  clearTimeout(timer);
  await receiver.close();
  await store.close();
  output.flush();
  if (why === 'expired') {
    throw new NotVerifiedError(`No verified ${o.until} delivery arrived within ${formatDuration(o.within!)}.`, {
      hint: 'Check that the webhook points here, is active and subscribed to that type (`wxhooks webhook get ID`).',
    });
  }
  if (typeof why === 'object') throw why;
  if (why === 'SIGINT') throw new InterruptedError('interrupted');
}

/** How long the pairs file may stay unwritable before listen stops (60 s; WXHOOKS_STORE_GIVE_UP_MS for tests). */
function giveUpMs(ctx: Context): number | undefined {
  const v = ctx.env.WXHOOKS_STORE_GIVE_UP_MS;
  return v && /^\d+$/.test(v) ? Number(v) : undefined;
}
