/**
 * The one place that knows the service answers in two shapes: the live one
 * (`id` integers, `signing_secret`, subscriptions as a list) and the
 * documented one (`webhook_id`, `secret`, subscriptions as a map by type).
 * Everything past this module sees one shape: the types below.
 */
import { UnreachableError } from '../errors.js';

/** A subscription, in either shape. */
export interface Subscription {
  id: string;
  type: string;
  note?: string | null;
  filters?: Record<string, unknown> | null;
  response_options?: Record<string, unknown> | null;
}

export interface Webhook {
  id: string;
  url: string;
  name?: string | null;
  note?: string | null;
  active?: boolean;
  created_at?: string;
  updated_at?: string;
  subscriptions: Subscription[];
  /** Only in a create response. */
  secret?: string;
}

export interface WebhookPage {
  webhooks: Webhook[];
  page: number;
  page_size: number;
  total?: number;
}

export interface AuthStatus {
  authed: boolean;
  client_id?: string;
  [key: string]: unknown;
}

type Raw = Record<string, unknown>;

const isObject = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
const idOf = (v: unknown): string | undefined => (typeof v === 'string' || typeof v === 'number' ? String(v) : undefined);

function normalizeSubscription(raw: Raw, typeKey?: string): Subscription {
  const sub: Subscription = {
    id: idOf(raw.id) ?? idOf(raw.subscription_id) ?? '',
    type: (typeof raw.subscription_type === 'string' && raw.subscription_type) || (typeof raw.type === 'string' && raw.type) || typeKey || '',
  };
  if ('note' in raw) sub.note = (raw.note as string | null) ?? null;
  if ('filters' in raw) sub.filters = (raw.filters as Record<string, unknown> | null) ?? null;
  if ('response_options' in raw) sub.response_options = (raw.response_options as Record<string, unknown> | null) ?? null;
  return sub;
}

export function normalizeSubscriptions(raw: unknown): Subscription[] {
  if (Array.isArray(raw)) return raw.filter(isObject).map((s) => normalizeSubscription(s));
  if (isObject(raw)) {
    return Object.entries(raw)
      .filter((entry): entry is [string, Raw] => isObject(entry[1]))
      .map(([type, s]) => normalizeSubscription(s, type));
  }
  return [];
}

/**
 * An answer that is not of the service's shape: what answered is some other server (exit 6, as for a
 * service that cannot be reached), and the message shows the start of what it said.
 */
export function notTheService(what: string, raw: unknown): UnreachableError {
  const shown = typeof raw === 'string' ? raw.slice(0, 80) : JSON.stringify(raw)?.slice(0, 80);
  return new UnreachableError(`This is not the service: it answered with something that is not ${what}: ${shown ?? '(nothing)'}`, {
    hint: 'Check that --base-url (or WX_BASE_URL, or the base-url setting) points at the weather service or a `wxhooks emulator`, not at another server (your app, or a listen).',
  });
}

export function normalizeWebhook(raw: unknown): Webhook {
  if (!isObject(raw)) throw notTheService('a webhook', raw);
  const hook: Webhook = {
    id: idOf(raw.id) ?? idOf(raw.webhook_id) ?? '',
    url: typeof raw.url === 'string' ? raw.url : '',
    subscriptions: normalizeSubscriptions(raw.subscriptions),
  };
  for (const key of ['name', 'note', 'created_at', 'updated_at'] as const) {
    if (key in raw) (hook as unknown as Raw)[key] = raw[key] ?? null;
  }
  if (typeof raw.active === 'boolean') hook.active = raw.active;
  const secret = raw.signing_secret ?? raw.secret;
  if (typeof secret === 'string' && secret) hook.secret = secret;
  return hook;
}

export function normalizeWebhookPage(raw: unknown, page: number, pageSize: number): WebhookPage {
  if (Array.isArray(raw)) return { webhooks: raw.map(normalizeWebhook), page, page_size: pageSize, total: raw.length };
  const o = isObject(raw) ? raw : {};
  const list = Array.isArray(o.webhooks) ? o.webhooks : Array.isArray(o.data) ? o.data : Array.isArray(o.items) ? o.items : undefined;
  if (!list) throw notTheService('a list of webhooks', raw);
  return {
    webhooks: list.map(normalizeWebhook),
    page: typeof o.page === 'number' ? o.page : page,
    page_size: typeof o.page_size === 'number' ? o.page_size : pageSize,
    total: typeof o.total === 'number' ? o.total : undefined,
  };
}

/** A webhook as it may be shown: never with its secret. */
export function withoutSecret(hook: Webhook): Webhook {
  const { secret: _secret, ...rest } = hook;
  return rest;
}
