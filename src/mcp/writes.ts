import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { Credentials } from '../api/credentials.js';
import { HttpClient, type HttpResponse, type Method, type RequestOptions } from '../api/http.js';
import type { Subscription, Webhook } from '../api/normalize.js';
import { addSubscriptionBody, createWebhookBody, updateSubscriptionBody, type SubscriptionFlags } from '../api/requests.js';
import { Service, type WebhookPatch } from '../api/service.js';
import { secretStoreFor } from '../tasks/secrets.js';
import { serviceFor } from '../tasks/service.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { NotFoundError, StorageError, UsageError } from '../errors.js';
import { LAYOUT_NAMES } from '../signing/layouts.js';
import { newTriggerId } from '../signing/sign.js';
import { generatedBody, postSigned } from '../tasks/send.js';
import { unknownTypes } from '../tasks/unknown.js';
import { identifier, unixSeconds, url } from '../util/parse.js';
import { hourOfDayProblem } from '../vocabulary.js';
import { shownWebhook } from './service.js';
import { defineTool, secretsFor, type McpContext } from './tool.js';

/** A request a write would send: what a dry run answers. */
interface PlannedRequest {
  method: Method;
  url: string;
  body?: unknown;
}

/**
 * The service client of a dry run: the same typed calls (src/api/service.ts) build the same requests,
 * which are written down instead of sent. So what a dry run says would be sent is what would be sent.
 */
class PlanningClient extends HttpClient {
  readonly planned: PlannedRequest[] = [];

  override async request<T = unknown>(method: Method, path: string, options: RequestOptions = {}): Promise<HttpResponse<T>> {
    this.planned.push({ method, url: this.url(path, options.query), ...(options.body !== undefined ? { body: options.body } : {}) });
    return { status: 0, data: {} as T };
  }
}

const dryRun = z.boolean().optional().describe('answer exactly which requests would be sent and what would change, and send nothing');
const webhookId = z.string().min(1).describe('the webhook id');
const subscriptionId = z.string().min(1).describe('the subscription id');
const filterArgs = {
  models: z.array(z.string().min(1)).min(1).optional().describe('only these models, such as ["wm-6"]'),
  hours: z
    .array(z.string().superRefine((h, ctx) => void (hourOfDayProblem(h) && ctx.addIssue({ code: 'custom', message: hourOfDayProblem(h)! }))))
    .min(1)
    .optional()
    .describe('only runs initialised at these hours of the day, H:MM, such as ["0:00", "12:00"]'),
  event_types: z.array(z.string().min(1)).min(1).optional().describe('events.available only: atmospheric_river, heatwave, coldwave, front'),
  response_options: z.record(z.string(), z.string()).optional().describe('with response: its options, such as {"coordinates": "37.77,-122.42"}'),
  note: z.string().optional(),
};
type FilterArgs = { models?: string[]; hours?: string[]; event_types?: string[]; response?: string | null; response_options?: Record<string, string>; note?: string | null; clear_filters?: boolean };

/**
 * A tool's filter arguments as the CLI's flags, so that the same code (src/api/requests.ts) checks them
 * and builds the body; the combinations it refuses are refused here first, in the arguments' own names.
 */
function flagsOf(a: FilterArgs): SubscriptionFlags {
  const filters = a.models !== undefined || a.hours !== undefined || a.event_types !== undefined;
  if (a.clear_filters && filters) throw new UsageError('clear_filters goes with none of models, hours and event_types (filters given replace the old ones anyway).');
  if (a.response_options !== undefined && (a.response === undefined || a.response === null)) throw new UsageError('response_options go with response: the options belong to a response type.');
  return {
    model: a.models,
    hours: a.hours,
    eventType: a.event_types,
    response: a.response === null ? false : a.response,
    responseOption: a.response_options && Object.entries(a.response_options).map(([k, v]) => `${k}=${v}`),
    note: a.note ?? undefined,
    clearNote: a.note === null ? true : undefined,
    clearFilters: a.clear_filters,
  };
}

/** Each field that would change: from what it is, to what it would be. */
function diff(current: Record<string, unknown>, next: Record<string, unknown>): Record<string, { from: unknown; to: unknown }> {
  const out: Record<string, { from: unknown; to: unknown }> = {};
  for (const [key, to] of Object.entries(next)) {
    const from = current[key] ?? null;
    if (JSON.stringify(from) !== JSON.stringify(to)) out[key] = { from, to };
  }
  return out;
}

function subscriptionOf(hook: Webhook, id: string): Subscription {
  const sub = hook.subscriptions.find((s) => s.id === id);
  if (!sub) throw new NotFoundError(`Webhook ${hook.id} has no subscription ${id}.`, { hint: `Its subscriptions: ${hook.subscriptions.map((s) => `${s.id} (${s.type})`).join(', ') || 'none'}.` });
  return sub;
}

/**
 * The write tools, offered only when the server runs with --allow-write: send_delivery, which signs a
 * body the agent wrote with a webhook's secret (as replay_delivery's `body` does, offered on the same
 * terms), and those that change webhooks at the service. Each of these takes `dry_run`, which answers the
 * requests the same service calls would send (written down, not sent), and what would change (read from
 * the service now), without changing anything.
 */
export function registerWriteTools(server: McpServer, m: McpContext): void {
  /** The real service, or a planning one; and, for a dry run, the requests it wrote down. */
  async function services(dry: boolean | undefined): Promise<{ service: Service; real: Service; base: string; planned?: PlannedRequest[] }> {
    const { service, base, credentials } = await serviceFor(m.ctx);
    if (!dry) return { service, real: service, base: base.url };
    const planning = new PlanningClient({ baseUrl: base.url, credentials: credentials as Credentials, timeoutMs: m.ctx.global.timeoutMs });
    return { service: new Service(planning), real: service, base: base.url, planned: planning.planned };
  }
  const annotations = (destructive: boolean, idempotent: boolean) => ({ readOnlyHint: false, destructiveHint: destructive, idempotentHint: idempotent, openWorldHint: true });

  defineTool(
    server,
    m,
    'create_webhook',
    {
      title: 'Create a webhook',
      description:
        'Creates a webhook with its subscriptions, as `wxhooks webhook create` does. Its one-time secret is stored here (what listen, verify and replay use) and never shown: a person sees it with `wxhooks secret show ID`. If it cannot be stored, the webhook is deleted again. With dry_run: the request that would be sent, and nothing is created.',
      inputSchema: z.strictObject({
        url: z.string().describe('where the service POSTs deliveries (absolute http or https)'),
        name: z.string().optional(),
        note: z.string().optional(),
        active: z.boolean().optional().describe('false: created switched off (default true)'),
        subscriptions: z
          .array(
            z.strictObject({
              type: z.string().min(1).describe('such as forecast_hour.available'),
              response: z.string().min(1).optional().describe('include an API response of this type, such as gridded'),
              ...filterArgs,
            }),
          )
          .optional()
          .describe('at most one of each type'),
        dry_run: dryRun,
      }),
      annotations: annotations(false, false),
    },
    async (a) => {
      const subscriptions: Record<string, unknown> = {};
      for (const [i, s] of (a.subscriptions ?? []).entries()) {
        if (s.type in subscriptions) throw new UsageError(`subscriptions[${i}]: the type ${s.type} appears twice; a webhook has at most one subscription of each type.`);
        const { subscription_type: _t, ...config } = addSubscriptionBody(s.type, flagsOf(s));
        subscriptions[s.type] = config;
      }
      const { body, types } = createWebhookBody(
        {
          url: url(a.url, 'url'),
          ...(a.name !== undefined ? { name: a.name } : {}),
          ...(a.note !== undefined ? { note: a.note } : {}),
          ...(a.active === false ? { active: false } : {}),
          ...(a.subscriptions ? { subscriptions } : {}),
        },
        {},
      );
      const said = unknownTypes(
        types,
        (a.subscriptions ?? []).map((s) => s.response),
      );
      if (!types.length) said.push('This webhook has no subscription: nothing will be delivered to it until one is added.');
      const { service, base, planned } = await services(a.dry_run);
      const store = await secretStoreFor(m.ctx);
      await store.preflight(); // a secret that could not be kept stops the create before it is sent
      const hook = await service.createWebhook(body);
      if (planned) return { dry_run: true, requests: planned, changes: [{ action: 'create', webhook: body, secret: `would be stored in ${store.file}, never shown` }], warnings: said };
      if (hook.secret) {
        try {
          await store.save(base, hook.id, hook.secret, hook.url);
        } catch (err) {
          let undone = true;
          await service.deleteWebhook(hook.id).catch(() => (undone = false));
          throw new StorageError(
            `Webhook ${hook.id} was created, but its secret could not be stored in ${store.file} (${(err as Error).message}): ${undone ? 'it was deleted again, since deliveries could not be verified without it' : 'deleting it again failed too'}.`,
            {
              hint: undone
                ? 'Fix the store folder (or WXHOOKS_CONFIG_DIR), then create it again.'
                : `Delete it with \`wxhooks webhook delete ${hook.id} --yes\`, fix the store folder, and create it again.`,
            },
          );
        }
      } else said.push('The service did not return a signing secret for this webhook.');
      return { created: shownWebhook(hook), secret_stored: Boolean(hook.secret), secret_file: store.file, warnings: said };
    },
  );

  defineTool(
    server,
    m,
    'update_webhook',
    {
      title: 'Change a webhook',
      description: 'Changes only the fields given (null clears name or note), as `wxhooks webhook update` does. With dry_run: the request, and each field from what it is to what it would be.',
      inputSchema: z.strictObject({
        webhook_id: webhookId,
        url: z.string().optional().describe('a new delivery URL'),
        name: z.string().nullable().optional().describe('a new name (null: none)'),
        note: z.string().nullable().optional().describe('a new note (null: none)'),
        active: z.boolean().optional().describe('switch deliveries on (true) or off (false)'),
        dry_run: dryRun,
      }),
      annotations: annotations(false, true),
    },
    async (a) => {
      const id = identifier(a.webhook_id, 'webhook_id');
      const patch: WebhookPatch = {};
      if (a.url !== undefined) patch.url = url(a.url, 'url');
      if (a.name !== undefined) patch.name = a.name;
      if (a.note !== undefined) patch.note = a.note;
      if (a.active !== undefined) patch.active = a.active;
      if (!Object.keys(patch).length) throw new UsageError('Nothing to update: give url, name, note or active.');
      const { service, real, planned } = await services(a.dry_run);
      if (planned) {
        const current = await real.getWebhook(id);
        await service.updateWebhook(id, patch);
        return { dry_run: true, requests: planned, changes: [{ action: 'update', webhook_id: id, fields: diff(current as unknown as Record<string, unknown>, patch as Record<string, unknown>) }] };
      }
      return { updated: shownWebhook(await service.updateWebhook(id, patch)) };
    },
  );

  defineTool(
    server,
    m,
    'delete_webhook',
    {
      title: 'Delete a webhook',
      description: 'Deletes a webhook and all its subscriptions, and forgets its stored secret, as `wxhooks webhook delete` does. With dry_run: the request, and what would go.',
      inputSchema: z.strictObject({ webhook_id: webhookId, dry_run: dryRun }),
      annotations: annotations(true, true),
    },
    async (a) => {
      const id = identifier(a.webhook_id, 'webhook_id');
      const { service, real, base, planned } = await services(a.dry_run);
      const store = await secretStoreFor(m.ctx);
      if (planned) {
        const current = await real.getWebhook(id);
        await service.deleteWebhook(id);
        const stored = (await store.get(base, id)) !== undefined;
        return {
          dry_run: true,
          requests: planned,
          changes: [{ action: 'delete', webhook: shownWebhook(current), subscriptions: current.subscriptions.length, stored_secret: stored ? 'would be forgotten' : 'none stored' }],
        };
      }
      await service.deleteWebhook(id);
      let forgot: boolean | string = false;
      try {
        forgot = await store.remove(base, id);
      } catch (err) {
        forgot = `the webhook is deleted, but its stored secret could not be removed: ${(err as Error).message}`;
      }
      return { deleted: true, webhook_id: id, secret_removed: forgot };
    },
  );

  defineTool(
    server,
    m,
    'add_subscription',
    {
      title: 'Add a subscription',
      description:
        'Adds one subscription to a webhook (at most one of each type), with its filters and response, as `wxhooks subscription add` does. With dry_run: the request, what would be added, and whether the service would refuse it (the type is there already).',
      inputSchema: z.strictObject({
        webhook_id: webhookId,
        type: z.string().min(1).describe('forecast_hour.available, initialization_time.available, degree_days.available, tropical_cyclones.available or events.available'),
        response: z.string().min(1).optional().describe('include an API response of this type, such as gridded'),
        ...filterArgs,
        dry_run: dryRun,
      }),
      annotations: annotations(false, false),
    },
    async (a) => {
      const id = identifier(a.webhook_id, 'webhook_id');
      const body = addSubscriptionBody(a.type, flagsOf(a));
      const said = unknownTypes([a.type], [a.response]);
      const { service, real, planned } = await services(a.dry_run);
      if (planned) {
        const current = await real.getWebhook(id);
        await service.addSubscription(id, body);
        const there = current.subscriptions.find((s) => s.type === a.type);
        return {
          dry_run: true,
          requests: planned,
          changes: [{ action: 'add', webhook_id: id, subscription: body }],
          ...(there ? { would_fail: `the service would refuse it (409): webhook ${id} already has a ${a.type} subscription (${there.id}); change that one with update_subscription` } : {}),
          warnings: said,
        };
      }
      const hook = await service.addSubscription(id, body);
      return { added: hook.subscriptions.find((s) => s.type === a.type) ?? null, webhook: shownWebhook(hook), warnings: said };
    },
  );

  defineTool(
    server,
    m,
    'update_subscription',
    {
      title: 'Change a subscription',
      description:
        'Changes a subscription, as `wxhooks subscription update` does: what is not given is kept; filters given replace the whole filter set; clear_filters removes them; response null stops the response; note null clears it. With dry_run: the request, and each field from what it is to what it would be.',
      inputSchema: z.strictObject({
        webhook_id: webhookId,
        subscription_id: subscriptionId,
        response: z.string().min(1).nullable().optional().describe('include an API response of this type (null: no response)'),
        ...filterArgs,
        note: z.string().nullable().optional().describe('a new note (null: none)'),
        clear_filters: z.boolean().optional().describe('remove every filter'),
        dry_run: dryRun,
      }),
      annotations: annotations(false, true),
    },
    async (a) => {
      const id = identifier(a.webhook_id, 'webhook_id');
      const sid = identifier(a.subscription_id, 'subscription_id');
      if (a.clear_filters === false) throw new UsageError('clear_filters is true or not given.');
      const fields = ['models', 'hours', 'event_types', 'response', 'response_options', 'note', 'clear_filters'] as const;
      if (fields.every((f) => a[f] === undefined)) throw new UsageError(`Nothing to update: give ${fields.slice(0, -1).join(', ')} or ${fields.at(-1)}.`);
      const body = updateSubscriptionBody(flagsOf(a));
      const said = unknownTypes([], [a.response]);
      const { service, real, planned } = await services(a.dry_run);
      if (planned) {
        const current = subscriptionOf(await real.getWebhook(id), sid);
        await service.updateSubscription(id, sid, body);
        return {
          dry_run: true,
          requests: planned,
          changes: [{ action: 'update', webhook_id: id, subscription_id: sid, type: current.type, fields: diff(current as unknown as Record<string, unknown>, body) }],
          warnings: said,
        };
      }
      const hook = await service.updateSubscription(id, sid, body);
      return { updated: hook.subscriptions.find((s) => s.id === sid) ?? null, warnings: said };
    },
  );

  defineTool(
    server,
    m,
    'remove_subscription',
    {
      title: 'Remove a subscription',
      description: 'Removes one subscription from a webhook, as `wxhooks subscription remove` does. With dry_run: the request, and what would go.',
      inputSchema: z.strictObject({ webhook_id: webhookId, subscription_id: subscriptionId, dry_run: dryRun }),
      annotations: annotations(true, true),
    },
    async (a) => {
      const id = identifier(a.webhook_id, 'webhook_id');
      const sid = identifier(a.subscription_id, 'subscription_id');
      const { service, real, planned } = await services(a.dry_run);
      if (planned) {
        const current = subscriptionOf(await real.getWebhook(id), sid);
        await service.removeSubscription(id, sid);
        return { dry_run: true, requests: planned, changes: [{ action: 'remove', webhook_id: id, subscription: current }] };
      }
      await service.removeSubscription(id, sid);
      return { removed: true, webhook_id: id, subscription_id: sid };
    },
  );

  defineTool(
    server,
    m,
    'send_delivery',
    {
      title: 'Send a signed test delivery',
      description:
        "Signs one delivery as the service would and POSTs it to any receiver (your own endpoint), as `wxhooks send` does: a body you give, or one made for `type`. Answers the receiver's status and the start of its answer (content from outside: between the session's outside-data marks). The secret: secret_webhook_id or secret_env, else the server's --webhook/--secret-env, else the attached listen's webhook's. Offered only with --allow-write: what it signs passes any receiver's check as the service's own.",
      inputSchema: z.strictObject({
        to: z.string().describe('the receiver (an absolute http or https URL)'),
        body: z.string().optional().describe('the body to send, as text (default: one made for `type`)'),
        body_base64: z.string().optional().describe('or the body in base64'),
        type: z.string().min(1).optional().describe(`for a body made here: its type (default ${DEFAULTS.sendType})`),
        model: z.string().min(1).optional().describe(`for a body made here: data.model (default ${DEFAULTS.model})`),
        webhook_id: z.string().min(1).optional().describe(`for a body made here: webhook_id in it (default ${DEFAULTS.sendWebhookId})`),
        subscription_id: z.string().min(1).optional().describe(`for a body made here: subscription_id in it (default ${DEFAULTS.sendSubscriptionId})`),
        trigger_id: z.string().min(1).optional().describe('the Trigger-Id (default: a new one)'),
        layout: z
          .enum(LAYOUT_NAMES as [string, ...string[]])
          .optional()
          .describe(`how to sign (default ${DEFAULTS.sendLayout})`),
        timestamp: z.number().int().min(0).optional().describe('sign with this Unix time instead of now (to test a stale-timestamp check)'),
        secret_webhook_id: z.string().min(1).optional().describe('sign with the stored secret of this webhook'),
        secret_env: z.string().min(1).optional().describe("or with the secret in this variable of the server's environment"),
      }),
      annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
      outside: true,
    },
    async (a) => {
      const to = url(a.to, 'to');
      if (a.body !== undefined && a.body_base64 !== undefined) throw new UsageError('Give body or body_base64, not both.');
      const given = a.body !== undefined || a.body_base64 !== undefined;
      const forMade = (['type', 'model', 'webhook_id', 'subscription_id'] as const).filter((k) => a[k] !== undefined);
      if (given && forMade.length) throw new UsageError(`${forMade.join(', ')} ${forMade.length === 1 ? 'is' : 'are'} for a body made here: not with body or body_base64.`);
      const triggerId = a.trigger_id ?? newTriggerId();
      const body =
        a.body !== undefined
          ? Buffer.from(a.body, 'utf8')
          : a.body_base64 !== undefined
            ? Buffer.from(a.body_base64, 'base64')
            : generatedBody({
                type: a.type ?? DEFAULTS.sendType,
                model: a.model ?? DEFAULTS.model,
                webhookId: a.webhook_id ?? DEFAULTS.sendWebhookId,
                subscriptionId: a.subscription_id ?? DEFAULTS.sendSubscriptionId,
                triggerId,
              });
      const [secret] = await secretsFor(m, a, 'send');
      const layout = (a.layout ?? DEFAULTS.sendLayout) as (typeof LAYOUT_NAMES)[number];
      const sent = await postSigned({
        to,
        body,
        triggerId,
        secret: secret!,
        layout,
        timestamp: a.timestamp === undefined ? undefined : unixSeconds(String(a.timestamp), 'timestamp'),
        timeoutMs: m.ctx.global.timeoutMs,
        clock: m.ctx.clock,
      });
      return { delivered: sent.ok, status: sent.status, answer_start: sent.text, ms: sent.ms, trigger_id: triggerId, layout, size: body.length };
    },
  );
}
