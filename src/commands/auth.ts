import type { Command } from 'commander';
import { line, type Act, type Context } from '../context.js';
import { AuthError } from '../errors.js';
import { printable } from '../util/printable.js';
import { printJson } from '../output/render.js';
import { withSpinner } from '../output/spinner.js';
import { styleFor } from '../output/style.js';
import { describeScheme, serviceFor } from '../tasks/service.js';

export function register(auth: Command, act: Act): void {
  auth
    .command('status')
    .description('check WX_API_KEY against the service (GET /debug/v1/auth_status); exit 0 only when it is accepted')
    .addHelpText(
      'after',
      `
Examples:
  $ export WX_API_KEY=wb_...          # the key is only ever read from the environment (or WB_API_KEY)
  $ wxhooks auth status
  $ WB_CLIENT_ID=acme WB_API_KEY=... wxhooks auth status   # a legacy key: Basic with a signed token
  $ wxhooks auth status --json | jq .client_id`,
    )
    .action(act(runAuthStatus));
}

export async function runAuthStatus(ctx: Context): Promise<void> {
  const { service, base, credentials } = await serviceFor(ctx);
  const status = await withSpinner(ctx, `Checking credentials with ${base.url}`, () => service.authStatus());
  const given = status.client_id === undefined ? undefined : String(status.client_id);
  // with --json the service's object is printed whatever it says, so a script can read why
  if (ctx.global.json) {
    printJson(ctx.stdout, {
      ...status,
      credentials: { scheme: credentials.scheme, key_from: credentials.keyFrom, client_id: credentials.clientId ?? null, client_id_from: credentials.clientIdFrom ?? null },
    });
  }
  if (!status.authed) {
    throw new AuthError(`The service at ${base.url} does not accept these credentials (authed: false).`, {
      hint: `Check ${credentials.keyFrom}${credentials.clientIdFrom && credentials.clientIdFrom !== 'the wb_ key' ? ` and ${credentials.clientIdFrom}` : ''}; a key belongs to one service, so check --base-url too.`,
    });
  }
  if (ctx.global.json) return;
  const style = styleFor(ctx, ctx.stdout);
  const source = { flag: '--base-url', env: 'WX_BASE_URL', setting: 'the base-url setting' }[base.source];
  line(ctx.stdout, `${style.green('✓')} Authenticated with ${style.bold(base.url)}`);
  const ours = credentials.clientId === undefined ? '' : ` (${credentials.clientIdFrom === 'the wb_ key' ? 'in the key' : `from ${credentials.clientIdFrom}`}: ${printable(credentials.clientId)})`;
  line(ctx.stdout, `  Client ID:  ${given === undefined ? '(not given)' : printable(given)}${ours}`);
  line(ctx.stdout, `  Scheme:     ${describeScheme(credentials)}`);
  line(ctx.stdout, `  Base URL:   ${base.url} (from ${source})`);
  if (given !== undefined && credentials.clientId !== undefined && given !== credentials.clientId) {
    line(ctx.stderr, `warning: the service says client ${printable(given)}, but ${credentials.clientIdFrom} says ${printable(credentials.clientId)}.`);
  }
}
