import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { AuthError } from '../errors.js';
import { printable } from '../output/printable.js';
import { printJson } from '../output/render.js';
import { withSpinner } from '../output/spinner.js';
import { styleFor } from '../output/style.js';
import { serviceFor } from './shared.js';

export function register(auth: Command, act: Act): void {
  auth
    .command('status')
    .description('check WX_API_KEY against the service (GET /debug/v1/auth_status); exit 0 only when it is accepted')
    .addHelpText(
      'after',
      `
Examples:
  $ export WX_API_KEY=...            # the key is only ever read from the environment
  $ wxhooks auth status
  $ wxhooks auth status --auth basic  # legacy Basic: WX_CLIENT_ID + key, or a combined wb_ key
  $ wxhooks auth status --json | jq .client_id`,
    )
    .action(act(runAuthStatus));
}

export async function runAuthStatus(ctx: Context): Promise<void> {
  const { service, base, scheme } = await serviceFor(ctx);
  const status = await withSpinner(ctx, `Checking credentials with ${base.url}`, () => service.authStatus());
  // with --json the service's object is printed whatever it says, so a script can read why
  if (ctx.global.json) printJson(ctx.stdout, status);
  if (!status.authed) {
    throw new AuthError(`The service at ${base.url} does not accept these credentials (authed: false).`, {
      hint: 'Check WX_API_KEY (and WX_CLIENT_ID with --auth basic); a key belongs to one service, so check --base-url too.',
    });
  }
  if (ctx.global.json) return;
  const style = styleFor(ctx, ctx.stdout);
  const source = { flag: '--base-url', env: 'WX_BASE_URL', setting: 'the base-url setting' }[base.source];
  line(ctx.stdout, `${style.green('✓')} Authenticated with ${style.bold(base.url)}`);
  line(ctx.stdout, `  Client ID:  ${status.client_id === undefined ? '(not given)' : printable(String(status.client_id))}`);
  line(ctx.stdout, `  Scheme:     ${scheme === 'bearer' ? 'Bearer (WX_API_KEY)' : 'Basic (legacy: client id and WX_API_KEY)'}`);
  line(ctx.stdout, `  Base URL:   ${base.url} (from ${source})`);
}
