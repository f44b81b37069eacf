import type { Command } from 'commander';
import type { Act, Context } from '../context.js';
import { DeliveryFailedError } from '../errors.js';
import { emit, succeeded } from '../output/render.js';
import { withSpinner } from '../output/spinner.js';
import { styleFor } from '../output/style.js';
import { printable } from '../util/printable.js';
import { idArgument } from '../flags/options.js';
import { serviceFor } from '../tasks/service.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .addArgument(idArgument('<webhook-id>', 'the webhook id'))
    .addArgument(idArgument('[subscription-id]', 'the subscription id'))
    .addHelpText(
      'after',
      `
Without a subscription id, each subscription of the webhook is pinged, one after another.

Examples:
  $ wxhooks listen --webhook 7 &      # watch it arrive
  $ wxhooks ping 7                    # a test delivery of each of its subscriptions
  $ wxhooks ping 7 12                 # of subscription 12 only`,
    )
    .action(act(runPing));
}

/** What one ping came to. */
interface PingResult {
  subscription_id: string;
  type: string;
  delivered: boolean;
  error?: string;
}

export async function runPing(ctx: Context, webhookId: string, subscriptionId?: string): Promise<void> {
  const { service } = await serviceFor(ctx);
  if (subscriptionId !== undefined) {
    await withSpinner(ctx, 'Asking the service for a test delivery', () => service.ping(webhookId, subscriptionId));
    succeeded(
      ctx,
      { delivered: true, webhook_id: webhookId, subscription_id: subscriptionId },
      `Test delivery accepted: the receiver of webhook ${webhookId} answered 2xx (subscription ${subscriptionId}).`,
    );
    return;
  }
  // the webhook alone: a ping of each of its subscriptions (their ids are rarely at hand)
  const hook = await service.getWebhook(webhookId);
  if (!hook.subscriptions.length) {
    throw new DeliveryFailedError(`Webhook ${webhookId} has no subscription: there is nothing to ping.`, { hint: `Add one: wxhooks subscription add ${webhookId} forecast_hour.available` });
  }
  const results: PingResult[] = [];
  for (const sub of hook.subscriptions) {
    try {
      await withSpinner(ctx, `Asking the service for a test delivery (${sub.type})`, () => service.ping(webhookId, sub.id));
      results.push({ subscription_id: sub.id, type: sub.type, delivered: true });
    } catch (err) {
      // a refused key, or a webhook gone, is the same for every subscription: said once, as itself
      if (!(err instanceof DeliveryFailedError)) throw err;
      results.push({ subscription_id: sub.id, type: sub.type, delivered: false, error: err.message });
    }
  }
  emit(ctx, { webhook_id: webhookId, pings: results }, () => {
    const style = styleFor(ctx, ctx.stdout);
    return results
      .map((r) =>
        r.delivered
          ? `${style.green('✓')} ${r.type} (subscription ${r.subscription_id}): the receiver answered 2xx`
          : `${style.red('✗')} ${r.type} (subscription ${r.subscription_id}): ${printable(r.error ?? '')}`,
      )
      .join('\n');
  });
  const failed = results.filter((r) => !r.delivered);
  if (failed.length) {
    throw new DeliveryFailedError(`${failed.length} of ${results.length} test deliveries of webhook ${webhookId} failed.`, {
      hint: `Is the receiver running where the webhook points (\`wxhooks webhook get ${webhookId}\`)? \`wxhooks doctor --webhook ${webhookId}\` checks each link.`,
    });
  }
}
