import { Option, type Command } from 'commander';
import { type Act, type Context } from '../context.js';
import { DeliveryFailedError, UnreachableError, UsageError } from '../errors.js';
import { printable } from '../util/printable.js';
import { emit } from '../output/render.js';
import { styleFor } from '../output/style.js';
import { readCaptured } from '../receiver/saved.js';
import { LAYOUT_NAMES, type LayoutName } from '../signing/layouts.js';
import { buildPayload } from '../signing/payload.js';
import { newTriggerId, signDelivery } from '../signing/sign.js';
import { readInputFile } from '../util/files.js';
import { readStdinBytes } from '../util/input.js';
import { networkReason, readStart } from '../util/net.js';
import { unixSeconds, url } from '../util/parse.js';
import { latestCycle } from '../vocabulary.js';
import { valued } from './options.js';
import { resolveSecrets, secretSourceOptions } from './shared.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .argument('[saved]', 'a delivery saved by `listen --save-dir`, re-signed now (same body and Trigger-Id)')
    .addOption(valued('--to <url>', 'the receiver', url).makeOptionMandatory());
  secretSourceOptions(cmd, 'sign with')
    .option('--type <type>', 'the event type, for a generated body', 'forecast_hour.available')
    .option('--body <file>', 'send this file (- for stdin) as the body, byte for byte, instead of a generated one')
    .addOption(new Option('--layout <name>', 'how to sign').choices(LAYOUT_NAMES).default('standard'))
    .option('--trigger-id <id>', 'the Trigger-Id (default: a new one; a saved delivery keeps its own)')
    .option('--webhook-id <id>', 'webhook_id in a generated body', '1')
    .option('--subscription-id <id>', 'subscription_id in a generated body', '1')
    .option('--model <model>', 'data.model in a generated body', 'wm-6')
    .addOption(valued('--timestamp <seconds>', 'sign with this Unix time instead of now (to test your stale-timestamp check)', unixSeconds))
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
  layout: LayoutName;
  triggerId?: string;
  webhookId: string;
  subscriptionId: string;
  model: string;
  timestamp?: number;
}

export async function runSend(ctx: Context, saved: string | undefined, o: SendOptions): Promise<void> {
  let body: Buffer;
  let triggerId = o.triggerId;
  if (saved !== undefined) {
    if (o.body !== undefined) throw new UsageError('Give a saved delivery or --body, not both.');
    const captured = await readCaptured(saved);
    body = captured.body;
    triggerId ??= captured.headers['trigger-id']; // both sources keep header names in lower case
  } else if (o.body !== undefined) {
    body = o.body === '-' ? await readStdinBytes(ctx.stdin) : await readInputFile(o.body, '--body');
  } else {
    triggerId ??= newTriggerId();
    const data: Record<string, unknown> = { model: o.model, initialization_time: latestCycle() };
    if (o.type === 'forecast_hour.available') data.forecast_hour = 0;
    body = buildPayload({ type: o.type, webhookId: o.webhookId, subscriptionId: o.subscriptionId, triggerId, data });
  }
  triggerId ??= newTriggerId();
  const { secrets } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv, command: 'send' });
  const headers = signDelivery({ secret: secrets[0]!, body, triggerId, layout: o.layout, timestamp: o.timestamp });

  const { request } = await import('undici');
  const started = ctx.clock.monotonic();
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
    // The status decides; of the answer, only its start is read (a receiver may answer without end).
    text = (await readStart(res.body)).replace(/\s+/g, ' ').trim().slice(0, 300);
  } catch (err) {
    throw new UnreachableError(`Could not deliver to ${o.to}: ${networkReason(err, ctx.global.timeoutMs)}.`, { hint: 'Is your receiver running on that address?' });
  }
  const ms = Math.round(ctx.clock.monotonic() - started);
  const ok = status >= 200 && status < 300;
  // a failure is said once, on stderr, as every error is (with --json the document says it too, on stdout)
  if (!ok && !ctx.global.json) {
    throw new DeliveryFailedError(`${o.to} answered ${status} in ${ms} ms${text ? `: ${printable(text.slice(0, 200))}` : ''}.`, {
      status,
      serviceMessage: text || undefined,
      hint: `Trigger-Id ${printable(triggerId)}, signed in the ${o.layout} layout, ${body.length} bytes.`,
    });
  }
  emit(ctx, { delivered: ok, status, body: text, ms, trigger_id: triggerId, layout: o.layout, headers }, () => {
    const style = styleFor(ctx, ctx.stdout);
    return (
      `${ok ? style.green('✓') : style.red('✗')} ${o.to} answered ${status} in ${ms} ms${text ? `: ${printable(text)}` : ''}\n` +
      style.dim(`  Trigger-Id ${printable(triggerId)}, signed in the ${o.layout} layout, ${body.length} bytes`)
    );
  });
  if (!ok) throw new DeliveryFailedError(`The receiver answered ${status}${text ? `: ${text.slice(0, 120)}` : ''}.`, { status, serviceMessage: text || undefined });
}
