import { Option, type Command } from 'commander';
import type { Act } from '../cli.js';
import { line, type Context } from '../context.js';
import { InterruptedError, UsageError, VerifyFailedError } from '../errors.js';
import type { ReceiverEvent } from '../receiver/server.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .option('--port <port>', 'port to listen on (0 picks a free one)', '8787')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--path <path>', 'the path deliveries are POSTed to', '/')
    .option('--webhook <id>', "verify with this webhook's stored secret")
    .option('--secret-env <var>', 'verify with the secret in this environment variable (several: space-separated)')
    .addOption(new Option('--scheme <name>', 'signature layout: auto tries each that signs the timestamp, then pins it').choices(['auto', 'standard', 'stripe', 'hex-timestamp', 'hex-body']).default('auto'))
    .option('--tolerance <seconds>', 'how far a timestamp may be off, either way', '300')
    .option('--forward-to <url>', 'POST each verified delivery (exact bytes and headers) to your app')
    .option('--forward-timeout <duration>', 'how long your app may take', '30s')
    .option('--save-dir <dir>', 'write each verified delivery to a file that `verify` and `send` read back')
    .option('--max-body <size>', 'refuse bodies over this size with 413', '25MiB')
    .option('--respond-status <code>', 'answer verified deliveries with this status (e.g. 500, to watch the retries)')
    .option('--dedupe-ttl <duration>', 'how long a processed (trigger, subscription) pair is remembered', '24h')
    .option('--exit-after <n>', 'exit 0 after N verified new deliveries')
    .option('--until <type>', 'exit 0 at the first verified delivery of this type')
    .option('--within <duration>', 'with --until: exit 9 if it has not come by then')
    .option('--read-timeout <duration>', 'slow-client guard: headers must arrive within this, the whole request within 6 times it', '10s')
    .addHelpText(
      'after',
      `
The secret comes from --webhook ID (the store), --secret-env VAR, or stdin; never from a flag.
Answers: 200 verified (or your app's 2xx), 200 duplicate (skipped), 409 same delivery still in progress,
502 your app failed (not marked processed, so the retry can succeed), 401 bad signature or stale
timestamp, 400 missing header or not a JSON object, 413 too large.

Examples:
  $ wxhooks listen --webhook 7 --forward-to http://localhost:3000/webhooks
  $ wxhooks listen --secret-env WX_WEBHOOK_SECRET --json | jq 'select(.outcome=="accepted")'
  $ wxhooks listen --webhook 7 --until initialization_time.available --within 10m   # a CI gate
  $ wxhooks listen --webhook 7 --respond-status 500                                 # watch the retries`,
    )
    .action(act(runListen, { longRunning: true }));
}

export interface ListenOptions {
  port: string;
  host: string;
  path: string;
  webhook?: string;
  secretEnv?: string;
  scheme: 'auto' | 'standard' | 'stripe' | 'hex-timestamp' | 'hex-body';
  tolerance: string;
  forwardTo?: string;
  forwardTimeout: string;
  saveDir?: string;
  maxBody: string;
  respondStatus?: string;
  dedupeTtl: string;
  exitAfter?: string;
  until?: string;
  within?: string;
  readTimeout: string;
}

const wholeNumber = (text: string, what: string, min: number, max: number) => {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) throw new UsageError(`${what} must be a whole number from ${min} to ${max}, not "${text}".`);
  return Number(text);
};

export async function parseSize(text: string, what: string): Promise<number> {
  const { default: bytes } = await import('bytes');
  const n = /^\d+$/.test(text.trim()) ? Number(text) : bytes.parse(text.trim().replace(/ib$/i, 'b'));
  if (n === null || !Number.isFinite(n) || n <= 0) throw new UsageError(`${what} must be a size such as 25MiB, 512KB or 1048576, not "${text}".`);
  return n;
}

export async function runListen(ctx: Context, o: ListenOptions): Promise<void> {
  const { parseDuration, parseTimeout } = await import('../util/duration.js');
  const { checkUrl } = await import('../api/requests.js');
  const port = wholeNumber(o.port, '--port', 0, 65535);
  const tolerance = wholeNumber(o.tolerance, '--tolerance', 1, 86_400 * 366);
  if (!o.path.startsWith('/')) throw new UsageError(`--path must start with "/", not "${o.path}".`);
  const forwardTimeoutMs = parseTimeout(o.forwardTimeout, '--forward-timeout');
  const ttlMs = parseDuration(o.dedupeTtl, '--dedupe-ttl');
  const readTimeoutMs = parseTimeout(o.readTimeout, '--read-timeout');
  const maxBody = await parseSize(o.maxBody, '--max-body');
  const respondStatus = o.respondStatus === undefined ? undefined : wholeNumber(o.respondStatus, '--respond-status', 200, 599);
  const exitAfter = o.exitAfter === undefined ? undefined : wholeNumber(o.exitAfter, '--exit-after', 1, Number.MAX_SAFE_INTEGER);
  const withinMs = o.within === undefined ? undefined : parseDuration(o.within, '--within');
  if (withinMs !== undefined && o.until === undefined) throw new UsageError('--within goes with --until TYPE.');
  if (o.forwardTo !== undefined) checkUrl(o.forwardTo, '--forward-to');
  if (o.saveDir !== undefined) await (await import('../util/files.js')).ensureWritableDir(o.saveDir, '--save-dir');

  const { resolveSecrets } = await import('./shared.js');
  const { secrets, from } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv });
  const { addSensitive } = await import('../util/redact.js');
  secrets.forEach(addSensitive);

  const { Verifier } = await import('../signing/verify.js');
  const { ProcessedPairs } = await import('../receiver/pairs.js');
  const { configDir } = await import('../store/paths.js');
  const { startReceiver } = await import('../receiver/server.js');
  const { styleFor, PLAIN } = await import('../output/style.js');
  const { formatEvent } = await import('../output/listen.js');
  const colours = styleFor(ctx, ctx.stdout);
  const c = colours.level === 0 ? PLAIN : colours;
  const cerr = styleFor(ctx, ctx.stderr);
  const pairs = new ProcessedPairs(configDir(ctx.env), ttlMs);

  let accepted = 0;
  let finish: (why: 'done') => void = () => undefined;
  const finished = new Promise<'done'>((resolve) => (finish = resolve));
  // Lines are written at most every 20 ms, so a burst of deliveries costs one write, not one each.
  const { LineBuffer } = await import('../util/line-buffer.js');
  const output = new LineBuffer((chunk) => ctx.stdout.write(chunk));
  const print = (event: ReceiverEvent) => output.push(ctx.global.json ? JSON.stringify(event) : formatEvent(event, c));

  let receiver;
  try {
    receiver = await startReceiver({
      port,
      host: o.host,
      path: o.path,
      verifier: new Verifier({ secret: secrets, scheme: o.scheme, tolerance }),
      pairs,
      maxBody,
      forwardTo: o.forwardTo,
      forwardTimeoutMs,
      saveDir: o.saveDir,
      respondStatus,
      readTimeoutMs,
      onEvent(event) {
        print(event);
        if (event.outcome === 'accepted') accepted++;
        if (exitAfter !== undefined && accepted >= exitAfter) finish('done');
        if (o.until !== undefined && event.type === o.until && (event.outcome === 'accepted' || event.outcome === 'duplicate')) finish('done');
      },
    });
  } catch (err) {
    pairs.close();
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new UsageError(`Port ${port} on ${o.host} is already in use.`, { hint: 'Pick another with --port (0 picks a free one).' });
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') throw new UsageError(`Cannot bind ${o.host}: ${code}.`);
    throw err;
  }

  if (ctx.global.json) {
    output.push(JSON.stringify({ outcome: 'listening', url: receiver.url, port: receiver.port, scheme: o.scheme, tolerance, secret_from: from, forward_to: o.forwardTo ?? null }));
  } else {
    line(ctx.stderr, `${cerr.green('Ready.')} Listening on ${cerr.bold(receiver.url)}, verifying with ${from} (scheme ${o.scheme}, tolerance ${tolerance} s)`);
    if (o.forwardTo) line(ctx.stderr, `Forwarding verified deliveries to ${o.forwardTo}`);
    if (o.webhook) line(ctx.stderr, cerr.dim(`Point the webhook here with: wxhooks webhook update ${o.webhook} --url ${receiver.url}`));
    line(ctx.stderr, cerr.dim('Ctrl-C to stop.'));
  }
  if (o.scheme === 'hex-body') line(ctx.stderr, 'warning: --scheme hex-body does not sign the timestamp or Trigger-Id: captured deliveries can be replayed.');

  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'expired'>((resolve) => {
    if (withinMs !== undefined) timer = setTimeout(() => resolve('expired'), withinMs);
  });
  const why = await Promise.race([finished, expired, ctx.interrupted]);
  clearTimeout(timer);
  await receiver.close();
  output.flush();
  if (why === 'expired') {
    throw new VerifyFailedError(`No verified ${o.until} delivery arrived within ${o.within}.`, {
      hint: 'Check that the webhook points here, is active and subscribed to that type (`wxhooks webhook get ID`).',
    });
  }
  if (why === 'SIGINT') throw new InterruptedError('interrupted');
}
