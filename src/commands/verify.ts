import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { NotVerifiedError } from '../errors.js';
import { printable } from '../util/printable.js';
import { emit, printJson } from '../output/render.js';
import { styleFor } from '../output/style.js';
import { readCaptured } from '../receiver/saved.js';
import type { Scheme } from '../signing/layouts.js';
import { verifyDelivery } from '../signing/verify.js';
import { time } from '../util/parse.js';
import { schemeOption, toleranceOption, valued } from '../flags/options.js';
import { resolveSecrets } from '../tasks/secrets.js';
import { secretSourceOptions } from '../flags/sources.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .argument('[saved]', 'a delivery saved by `listen --save-dir`')
    .option('--headers <file>', 'the headers: a JSON object, or "Name: value" lines (curl -D)')
    .option('--body <file>', 'the raw body, byte for byte');
  secretSourceOptions(cmd, 'verify with')
    .addOption(schemeOption('signature layout'))
    .addOption(toleranceOption('how far the timestamp may be off the time of the check'))
    .addOption(valued('--at <time>', 'check as of this time (ISO 8601 or Unix seconds); a saved delivery defaults to when it was received', time))
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
  scheme: Scheme;
  tolerance: number;
  at?: number;
}

export async function runVerify(ctx: Context, saved: string | undefined, o: VerifyCommandOptions): Promise<void> {
  const captured = await readCaptured(saved, o.headers, o.body);
  const now = o.at ?? captured.receivedAt ?? Date.now();
  const { secrets } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv, command: 'verify' });
  const result = verifyDelivery({ secret: secrets, headers: captured.headers, body: captured.body, scheme: o.scheme, tolerance: o.tolerance, now });
  const checkedAt = new Date(now).toISOString();
  if (!result.ok) {
    if (ctx.global.json) printJson(ctx.stdout, { ok: false, reason: result.reason, message: result.message, hint: result.hint ?? null, checked_at: checkedAt });
    throw new NotVerifiedError(`Not verified: ${result.message}`, { hint: result.hint });
  }
  const p = result.payload;
  emit(ctx, { ok: true, layout: result.layout, trigger_id: result.triggerId, timestamp: result.timestamp, checked_at: checkedAt, warning: result.warning ?? null, payload: p }, () => {
    const style = styleFor(ctx, ctx.stdout);
    const age = Math.round(now / 1000) - result.timestamp;
    const what = [p.type, p.webhook_id !== undefined && `webhook ${String(p.webhook_id)}`, p.subscription_id !== undefined && `subscription ${String(p.subscription_id)}`].filter(Boolean).join('  ');
    let text = `${style.green('✓')} Verified: layout ${style.bold(result.layout)}, Trigger-Id ${printable(result.triggerId)}, signed ${new Date(result.timestamp * 1000).toISOString()} (${age} s before the check)\n`;
    text += `  ${printable(what)}\n`;
    if (o.scheme === 'auto') text += style.dim(`  pin it with --scheme ${result.layout}`);
    return text;
  });
  if (result.warning) line(ctx.stderr, `warning: ${result.warning}`);
}
