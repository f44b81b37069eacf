import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { withoutSecret, type Webhook } from '../api/normalize.js';
import { temporaryOf } from '../api/temporary.js';
import { identifier, port, url } from '../util/parse.js';
import { diagnose } from '../tasks/doctor.js';
import { secretStoreFor } from '../tasks/secrets.js';
import { describeScheme, serviceFor } from '../tasks/service.js';
import { PAGE } from './answers.js';
import { defineTool, type McpContext } from './tool.js';
import * as DEFAULTS from '../delivery/defaults.js';

/** A webhook as an answer shows it: never its secret; a temporary one of `listen --public-url` says so. */
export function shownWebhook(hook: Webhook): Record<string, unknown> {
  const mark = temporaryOf(hook);
  return { ...withoutSecret(hook), ...(mark ? { temporary: mark } : {}) };
}

const webhookId = z.string().min(1).describe('the webhook id');
const subscriptionId = z.string().min(1).describe('the subscription id');

/** The service's tools: read only, and safe to run (a ping is a test delivery the service signs). Those that write are in writes.ts. */
export function registerServiceTools(server: McpServer, m: McpContext): void {
  defineTool(
    server,
    m,
    'auth_status',
    {
      title: 'Check the credentials',
      description:
        "Asks the service whether the API key in this server's environment (WX_API_KEY) is accepted, as `wxhooks auth status` does: the client id, the scheme used, and the service's address.",
      inputSchema: z.strictObject({}),
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    async () => {
      const { service, base, credentials } = await serviceFor(m.ctx);
      const status = await service.authStatus();
      return {
        authed: status.authed,
        client_id: status.client_id ?? null,
        base_url: base.url,
        base_url_from: { flag: '--base-url', env: 'WX_BASE_URL', setting: 'the base-url setting' }[base.source],
        scheme: describeScheme(credentials),
        ...(status.authed ? {} : { hint: `Check ${credentials.keyFrom}; a key belongs to one service, so check the base URL too.` }),
      };
    },
  );

  defineTool(
    server,
    m,
    'list_webhooks',
    {
      title: 'List webhooks',
      description: 'The webhooks at the service, a page at a time, with their subscriptions (never a secret). A temporary webhook of `listen --public-url` says so.',
      inputSchema: z.strictObject({
        active: z.boolean().optional().describe('only active (true) or inactive (false) webhooks'),
        url: z.string().optional().describe('only webhooks with this URL'),
        type: z.string().min(1).optional().describe('only webhooks with a subscription of this type'),
        page: z.number().int().min(1).optional().describe('the page (from 1)'),
        page_size: z.number().int().min(1).max(PAGE.max).optional().describe(`webhooks in a page (default ${PAGE.default})`),
      }),
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    async (a) => {
      const { service } = await serviceFor(m.ctx);
      const got = await service.listWebhooks({ page: a.page, pageSize: a.page_size, active: a.active, url: a.url === undefined ? undefined : url(a.url, 'url'), type: a.type });
      return { webhooks: got.webhooks.map(shownWebhook), page: got.page, page_size: got.page_size, total: got.total ?? null };
    },
  );

  defineTool(
    server,
    m,
    'get_webhook',
    {
      title: 'One webhook',
      description: 'A webhook and its subscriptions (ids, types, filters, response options), never its secret; and whether its secret is stored here (what verify and replay sign with).',
      inputSchema: z.strictObject({ webhook_id: webhookId }),
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    async (a) => {
      const id = identifier(a.webhook_id, 'webhook_id');
      const { service, base } = await serviceFor(m.ctx);
      const hook = await service.getWebhook(id);
      const stored = await (await secretStoreFor(m.ctx)).get(base.url, id);
      return { webhook: shownWebhook(hook), secret_stored: stored !== undefined };
    },
  );

  defineTool(
    server,
    m,
    'ping',
    {
      title: 'Ask for a test delivery',
      description:
        "Asks the service for one test delivery of a subscription now, as `wxhooks ping` does (never retried). Answers whether the webhook's receiver answered 2xx; a failed attempt is an error with the service's reason. The attached listen then shows it as a test delivery.",
      inputSchema: z.strictObject({ webhook_id: webhookId, subscription_id: subscriptionId }),
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    },
    async (a) => {
      const webhook = identifier(a.webhook_id, 'webhook_id');
      const subscription = identifier(a.subscription_id, 'subscription_id');
      const { service } = await serviceFor(m.ctx);
      await service.ping(webhook, subscription);
      return { delivered: true, webhook_id: webhook, subscription_id: subscription };
    },
  );

  defineTool(
    server,
    m,
    'doctor',
    {
      title: 'Check the chain',
      description:
        'Checks the chain from the service to this machine, link by link, as `wxhooks doctor` does, and says what to do about each broken link: the credentials; the webhook exists, is active, has subscriptions; its URL can be reached from the service; its secret is stored; and a ping of each subscription arrives at a receiver it starts on the port the URL leads to (with a listen running there, that link says so: use ping and list_deliveries instead). Without webhook_id: the credentials, and the webhooks.',
      inputSchema: z.strictObject({
        webhook_id: webhookId.optional(),
        public_url: z.string().optional().describe('the public URL (a tunnel) that should lead to this machine'),
        port: z.number().int().min(0).max(65535).optional().describe(`the local port the URL leads to (default: the URL's own port when it is local, else ${DEFAULTS.listenPort})`),
      }),
      annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: true },
      outside: true,
    },
    async (a) => {
      const { checks, webhooks } = await diagnose(m.ctx, {
        webhook: a.webhook_id === undefined ? undefined : identifier(a.webhook_id, 'webhook_id'),
        publicUrl: a.public_url === undefined ? undefined : url(a.public_url, 'public_url'),
        port: a.port === undefined ? undefined : port(String(a.port), 'port'),
      });
      return {
        ok: checks.every((c) => c.ok),
        checks,
        ...(webhooks
          ? {
              webhooks: webhooks
                .slice(0, PAGE.max)
                .map((h) => ({ id: h.id, url: h.url, active: h.active ?? null, subscriptions: h.subscriptions.map((s) => s.type), temporary: Boolean(temporaryOf(h)) })),
              webhooks_total: webhooks.length,
            }
          : {}),
      };
    },
  );
}
