import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { resolveSecrets } from '../tasks/secrets.js';
import type { Context } from '../context.js';
import { UsageError, WxError } from '../errors.js';
import { addSensitive } from '../util/redact.js';
import { answer, failure, type OutsideMarks } from './answers.js';
import type { Attachment } from './attachment.js';

/** What every tool is given: the context it runs in, what the server is attached to, and its log. */
export interface McpContext {
  /** The tools' context: its stdout is stderr (stdout is the protocol), and its stdin a terminal that is never read (a secret never comes from it). */
  ctx: Context;
  /** The running listen or the kept history; none with --service-only. */
  attachment: Attachment | undefined;
  /** `--webhook ID` or `--secret-env VAR`: what replays, verify and send sign or verify with unless a tool is told otherwise. */
  secrets: { webhook?: string; secretEnv?: string };
  /** A line on stderr, redacted. */
  log(text: string): void;
  /** Offer the tools that sign a body the agent wrote (send_delivery, an edited replay) and those that change webhooks. */
  allowWrite: boolean;
  /** The session's marks around content from outside (answers.ts). */
  outside: OutsideMarks;
}

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * Registers a tool whose arguments are a strict object (an argument it does not know is refused, named,
 * rather than ignored), whose answer goes through `answer` (JSON, redacted) and whose errors through
 * `failure` (their meaning kept), and logged. `outside`: its answers hold content from outside, which
 * they give between the session's marks (its failures too, and any failure that quotes the service).
 */
export function defineTool<S extends z.ZodObject>(
  server: McpServer,
  m: McpContext,
  name: string,
  config: { title: string; description: string; inputSchema: S; annotations: ToolAnnotations; outside?: boolean },
  run: (args: z.output<S>, extra: Extra) => Promise<Record<string, unknown>>,
): void {
  const { outside, ...declared } = config;
  const marks = outside ? m.outside : undefined;
  server.registerTool(name, declared, (async (args: z.output<S>, extra: Extra) => {
    try {
      return answer(await run(args, extra), marks);
    } catch (err) {
      m.log(`${name}: ${err instanceof Error ? err.message : String(err)}`);
      return failure(err, marks ?? (err instanceof WxError && err.serviceMessage !== undefined ? m.outside : undefined));
    }
  }) as never);
}

/** The running listen or kept history, or a usage error when the server runs with --service-only. */
export function attached(m: McpContext): Attachment {
  if (!m.attachment) {
    throw new UsageError('This server is attached to no deliveries (it runs with --service-only).', {
      hint: 'Start it without --service-only, beside a running `wxhooks listen --inspect`, or with --store or --save-dir.',
    });
  }
  return m.attachment;
}

/**
 * The secret(s) a tool verifies or signs with: the stored secret of `secret_webhook_id`, or the variable
 * `secret_env` of this server's environment; else the server's own --webhook or --secret-env; else the
 * stored secret of the webhook the attached listen receives. Never stdin (it is the protocol).
 */
export async function secretsFor(m: McpContext, args: { secret_webhook_id?: string; secret_env?: string }, command: string): Promise<string[]> {
  if (args.secret_webhook_id !== undefined && args.secret_env !== undefined) throw new UsageError('Give secret_webhook_id or secret_env, not both.');
  let source: { webhook?: string; secretEnv?: string };
  if (args.secret_webhook_id !== undefined || args.secret_env !== undefined) source = { webhook: args.secret_webhook_id, secretEnv: args.secret_env };
  else if (m.secrets.webhook !== undefined || m.secrets.secretEnv !== undefined) source = m.secrets;
  else source = { webhook: m.attachment?.about.listen?.webhook_id ?? undefined };
  if (source.webhook === undefined && source.secretEnv === undefined) {
    throw new UsageError("A secret is needed: give secret_webhook_id (a webhook whose secret is stored) or secret_env (a variable of this server's environment that holds it).", {
      hint: 'Or start the server with --webhook ID or --secret-env VAR.',
    });
  }
  const { secrets } = await resolveSecrets(m.ctx, { ...source, command });
  secrets.forEach(addSensitive);
  return secrets;
}
