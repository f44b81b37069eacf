import { Option, type Command } from 'commander';
import type { Act } from '../cli.js';
import { line, type Context } from '../context.js';
import { PingFailedError, UnreachableError, UsageError } from '../errors.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .argument('[saved]', 'a delivery saved by `listen --save-dir`, re-signed now (same body and Trigger-Id)')
    .requiredOption('--to <url>', 'the receiver')
    .option('--webhook <id>', "sign with this webhook's stored secret")
    .option('--secret-env <var>', 'sign with the secret in this environment variable')
    .option('--type <type>', 'the event type, for a generated body', 'forecast_hour.available')
    .option('--body <file>', 'send this file as the body, byte for byte, instead of a generated one')
    .addOption(new Option('--layout <name>', 'how to sign').choices(['standard', 'stripe', 'hex-timestamp', 'hex-body']).default('standard'))
    .option('--trigger-id <id>', 'the Trigger-Id (default: a new one; a saved delivery keeps its own)')
    .option('--webhook-id <id>', 'webhook_id in a generated body', '1')
    .option('--subscription-id <id>', 'subscription_id in a generated body', '1')
    .option('--model <model>', 'data.model in a generated body', 'wm-6')
    .option('--timestamp <seconds>', 'sign with this Unix time instead of now (to test your stale-timestamp check)')
    .addHelpText(
      'after',
      `
Exit 0 when the receiver answers 2xx, 7 when it answers anything else, 6 when it cannot be reached.

Examples:
  $ wxhooks send --to http://localhost:3000/webhooks --secret-env WX_WEBHOOK_SECRET --type initialization_time.available
  $ wxhooks send saved/delivery.json --to http://localhost:3000/webhooks --webhook 7
  $ wxhooks send --to http://localhost:3000/webhooks --webhook 7 --timestamp 1700000000   # should be refused`,
    )
    .action(act(runSend));
}

export interface SendOptions {
  to: string;
  webhook?: string;
  secretEnv?: string;
  type: string;
  body?: string;
  layout: 'standard' | 'stripe' | 'hex-timestamp' | 'hex-body';
  triggerId?: string;
  webhookId: string;
  subscriptionId: string;
  model: string;
  timestamp?: string;
}

export async function runSend(ctx: Context, saved: string | undefined, o: SendOptions): Promise<void> {
  const { checkUrl } = await import('../api/requests.js');
  checkUrl(o.to, '--to');
  if (o.timestamp !== undefined && !/^\d{1,13}$/.test(o.timestamp)) throw new UsageError(`--timestamp must be Unix seconds, not "${o.timestamp}".`);
  const { buildPayload, latestCycle, newTriggerId } = await import('../signing/payload.js');
  let body: Buffer;
  let triggerId = o.triggerId;
  if (saved !== undefined) {
    if (o.body !== undefined) throw new UsageError('Give a saved delivery or --body, not both.');
    const { readCaptured } = await import('../receiver/saved.js');
    const captured = await readCaptured(saved);
    body = captured.body;
    triggerId ??= captured.headers['trigger-id']; // both sources keep header names in lower case
  } else if (o.body !== undefined) {
    const { readInputFile } = await import('../util/files.js');
    body = await readInputFile(o.body, '--body');
  } else {
    triggerId ??= newTriggerId();
    const data: Record<string, unknown> = { model: o.model, initialization_time: latestCycle() };
    if (o.type === 'forecast_hour.available') data.forecast_hour = 0;
    body = buildPayload({ type: o.type, webhookId: o.webhookId, subscriptionId: o.subscriptionId, triggerId, data });
  }
  triggerId ??= newTriggerId();
  const { resolveSecrets } = await import('./shared.js');
  const { secrets } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv });
  const { signDelivery } = await import('../signing/sign.js');
  const headers = signDelivery({ secret: secrets[0]!, body, triggerId, layout: o.layout, timestamp: o.timestamp === undefined ? undefined : Number(o.timestamp) });

  const { request } = await import('undici');
  const started = Date.now();
  let status: number;
  let text: string;
  try {
    const res = await request(o.to, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'wxhooks-send', ...headers },
      body,
      signal: AbortSignal.timeout(ctx.global.timeoutMs),
    });
    status = res.statusCode;
    text = (await res.body.text()).replace(/\s+/g, ' ').trim().slice(0, 300);
  } catch (err) {
    const e = err as { name?: string; code?: string; message?: string };
    const why = e.name === 'TimeoutError' ? `no answer within ${ctx.global.timeoutMs} ms` : e.code === 'ECONNREFUSED' ? 'connection refused' : `${e.code ?? e.name}: ${e.message}`;
    throw new UnreachableError(`Could not deliver to ${o.to}: ${why}.`, { hint: 'Is your receiver running on that address?' });
  }
  const ms = Date.now() - started;
  const ok = status >= 200 && status < 300;
  if (ctx.global.json) {
    const { printJson } = await import('../output/render.js');
    printJson(ctx.stdout, { delivered: ok, status, body: text, ms, trigger_id: triggerId, layout: o.layout, headers });
  } else {
    const { styleFor } = await import('../output/style.js');
    const c = styleFor(ctx, ctx.stdout);
    line(ctx.stdout, `${ok ? c.green('✓') : c.red('✗')} ${o.to} answered ${status} in ${ms} ms${text ? `: ${text}` : ''}`);
    line(ctx.stdout, c.dim(`  Trigger-Id ${triggerId}, signed in the ${o.layout} layout, ${body.length} bytes`));
  }
  if (!ok) throw new PingFailedError(`The receiver answered ${status}${text ? `: ${text.slice(0, 120)}` : ''}.`, { status });
}
