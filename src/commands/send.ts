import { Option, type Command } from 'commander';
import type { Act, Context } from '../context.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { DeliveryFailedError, NotVerifiedError, UsageError } from '../errors.js';
import { valued } from '../flags/options.js';
import { secretSourceOptions } from '../flags/sources.js';
import { emit, truncateWords } from '../output/render.js';
import { styleFor } from '../output/style.js';
import { provenLayout, readCaptured, readSaveKey, unprovenError, type SavedDelivery } from '../receiver/saved.js';
import { LAYOUT_NAMES, type LayoutName } from '../signing/layouts.js';
import { newTriggerId } from '../signing/sign.js';
import { configDir } from '../store/paths.js';
import { resolveSecrets } from '../tasks/secrets.js';
import { generatedBody, postSigned } from '../tasks/send.js';
import { readInputFile } from '../util/files.js';
import { readStdinBytes } from '../util/input.js';
import { unixSeconds, url } from '../util/parse.js';
import { printable } from '../util/printable.js';

export function register(cmd: Command, act: Act): void {
  cmd.argument('[saved]', 'a delivery saved by `listen --save-dir`, re-signed now (same body and Trigger-Id)').addOption(valued('--to <url>', 'the receiver', url).makeOptionMandatory());
  secretSourceOptions(cmd, 'sign with')
    .option('--type <type>', 'the event type, for a generated body', DEFAULTS.sendType)
    .option('--body <file>', 'send this file (- for stdin) as the body, byte for byte, instead of a generated one')
    .addOption(new Option('--layout <name>', 'how to sign').choices(LAYOUT_NAMES).default(DEFAULTS.sendLayout))
    .option('--trigger-id <id>', 'the Trigger-Id (default: a new one; a saved delivery keeps its own)')
    .option('--webhook-id <id>', 'webhook_id in a generated body', DEFAULTS.sendWebhookId)
    .option('--subscription-id <id>', 'subscription_id in a generated body', DEFAULTS.sendSubscriptionId)
    .option('--model <model>', 'data.model in a generated body', DEFAULTS.model)
    .addOption(valued('--timestamp <seconds>', 'sign with this Unix time instead of now (to test your stale-timestamp check)', unixSeconds))
    .addHelpText(
      'after',
      `
Exit 0 when the receiver answers 2xx, 7 when it answers anything else, 6 when it cannot be reached. A saved
delivery is signed again only if it shows it verified (exit 9 otherwise): the mark of the listen that saved
it with this store folder, or its own signature, checked with the secret given.

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
  let fromFile: SavedDelivery | undefined;
  if (saved !== undefined) {
    if (o.body !== undefined) throw new UsageError('Give a saved delivery or --body, not both.');
    const captured = await readCaptured(saved);
    fromFile = captured.saved;
    body = captured.body;
    triggerId ??= captured.headers['trigger-id']; // both sources keep header names in lower case
  } else if (o.body !== undefined) {
    body = o.body === '-' ? await readStdinBytes(ctx.stdin) : await readInputFile(o.body, '--body');
  } else {
    triggerId ??= newTriggerId();
    body = generatedBody({ ...o, triggerId });
  }
  triggerId ??= newTriggerId();
  const { secrets } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv, command: 'send' });
  // a saved delivery is signed again only if it shows it verified (a body of your own goes with --body)
  if (fromFile && provenLayout(fromFile, await readSaveKey(configDir(ctx.env)), secrets) === undefined) {
    const { message, hint } = unprovenError(saved!, true);
    throw new NotVerifiedError(message, { hint: `${hint} To sign a body of your own, give it with --body FILE.` });
  }
  const { ok, status, text, ms, headers } = await postSigned({
    to: o.to,
    body,
    triggerId,
    secret: secrets[0]!,
    layout: o.layout,
    timestamp: o.timestamp,
    timeoutMs: ctx.global.timeoutMs,
    clock: ctx.clock,
  });
  // a failure is said once, on stderr, as every error is (with --json the document says it too, on stdout)
  if (!ok && !ctx.global.json) {
    throw new DeliveryFailedError(`${o.to} answered ${status} in ${ms} ms${text ? `: ${printable(sentence(text, 240))}` : '.'}`, {
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
  if (!ok) throw new DeliveryFailedError(`The receiver answered ${status}${text ? `: ${sentence(text, 160)}` : '.'}`, { status, serviceMessage: text || undefined });
}

/** The receiver's answer as the end of a sentence: its start within `max`, never cut inside a word, and a full stop unless it was cut. */
const sentence = (text: string, max: number) => {
  const shown = truncateWords(text, max);
  return shown.endsWith('…') || /[.!?]$/.test(shown) ? shown : `${shown}.`;
};
