import { Option, type Command } from 'commander';
import { withoutSecret } from '../api/normalize.js';
import { createWebhookBody } from '../api/requests.js';
import { temporaryOf } from '../api/temporary.js';
import { line, type Act, type Context } from '../context.js';
import { SecretNotSavedError, UsageError } from '../errors.js';
import { confirm } from '../output/prompt.js';
import { emit, succeeded } from '../output/render.js';
import { withSpinner } from '../output/spinner.js';
import { styleFor } from '../output/style.js';
import { secretBox, subscriptionsTable, webhookDetails, webhooksTable } from '../output/webhooks.js';
import { readJsonInput } from '../util/input.js';
import { collect, integer, url } from '../util/parse.js';
import { idArgument, valued } from '../flags/options.js';
import { secretStoreFor } from '../tasks/secrets.js';
import { serviceFor } from '../tasks/service.js';
import { warnUnknownResponses, warnUnknownTypes } from '../output/warnings.js';

export function register(webhook: Command, act: Act): void {
  webhook
    .command('create')
    .description('create a webhook; its one-time secret is stored, then shown once')
    .option('--url <url>', 'where the service POSTs deliveries (absolute http/https)')
    .option('--name <name>', 'a name for the webhook')
    .option('--note <note>', 'a free-text note')
    .option('--inactive', 'create it switched off')
    .option('--subscribe <spec>', 'add a subscription: TYPE[:key=value[;key=value]...] (repeatable)', collect)
    .option('--body <file>', 'a JSON file (or - for stdin) with the whole request body; flags override its fields')
    .option('--no-save', 'do not store the secret (you must copy it from the output)')
    .addHelpText(
      'after',
      `
--subscribe keys: model, hours (H:MM,...), event_type, response (a response type), note.

Examples:
  $ wxhooks webhook create --url https://example.com/hooks \\
      --subscribe 'forecast_hour.available:model=wm-6;hours=0:00,12:00;response=gridded' \\
      --subscribe degree_days.available
  $ wxhooks webhook create --body webhook.json --name staging
  $ wxhooks webhook create --url https://example.com/hooks --json | jq -r .secret`,
    )
    .action(act(runWebhookCreate));

  webhook
    .command('list')
    .description('list webhooks as a table (tab-separated when piped)')
    .addOption(new Option('--active <bool>', 'only active (true) or inactive (false) webhooks').choices(['true', 'false']))
    .addOption(valued('--url <url>', 'only webhooks with this URL', url))
    .option('--type <type>', 'only webhooks with a subscription of this type')
    .addOption(valued('--page <n>', 'the page to show (from 1)', integer(1)))
    .addOption(valued('--page-size <n>', 'webhooks per page (1-100, default 20)', integer(1, 100)))
    .option('--all', 'follow the pages and list every webhook')
    .addHelpText(
      'after',
      `
Examples:
  $ wxhooks webhook list
  $ wxhooks webhook list --active true --type forecast_hour.available --all
  $ wxhooks webhook list --all --json | jq -r '.webhooks[].id'`,
    )
    .action(act(runWebhookList));

  webhook
    .command('get')
    .description('show a webhook and its subscriptions (never its secret)')
    .addArgument(idArgument('<id>', 'the webhook id'))
    .addHelpText('after', '\nExamples:\n  $ wxhooks webhook get 7\n  $ wxhooks webhook get 7 --json')
    .action(act(runWebhookGet));

  webhook
    .command('update')
    .description('change only the fields given')
    .addArgument(idArgument('<id>', 'the webhook id'))
    .addOption(valued('--url <url>', 'a new delivery URL', url))
    .option('--name <name>', 'a new name')
    .option('--note <note>', 'a new note')
    .option('--active', 'switch deliveries on')
    .option('--inactive', 'switch deliveries off')
    .option('--clear-name', 'remove the name')
    .option('--clear-note', 'remove the note')
    .addHelpText('after', '\nExamples:\n  $ wxhooks webhook update 7 --inactive\n  $ wxhooks webhook update 7 --url https://example.com/v2/hooks --clear-note')
    .action(act(runWebhookUpdate));

  webhook
    .command('delete')
    .description('delete a webhook and its subscriptions, and forget its stored secret')
    .addArgument(idArgument('<id>', 'the webhook id'))
    .option('-y, --yes', 'do not ask (required when not in a terminal)')
    .addHelpText('after', '\nExamples:\n  $ wxhooks webhook delete 7\n  $ wxhooks webhook delete 7 --yes   # in scripts')
    .action(act(runWebhookDelete));
}

export interface WebhookCreateOptions {
  url?: string;
  name?: string;
  note?: string;
  inactive?: boolean;
  subscribe?: string[];
  body?: string;
  save: boolean;
}

export async function runWebhookCreate(ctx: Context, opts: WebhookCreateOptions): Promise<void> {
  const base = opts.body !== undefined ? await readJsonInput(ctx.stdin, opts.body, '--body') : undefined;
  const { body, types } = createWebhookBody(base, opts);
  warnUnknownTypes(ctx, types);
  const subs = (body.subscriptions ?? {}) as Record<string, { response_options?: { type?: string } | null }>;
  warnUnknownResponses(
    ctx,
    Object.values(subs).map((c) => c?.response_options?.type),
  );
  if (!types.length) {
    line(ctx.stderr, 'warning: this webhook has no subscription, so nothing will ever be delivered to it. Add one with --subscribe TYPE (or later: wxhooks subscription add ID TYPE).');
  }
  const { service, base: baseUrl } = await serviceFor(ctx);
  const store = await secretStoreFor(ctx);
  if (opts.save) {
    const warning = await store.preflight();
    if (warning) line(ctx.stderr, `warning: ${warning}`);
  }

  const hook = await withSpinner(ctx, 'Creating the webhook', () => service.createWebhook(body));
  const secret = hook.secret;
  let storedIn: string | undefined;
  if (secret && opts.save) {
    try {
      await store.save(baseUrl.url, hook.id, secret, hook.url);
      storedIn = store.file;
      ctx.setRecoveryHint(`the secret of webhook ${hook.id} is stored: see it with \`wxhooks secret show ${hook.id}\`.`);
    } catch (err) {
      throw new SecretNotSavedError(`Webhook ${hook.id} was created, but its secret could not be stored in ${store.file}: ${(err as Error).message}`, hook.id, secret, {
        hint: `Store it once the store is fixed: \`wxhooks secret set ${hook.id}\` reads it from stdin (keep it out of your shell history).`,
        cause: err,
      });
    }
  }

  emit(ctx, { ...hook, secret: secret ?? null, secret_stored: Boolean(storedIn) }, () => {
    const style = styleFor(ctx, ctx.stdout);
    const tty = Boolean(ctx.stdout.isTTY);
    let text = `${style.green('✓')} Created webhook ${style.bold(hook.id)} → ${hook.url}${hook.active === false ? ' (inactive)' : ''}\n`;
    if (hook.subscriptions.length) text += subscriptionsTable(hook.subscriptions, tty, ctx.stdout.columns);
    if (secret && tty) text += `\n${secretBox(secret, hook.id, storedIn, style, ctx.stdout.columns)}`;
    else if (secret) text += `secret: ${secret}\n${storedIn ? `stored: ${storedIn}` : 'stored: no (--no-save)'}\n`;
    return text;
  });
  if (!secret) line(ctx.stderr, 'warning: the service did not return a signing secret for this webhook.');
  if (!opts.save && secret) line(ctx.stderr, 'warning: the secret was not stored (--no-save); it cannot be shown again.');
}

export interface WebhookListOptions {
  active?: 'true' | 'false';
  url?: string;
  type?: string;
  page?: number;
  pageSize?: number;
  all?: boolean;
}

export async function runWebhookList(ctx: Context, opts: WebhookListOptions): Promise<void> {
  if (opts.all && opts.page !== undefined) throw new UsageError('--all and --page cannot be given together.');
  const { service } = await serviceFor(ctx);
  const params = { active: opts.active === undefined ? undefined : opts.active === 'true', url: opts.url, type: opts.type, pageSize: opts.pageSize };
  const result = await withSpinner(ctx, 'Listing webhooks', async () => {
    if (opts.all) {
      const webhooks = await service.listAllWebhooks(params);
      return { webhooks, page: undefined, page_size: undefined, total: webhooks.length };
    }
    return service.listWebhooks({ ...params, page: opts.page });
  });
  // a temporary webhook of `listen --public-url` says so, and which listen holds it
  const webhooks = result.webhooks.map((h) => {
    const mark = temporaryOf(h);
    return mark ? { ...withoutSecret(h), temporary: mark } : withoutSecret(h);
  });
  if (!ctx.global.json && webhooks.length === 0) {
    line(ctx.stderr, 'No webhooks found.' + (opts.active || opts.url || opts.type ? ' (filters were applied)' : ''));
    return;
  }
  emit(ctx, opts.all ? { webhooks, total: webhooks.length } : { ...result, webhooks }, () => webhooksTable(webhooks, Boolean(ctx.stdout.isTTY), ctx.stdout.columns));
  // more pages: said on stderr, terminal or not, so that a script reading stdout is not misled (--json carries the figures)
  if (!ctx.global.json && !opts.all && result.total !== undefined && result.page_size !== undefined && result.total > (result.page ?? 1) * result.page_size) {
    const pages = Math.ceil(result.total / result.page_size);
    line(ctx.stderr, `page ${result.page} of ${pages} (${result.total} webhooks); --page N for another, --all for every one`);
  }
}

export async function runWebhookGet(ctx: Context, id: string): Promise<void> {
  const { service } = await serviceFor(ctx);
  const hook = withoutSecret(await service.getWebhook(id));
  emit(ctx, hook, () => webhookDetails(hook, styleFor(ctx, ctx.stdout), Boolean(ctx.stdout.isTTY)));
}

export interface WebhookUpdateOptions {
  url?: string;
  name?: string;
  note?: string;
  active?: boolean;
  inactive?: boolean;
  clearName?: boolean;
  clearNote?: boolean;
}

export async function runWebhookUpdate(ctx: Context, id: string, opts: WebhookUpdateOptions): Promise<void> {
  const patch: Record<string, unknown> = {};
  if (opts.active && opts.inactive) throw new UsageError('--active and --inactive cannot be given together.');
  if (opts.name !== undefined && opts.clearName) throw new UsageError('--name and --clear-name cannot be given together.');
  if (opts.note !== undefined && opts.clearNote) throw new UsageError('--note and --clear-note cannot be given together.');
  if (opts.url !== undefined) patch.url = opts.url;
  if (opts.name !== undefined) patch.name = opts.name;
  if (opts.clearName) patch.name = null;
  if (opts.note !== undefined) patch.note = opts.note;
  if (opts.clearNote) patch.note = null;
  if (opts.active) patch.active = true;
  if (opts.inactive) patch.active = false;
  if (Object.keys(patch).length === 0) {
    throw new UsageError('Nothing to update.', { hint: 'Give at least one of --url, --name, --note, --active, --inactive, --clear-name, --clear-note.' });
  }
  const { service } = await serviceFor(ctx);
  const hook = withoutSecret(await service.updateWebhook(id, patch));
  const changed = Object.entries(patch).map(([key, value]) => (key === 'active' ? (value ? 'now active' : 'now inactive') : value === null ? `${key} cleared` : key));
  succeeded(ctx, hook, `Updated webhook ${hook.id}: ${changed.join(', ')}`);
}

export async function runWebhookDelete(ctx: Context, id: string, opts: { yes?: boolean }): Promise<void> {
  const { service, base } = await serviceFor(ctx);
  if (!(await confirm(ctx, `Delete webhook ${id} and all its subscriptions?`, opts.yes, `wxhooks webhook delete ${id} --yes`))) {
    line(ctx.stderr, 'Nothing deleted.');
    return;
  }
  await service.deleteWebhook(id);
  let forgot = false;
  try {
    forgot = await (await secretStoreFor(ctx)).remove(base.url, id);
  } catch (err) {
    line(ctx.stderr, `warning: the webhook is deleted, but its stored secret could not be removed: ${(err as Error).message}`);
  }
  succeeded(ctx, { deleted: true, webhook_id: id, secret_removed: forgot }, `Deleted webhook ${id}${forgot ? ' and forgot its stored secret' : ''}`);
}
