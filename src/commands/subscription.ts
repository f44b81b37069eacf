import type { Command } from 'commander';
import { addSubscriptionBody, updateSubscriptionBody, type SubscriptionFlags } from '../api/requests.js';
import { line, type Act, type Context } from '../context.js';
import { confirm } from '../output/prompt.js';
import { emit, succeeded } from '../output/render.js';
import { subscriptionsTable } from '../output/webhooks.js';
import { collect } from '../util/parse.js';
import { idArgument } from '../flags/options.js';
import { serviceFor } from '../tasks/service.js';
import { warnUnknownResponses, warnUnknownTypes } from '../output/warnings.js';

function filterFlags(cmd: Command): Command {
  return cmd
    .option('--model <model>', 'only this model, such as wm-6 (repeatable)', collect)
    .option('--hours <H:MM,...>', 'only runs initialised at these hours of day, such as 0:00,12:00 (repeatable)', collect)
    .option('--event-type <type>', 'events.available only: atmospheric_river, heatwave, coldwave, front (repeatable)', collect)
    .option('--response <type>', 'include an API response of this type: gridded, interpolated_point_forecast, event_context, ...')
    .option('--response-option <k=v>', 'an option of the response, such as coordinates=37.77,-122.42 (repeatable)', collect)
    .option('--note <note>', 'a free-text note');
}

const webhookId = () => idArgument('<webhook-id>', 'the webhook id');
const subscriptionId = () => idArgument('<subscription-id>', 'the subscription id');

export function register(sub: Command, act: Act): void {
  filterFlags(
    sub
      .command('add')
      .description('add one subscription to a webhook (at most one of each type)')
      .addArgument(webhookId())
      .argument('<type>', 'forecast_hour.available, initialization_time.available, degree_days.available, tropical_cyclones.available, events.available'),
  )
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks subscription add 7 forecast_hour.available --model wm-6 --hours 0:00,12:00 --response gridded
  $ wxhooks subscription add 7 events.available --event-type heatwave --event-type coldwave \\
      --response event_context --response-option 'coordinates=35,-129;40.7,-74.0'`,
    )
    .action(act(runSubscriptionAdd));

  filterFlags(sub.command('update').description('change a subscription: what is omitted is kept').addArgument(webhookId()).addArgument(subscriptionId()))
    .option('--clear-filters', 'remove every filter (sends filters: {})')
    .option('--no-response', 'stop including an API response (sends response_options: null)')
    .option('--clear-note', 'remove the note (sends note: null)')
    .addHelpText(
      'after',
      `
Filter flags replace the whole filter set; --response replaces the response options.

Examples:
  $ wxhooks subscription update 7 12 --hours 0:00,6:00,12:00,18:00
  $ wxhooks subscription update 7 12 --clear-filters --no-response`,
    )
    .action(act(runSubscriptionUpdate));

  sub
    .command('remove')
    .description('remove one subscription')
    .addArgument(webhookId())
    .addArgument(subscriptionId())
    .option('-y, --yes', 'do not ask (required when not in a terminal)')
    .addHelpText('after', '\nExamples:\n  $ wxhooks subscription remove 7 12 --yes')
    .action(act(runSubscriptionRemove));

  sub
    .command('list')
    .description("a webhook's subscriptions as a table")
    .addArgument(webhookId())
    .addHelpText('after', "\nExamples:\n  $ wxhooks subscription list 7\n  $ wxhooks subscription list 7 --json | jq -r '.[].id'")
    .action(act(runSubscriptionList));
}

export async function runSubscriptionAdd(ctx: Context, webhookId: string, type: string, flags: SubscriptionFlags): Promise<void> {
  const body = addSubscriptionBody(type, flags);
  warnUnknownTypes(ctx, [type]);
  warnUnknownResponses(ctx, [typeof flags.response === 'string' ? flags.response : undefined]);
  const { service } = await serviceFor(ctx);
  const hook = await service.addSubscription(webhookId, body);
  const added = hook.subscriptions.find((s) => s.type === type);
  succeeded(ctx, added ?? hook, `Added ${type} to webhook ${hook.id || webhookId}${added?.id ? ` (subscription ${added.id})` : ''}`);
}

export async function runSubscriptionUpdate(ctx: Context, webhookId: string, subscriptionId: string, flags: SubscriptionFlags): Promise<void> {
  const body = updateSubscriptionBody(flags);
  warnUnknownResponses(ctx, [typeof flags.response === 'string' ? flags.response : undefined]);
  const { service } = await serviceFor(ctx);
  const hook = await service.updateSubscription(webhookId, subscriptionId, body);
  const updated = hook.subscriptions.find((s) => s.id === subscriptionId);
  succeeded(ctx, updated ?? hook, `Updated subscription ${subscriptionId} of webhook ${webhookId}: ${Object.keys(body).join(', ')}`);
}

export async function runSubscriptionRemove(ctx: Context, webhookId: string, subscriptionId: string, opts: { yes?: boolean }): Promise<void> {
  const { service } = await serviceFor(ctx);
  const question = `Remove subscription ${subscriptionId} from webhook ${webhookId}?`;
  if (!(await confirm(ctx, question, opts.yes, `wxhooks subscription remove ${webhookId} ${subscriptionId} --yes`))) {
    line(ctx.stderr, 'Nothing removed.');
    return;
  }
  await service.removeSubscription(webhookId, subscriptionId);
  succeeded(ctx, { removed: true, webhook_id: webhookId, subscription_id: subscriptionId }, `Removed subscription ${subscriptionId} from webhook ${webhookId}`);
}

export async function runSubscriptionList(ctx: Context, webhookId: string): Promise<void> {
  const { service } = await serviceFor(ctx);
  const hook = await service.getWebhook(webhookId);
  if (!ctx.global.json && hook.subscriptions.length === 0) {
    line(ctx.stderr, `Webhook ${webhookId} has no subscriptions; add one with \`wxhooks subscription add ${webhookId} TYPE\`.`);
    return;
  }
  emit(ctx, hook.subscriptions, () => subscriptionsTable(hook.subscriptions, Boolean(ctx.stdout.isTTY), ctx.stdout.columns));
}
