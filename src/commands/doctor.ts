import type { Command } from 'commander';
import type { Webhook } from '../api/normalize.js';
import { temporaryOf } from '../api/temporary.js';
import { line, type Act, type Context } from '../context.js';
import { DeliveryFailedError } from '../errors.js';
import { valued } from '../flags/options.js';
import { emit } from '../output/render.js';
import { styleFor } from '../output/style.js';
import { diagnose, type Check } from '../tasks/doctor.js';
import { identifier, port, url } from '../util/parse.js';
import { printable } from '../util/printable.js';
import * as DEFAULTS from '../delivery/defaults.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .addOption(valued('--webhook <id>', 'the webhook to check, link by link', identifier))
    .addOption(valued('--public-url <url>', 'the public URL (a tunnel) that should lead to this machine', url))
    .addOption(valued('--relay <url>', 'your relay (`wxhooks relay`): check it answers, takes WXHOOKS_RELAY_TOKEN, and with --webhook knows its channel (default: WXHOOKS_RELAY_URL)', url))
    .addOption(valued('--port <port>', `the local port the URL leads to (default: the URL's own port when it is local, else ${DEFAULTS.listenPort})`, port))
    .addHelpText(
      'after',
      `
Checks the chain from the service to this machine, and says for each broken link what to do:
credentials; the webhook exists, is active and has subscriptions; its URL can be reached from the
service (https, not a local or private address); its secret is stored; and, with a receiver started
on the port the URL leads to, a ping of each subscription arrives and verifies.
Exit 0 when every link works, 7 when one does not.

Examples:
  $ wxhooks doctor
  $ wxhooks doctor --webhook 7
  $ wxhooks doctor --webhook 7 --relay https://relay.example.com
  $ wxhooks doctor --webhook 7 --public-url https://abc.ngrok.app --port 8787`,
    )
    .action(act(runDoctor));
}

export interface DoctorOptions {
  webhook?: string;
  publicUrl?: string;
  port?: number;
  relay?: string;
}

export async function runDoctor(ctx: Context, o: DoctorOptions): Promise<void> {
  const { checks, webhooks } = await diagnose(ctx, o);
  report(ctx, checks, webhooks, o);
}

function report(ctx: Context, checks: Check[], webhooks: Webhook[] | undefined, o: DoctorOptions): void {
  const ok = checks.every((c) => c.ok);
  const listing = webhooks?.map((h) => ({ id: h.id, url: h.url, active: h.active ?? null, subscriptions: h.subscriptions.map((s) => s.type), temporary: Boolean(temporaryOf(h)) }));
  emit(ctx, { ok, checks, ...(listing ? { webhooks: listing } : {}) }, () => {
    const style = styleFor(ctx, ctx.stdout);
    const lines = checks.map((c) => {
      const mark = c.ok ? style.green('✓') : style.red('✗');
      let text = `${mark} ${c.name}: ${c.detail}`;
      if (c.note) text += `\n    ${style.dim(`note: ${c.note}`)}`;
      if (!c.ok && c.hint) text += `\n    ${style.dim(`→ ${printable(c.hint)}`)}`;
      return text;
    });
    if (webhooks) {
      lines.push(
        webhooks.length
          ? `Webhooks: ${webhooks.map((h) => `${h.id} (${printable(h.url)}${temporaryOf(h) ? ', temporary' : ''})`).join(', ')}`
          : 'No webhooks yet: create one with `wxhooks webhook create` or `wxhooks listen --public-url URL`.',
      );
      if (webhooks.length) lines.push(style.dim(`Check one, link by link: wxhooks doctor --webhook ${webhooks[0]!.id}${o.publicUrl ? ` --public-url ${o.publicUrl}` : ''}`));
    }
    return lines.join('\n');
  });
  const failed = checks.filter((c) => !c.ok);
  if (failed.length) {
    if (!ctx.global.json) line(ctx.stderr, '');
    throw new DeliveryFailedError(`${failed.length} of ${checks.length} checks failed: ${failed.map((c) => c.name).join(', ')}.`, { hint: 'Each ✗ above says what to do.' });
  }
}
