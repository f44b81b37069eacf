import { Option, type Command } from 'commander';
import type { Act } from '../cli.js';
import { line, type Context } from '../context.js';
import { UsageError, VerifyFailedError } from '../errors.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .argument('[saved]', 'a delivery saved by `listen --save-dir`')
    .option('--headers <file>', 'the headers: a JSON object, or "Name: value" lines (curl -D)')
    .option('--body <file>', 'the raw body, byte for byte')
    .option('--webhook <id>', "the webhook whose stored secret to use")
    .option('--secret-env <var>', 'the environment variable holding the secret')
    .addOption(new Option('--scheme <name>', 'signature layout').choices(['auto', 'standard', 'stripe', 'hex-timestamp', 'hex-body']).default('auto'))
    .option('--tolerance <seconds>', 'how far the timestamp may be off the time of the check', '300')
    .option('--at <time>', 'check as of this time (ISO 8601 or Unix seconds); a saved delivery defaults to when it was received')
    .addHelpText(
      'after',
      `
Exit 0 when it verifies, 9 when it does not (the reason is printed).

Examples:
  $ wxhooks verify deliveries/2026-11-21T06-04-00-000Z-trg_abc-12.json --webhook 7
  $ wxhooks verify --headers headers.txt --body body.json --secret-env WX_WEBHOOK_SECRET --at 2026-11-21T06:04:00Z`,
    )
    .action(act(runVerify));
}

export interface VerifyCommandOptions {
  headers?: string;
  body?: string;
  webhook?: string;
  secretEnv?: string;
  scheme: 'auto' | 'standard' | 'stripe' | 'hex-timestamp' | 'hex-body';
  tolerance: string;
  at?: string;
}

export function parseAt(text: string): number {
  if (/^\d{10}$/.test(text)) return Number(text) * 1000;
  const t = Date.parse(text);
  if (Number.isNaN(t)) throw new UsageError(`--at must be an ISO 8601 time or Unix seconds, not "${text}".`);
  return t;
}

export async function runVerify(ctx: Context, saved: string | undefined, o: VerifyCommandOptions): Promise<void> {
  if (!/^\d+$/.test(o.tolerance)) throw new UsageError(`--tolerance must be a whole number of seconds, not "${o.tolerance}".`);
  const { readCaptured } = await import('../receiver/saved.js');
  const captured = await readCaptured(saved, o.headers, o.body);
  const now = o.at !== undefined ? parseAt(o.at) : (captured.receivedAt ?? Date.now());
  const { resolveSecrets } = await import('./shared.js');
  const { secrets } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv });
  const { verifyDelivery } = await import('../signing/verify.js');
  const result = verifyDelivery({ secret: secrets, headers: captured.headers, body: captured.body, scheme: o.scheme, tolerance: Number(o.tolerance), now });
  if (ctx.global.json) {
    const { printJson } = await import('../output/render.js');
    printJson(
      ctx.stdout,
      result.ok
        ? { ok: true, layout: result.layout, trigger_id: result.triggerId, timestamp: result.timestamp, checked_at: new Date(now).toISOString(), warning: result.warning ?? null, payload: result.payload }
        : { ok: false, reason: result.reason, message: result.message, hint: result.hint ?? null, checked_at: new Date(now).toISOString() },
    );
  }
  if (!result.ok) {
    throw new VerifyFailedError(`Not verified: ${result.message}`, { hint: result.hint });
  }
  if (ctx.global.json) return;
  const { styleFor } = await import('../output/style.js');
  const c = styleFor(ctx, ctx.stdout);
  const p = result.payload;
  const age = Math.round(now / 1000) - result.timestamp;
  line(ctx.stdout, `${c.green('✓')} Verified: layout ${c.bold(result.layout)}, Trigger-Id ${result.triggerId}, signed ${new Date(result.timestamp * 1000).toISOString()} (${age} s before the check)`);
  line(ctx.stdout, `  ${[p.type, p.webhook_id !== undefined && `webhook ${String(p.webhook_id)}`, p.subscription_id !== undefined && `subscription ${String(p.subscription_id)}`].filter(Boolean).join('  ')}`);
  if (o.scheme === 'auto') line(ctx.stdout, c.dim(`  pin it with --scheme ${result.layout}`));
  if (result.warning) line(ctx.stderr, `warning: ${result.warning}`);
}
