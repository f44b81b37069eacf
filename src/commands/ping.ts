import type { Command } from 'commander';
import type { Act, Context } from '../context.js';
import { succeeded } from '../output/render.js';
import { withSpinner } from '../output/spinner.js';
import { idArgument } from './options.js';
import { serviceFor } from './shared.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .addArgument(idArgument('<webhook-id>', 'the webhook id'))
    .addArgument(idArgument('<subscription-id>', 'the subscription id'))
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
  const { service } = await serviceFor(ctx);
  await withSpinner(ctx, 'Asking the service for a test delivery', () => service.ping(webhookId, subscriptionId));
  succeeded(
    ctx,
    { delivered: true, webhook_id: webhookId, subscription_id: subscriptionId },
    `Test delivery accepted: the receiver of webhook ${webhookId} answered 2xx (subscription ${subscriptionId}).`,
  );
}
