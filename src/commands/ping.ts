import type { Command } from 'commander';
import type { Act } from '../cli.js';
import { line, type Context } from '../context.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .argument('<webhook-id>', 'the webhook id')
    .argument('<subscription-id>', 'the subscription id')
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks listen --webhook 7 &      # watch it arrive
  $ wxhooks ping 7 12`,
    )
    .action(act(runPing));
}

export async function runPing(ctx: Context, webhookId: string, subscriptionId: string): Promise<void> {
  const { pathId } = await import('../api/ids.js');
  pathId(webhookId, 'webhook id');
  pathId(subscriptionId, 'subscription id');
  const { serviceFor } = await import('./shared.js');
  const { service } = await serviceFor(ctx);
  const { withSpinner } = await import('../output/spinner.js');
  await withSpinner(ctx, 'Asking the service for a test delivery', () => service.ping(webhookId, subscriptionId));
  if (ctx.global.json) {
    const { printJson } = await import('../output/render.js');
    printJson(ctx.stdout, { delivered: true, webhook_id: webhookId, subscription_id: subscriptionId });
    return;
  }
  const { styleFor } = await import('../output/style.js');
  line(ctx.stdout, `${styleFor(ctx, ctx.stdout).green('✓')} Test delivery accepted: the receiver of webhook ${webhookId} answered 2xx (subscription ${subscriptionId}).`);
}
