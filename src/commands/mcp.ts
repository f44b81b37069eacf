import { Readable, type Writable } from 'node:stream';
import type { Command } from 'commander';
import { resolveCredentials } from '../api/credentials.js';
import { line, type Act, type Context } from '../context.js';
import { InterruptedError, UsageError } from '../errors.js';
import { url } from '../util/parse.js';
import { describeRoutes, forwardsAnywhere } from '../receiver/routes.js';
import { addSensitive, redact } from '../util/redact.js';
import { valued } from '../flags/options.js';
import { baseUrlFor } from '../tasks/service.js';
import { resolveSecrets, secretStoreFor } from '../tasks/secrets.js';
import { secretSourceOptions } from '../flags/sources.js';
import * as DEFAULTS from '../delivery/defaults.js';

export function register(cmd: Command, act: Act): void {
  cmd
    .option('--listen <url>', "a running listen's inspector: its address, or the link it printed (default: the running `listen --inspect` recorded in the store folder)")
    .option('--store <url>', "or the history of the receivers' shared PostgreSQL store (read only; else WXHOOKS_STORE_URL, when no listen runs)")
    .option('--store-schema <name>', 'with --store: the schema its tables are in', DEFAULTS.schema)
    .option('--save-dir <dir>', 'or the deliveries a `listen --save-dir` wrote to this folder')
    .addOption(valued('--forward-to <url>', 'with --store or --save-dir: where replays go (your app); without it they replay nowhere', url));
  secretSourceOptions(cmd, 'sign and verify with')
    .option(
      '--allow-write',
      "offer the tools that sign a body the agent wrote with a webhook's secret (send_delivery, replay_delivery with an edited body) and those that create, change and delete webhooks and subscriptions (each with a dry_run)",
    )
    .option('--service-only', "attach to no deliveries: the service's tools, verify and send only")
    .addHelpText(
      'after',
      `
An MCP server over stdio, for a coding agent (Claude Code, Claude Desktop, VS Code, Cursor...): what
\`listen --inspect\` shows a person (every delivery, why one was refused, your app's answer, replay with an
edit, model runs), and the service's tools. Stdout is the protocol; logs go to stderr. --webhook or
--secret-env: what replays from --store or --save-dir are signed with, and what verify and send use
unless told otherwise (else the attached listen's webhook's stored secret).
It stops (exit 0) when its client closes stdin. With no listen running yet (or none answering), it starts
anyway: its delivery tools say what to start, and it finds the listen by itself once it runs. It exits at
start only for what waiting cannot mend: bad flags (2), the inspector of --listen refusing its token (3),
a store it cannot open (6). Content from outside (bodies, headers, your app's answer) reaches the agent
marked as data; what signs a body the agent wrote needs --allow-write (docs/agent.md).

Examples:
  $ wxhooks listen --webhook 7 --forward-to http://localhost:3000/hooks --inspect &
  $ claude mcp add wxhooks -- wxhooks mcp                 # finds that listen through the store folder
  $ wxhooks mcp --listen http://127.0.0.1:8789/
  $ wxhooks mcp --store "$WXHOOKS_STORE_URL" --forward-to http://localhost:3000/hooks --webhook 7
  $ wxhooks mcp --save-dir ./deliveries --allow-write`,
    )
    .action(act(runMcp, { longRunning: true }));
}

export interface McpOptions {
  listen?: string;
  store?: string;
  storeSchema: string;
  saveDir?: string;
  forwardTo?: string;
  webhook?: string;
  secretEnv?: string;
  allowWrite?: boolean;
  serviceOnly?: boolean;
}

/**
 * `wxhooks mcp`: attaches to a running listen (or a kept history), then serves the MCP protocol on stdin
 * and stdout until the client closes stdin (exit 0) or a signal stops it. The SDK is loaded only here.
 */
export async function runMcp(ctx: Context, o: McpOptions): Promise<void> {
  if (o.serviceOnly && (o.listen !== undefined || o.store !== undefined || o.saveDir !== undefined || o.forwardTo !== undefined)) {
    throw new UsageError('--service-only attaches to no deliveries: it goes with none of --listen, --store, --save-dir and --forward-to.');
  }
  if (ctx.given('storeSchema') && (o.listen !== undefined || o.saveDir !== undefined || o.serviceOnly)) throw new UsageError('--store-schema goes with --store (or WXHOOKS_STORE_URL).');
  const log = (text: string) => line(ctx.stderr, `wxhooks mcp: ${redact(text)}`);
  // what the tools run with: nothing of theirs may reach stdout (the protocol), and a secret is never read from stdin
  const tools: Context = { ...ctx, stdout: ctx.stderr, stdin: Object.assign(Readable.from([]), { isTTY: true }), global: { ...ctx.global, json: true } };
  const secrets = { webhook: o.webhook, secretEnv: o.secretEnv };
  const given = o.webhook !== undefined || o.secretEnv !== undefined;
  const resolved = async () => {
    const found = (await resolveSecrets(tools, { ...secrets, command: 'mcp' })).secrets;
    found.forEach(addSensitive);
    return found;
  };
  // what an answer could echo (a body, your app's answer) is redacted of these from the start: the secrets
  // given (a tool that needs them says so if they cannot be had), the API key, and the stored secret of the
  // webhook of each listen attached (found now, or later)
  if (given) await resolved().catch(() => undefined);
  const known = async (webhook: string | null | undefined) => {
    for (const secret of await knownSecrets(tools, webhook ?? undefined)) addSensitive(secret);
  };
  const [{ attach }, { startMcpServer }] = await Promise.all([import('../mcp/attach.js'), import('../mcp/server.js')]);
  const attachment = o.serviceOnly ? undefined : await attach(tools, { ...o, secrets: given ? resolved : undefined, onListen: (about) => known(about.listen?.webhook_id) });
  try {
    await known(attachment?.about.listen?.webhook_id);
    const about = attachment?.about;
    log(
      !about
        ? 'attached to no deliveries (--service-only)'
        : about.waiting !== undefined
          ? `attached to nothing yet: ${about.where}. ${about.waiting}`
          : about.listen
            ? `attached to listen ${about.listen.pid} (inspector ${about.where}, receiving on ${about.listen.receiver}${forwardsAnywhere(about.listen) ? `, forwarding to ${describeRoutes(about.listen).join('; ')}` : ''})`
            : `attached to ${about.kind === 'listen' ? 'the listen at' : about.kind === 'store' ? 'the history of' : 'the folder'} ${about.where}`,
    );
    const server = await startMcpServer({
      ctx: tools,
      attachment,
      secrets,
      log,
      allowWrite: Boolean(o.allowWrite),
      input: ctx.stdin,
      output: ctx.stdout as unknown as Writable,
    });
    const closed = new Promise<'closed'>((resolve) => {
      ctx.stdin.once('end', () => resolve('closed'));
      ctx.stdin.once('close', () => resolve('closed'));
    });
    const why = await Promise.race([closed, ctx.interrupted]);
    await server.close();
    if (why !== 'closed') throw new InterruptedError(why);
    log('the client closed stdin: stopped');
  } finally {
    await attachment?.close();
  }
}

/** The API key of this environment, and the stored secret of the attached listen's webhook: when there are. */
async function knownSecrets(ctx: Context, webhook: string | undefined): Promise<string[]> {
  const out: string[] = [];
  try {
    out.push(...resolveCredentials(ctx.env, ctx.global.auth ?? 'auto').secrets);
  } catch {
    // no key: the service's tools say so when they are used
  }
  if (webhook !== undefined) {
    try {
      const entry = await (await secretStoreFor(ctx)).get((await baseUrlFor(ctx)).url, webhook);
      if (entry) out.push(entry.secret);
    } catch {
      // no service address, or no store: nothing stored to take out
    }
  }
  return out;
}
