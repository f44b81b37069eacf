import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { NotFoundError, UsageError } from '../errors.js';
import { readHidden } from '../output/prompt.js';
import { emit, succeeded, table } from '../output/render.js';
import { readStdin } from '../util/input.js';
import { idArgument } from '../flags/options.js';
import { baseUrlFor } from '../tasks/service.js';
import { secretStoreFor } from '../tasks/secrets.js';

export function register(secret: Command, act: Act): void {
  secret
    .command('list')
    .description('which secrets are stored (never their values)')
    .addHelpText('after', '\nExamples:\n  $ wxhooks secret list\n  $ wxhooks secret list --json')
    .action(act(runSecretList));
  secret
    .command('show')
    .description("print a webhook's stored secret")
    .addArgument(idArgument('<webhook-id>', 'the webhook id'))
    .addHelpText('after', '\nExamples:\n  $ wxhooks secret show 7\n  $ WX_SECRET=$(wxhooks secret show 7) ./my-handler-tests')
    .action(act(runSecretShow));
  secret
    .command('set')
    .description('store a secret read from stdin (so it stays out of your shell history)')
    .addArgument(idArgument('<webhook-id>', 'the webhook id'))
    .argument('[dash]', '- (stdin, the default)')
    .addHelpText('after', '\nExamples:\n  $ wxhooks secret set 7            # paste it, then Enter\n  $ pbpaste | wxhooks secret set 7 -')
    .action(act(runSecretSet));
  secret
    .command('remove')
    .description('forget a stored secret')
    .addArgument(idArgument('<webhook-id>', 'the webhook id'))
    .addHelpText('after', '\nExamples:\n  $ wxhooks secret remove 7')
    .action(act(runSecretRemove));
}

async function where(ctx: Context) {
  return { base: (await baseUrlFor(ctx)).url, store: await secretStoreFor(ctx) };
}

export async function runSecretList(ctx: Context): Promise<void> {
  const entries = (await (await secretStoreFor(ctx)).list()).map(({ secret: _s, ...rest }) => rest);
  if (!ctx.global.json && !entries.length) {
    line(ctx.stderr, 'No secrets stored.');
    return;
  }
  emit(ctx, entries, () =>
    table(
      ['BASE URL', 'WEBHOOK', 'STORED', 'URL'],
      entries.map((e) => [e.base_url, e.webhook_id, e.created_at, e.url ?? '']),
      Boolean(ctx.stdout.isTTY),
    ),
  );
}

export async function runSecretShow(ctx: Context, id: string): Promise<void> {
  const { base, store } = await where(ctx);
  const entry = await store.get(base, id);
  if (!entry) {
    throw new NotFoundError(`No secret is stored for webhook ${id} at ${base}.`, {
      hint: '`wxhooks secret list` shows what is stored (secrets are kept per base URL).',
    });
  }
  emit(ctx, entry, () => entry.secret);
}

export async function runSecretSet(ctx: Context, id: string, dash: string | undefined): Promise<void> {
  if (dash !== undefined && dash !== '-') {
    throw new UsageError('`secret set` reads the secret from stdin, never from an argument (it would stay in your shell history).', {
      hint: `Run \`wxhooks secret set ${id}\` and paste it, or pipe it in: \`... | wxhooks secret set ${id} -\`.`,
    });
  }
  const { base, store } = await where(ctx);
  const warning = store.folderWarning();
  if (warning) line(ctx.stderr, `warning: ${warning}`);
  const terminal = ctx.stdin.isTTY && typeof (ctx.stdin as NodeJS.ReadStream).setRawMode === 'function';
  const value = (terminal ? await readHidden(ctx, `Paste the secret of webhook ${id} (it is not shown), then press Enter: `) : await readStdin(ctx.stdin)).trim();
  if (!value) throw new UsageError('No secret was given on stdin.');
  if (/\s/.test(value)) throw new UsageError('The secret contains whitespace; give exactly one secret on stdin.');
  // U+FFFD is what bytes that are not UTF-8 became: a binary file, or a terminal in another encoding
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\ufffd]/.test(value)) {
    throw new UsageError('The secret has control characters or bytes that are not UTF-8 text; nothing was stored.', {
      hint: 'A secret is text, such as the whsec_... value `webhook create` printed.',
    });
  }
  await store.save(base, id, value);
  succeeded(ctx, { stored: true, base_url: base, webhook_id: id }, `Stored the secret of webhook ${id} for ${base}`);
}

export async function runSecretRemove(ctx: Context, id: string): Promise<void> {
  const { base, store } = await where(ctx);
  if (!(await store.remove(base, id))) throw new NotFoundError(`No secret is stored for webhook ${id} at ${base}.`);
  succeeded(ctx, { removed: true, base_url: base, webhook_id: id }, `Forgot the secret of webhook ${id} for ${base}`);
}
