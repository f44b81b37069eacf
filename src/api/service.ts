import { DeliveryFailedError, RefusedError, UnreachableError } from '../errors.js';
import type { HttpClient } from './http.js';
import { pathId } from './ids.js';
import { notTheService, normalizeWebhook, normalizeWebhookPage, type AuthStatus, type Webhook, type WebhookPage } from './normalize.js';

export interface ListParams {
  page?: number;
  pageSize?: number;
  active?: boolean;
  url?: string;
  type?: string;
}

export interface SubscriptionBody {
  subscription_type?: string;
  note?: string | null;
  filters?: Record<string, unknown>;
  response_options?: Record<string, unknown> | null;
}

export interface WebhookPatch {
  url?: string;
  name?: string | null;
  note?: string | null;
  active?: boolean;
}

/** The typed service calls. Every answer goes through normalisation. */
export class Service {
  constructor(readonly http: HttpClient) {}

  get baseUrl(): string {
    return this.http.baseUrl;
  }

  async authStatus(): Promise<AuthStatus> {
    const { data } = await this.http.request<unknown>('GET', '/debug/v1/auth_status');
    if (typeof data !== 'object' || data === null || typeof (data as AuthStatus).authed !== 'boolean') throw notTheService('an auth status (`authed`)', data);
    return data as AuthStatus;
  }

  async listWebhooks(params: ListParams = {}): Promise<WebhookPage> {
    const page = params.page ?? 1;
    const pageSize = params.pageSize ?? 20;
    const { data } = await this.http.request('GET', '/webhooks/v1', {
      query: {
        page: params.page,
        page_size: params.pageSize,
        active: params.active === undefined ? undefined : String(params.active),
        url: params.url,
        subscription_type: params.type,
      },
    });
    return normalizeWebhookPage(data, page, pageSize);
  }

  /** Every page, in order, until a short or empty page or the stated total. */
  async listAllWebhooks(params: Omit<ListParams, 'page'> = {}): Promise<Webhook[]> {
    const pageSize = params.pageSize ?? 100;
    const all: Webhook[] = [];
    for (let page = 1; page <= 10_000; page++) {
      const got = await this.listWebhooks({ ...params, page, pageSize });
      all.push(...got.webhooks);
      if (got.webhooks.length === 0 || got.webhooks.length < got.page_size) break;
      if (got.total !== undefined && all.length >= got.total) break;
    }
    return all;
  }

  async getWebhook(id: string): Promise<Webhook> {
    const { data } = await this.http.request('GET', `/webhooks/v1/${pathId(id, 'webhook id')}`, { subject: `webhook ${id}` });
    return normalizeWebhook(data);
  }

  async createWebhook(body: Record<string, unknown>): Promise<Webhook> {
    const { data } = await this.http.request('POST', '/webhooks/v1', {
      body,
      writeHint: 'The webhook may have been created anyway, and creates are never retried: look for it with `wxhooks webhook list --url URL` before trying again.',
    });
    return normalizeWebhook(data);
  }

  async updateWebhook(id: string, patch: WebhookPatch): Promise<Webhook> {
    const { data } = await this.http.request('PATCH', `/webhooks/v1/${pathId(id, 'webhook id')}`, {
      body: patch,
      subject: `webhook ${id}`,
    });
    return normalizeWebhook(data);
  }

  async deleteWebhook(id: string): Promise<void> {
    await this.http.request('DELETE', `/webhooks/v1/${pathId(id, 'webhook id')}`, { subject: `webhook ${id}` });
  }

  async addSubscription(id: string, body: SubscriptionBody): Promise<Webhook> {
    try {
      const { data } = await this.http.request('PATCH', `/webhooks/v1/${pathId(id, 'webhook id')}/subscriptions`, {
        body,
        subject: `webhook ${id}`,
      });
      return normalizeWebhook(data);
    } catch (err) {
      if (err instanceof RefusedError && err.status === 409) {
        throw new RefusedError(`Webhook ${id} already has a ${body.subscription_type} subscription (409): a webhook has at most one of each type.`, {
          status: 409,
          hint: `Change the existing one with \`wxhooks subscription update ${id} SUBSCRIPTION_ID\` (ids: \`wxhooks subscription list ${id}\`).`,
        });
      }
      throw err;
    }
  }

  async updateSubscription(id: string, subscriptionId: string, body: SubscriptionBody): Promise<Webhook> {
    const { data } = await this.http.request('PATCH', `/webhooks/v1/${pathId(id, 'webhook id')}/subscriptions/${pathId(subscriptionId, 'subscription id')}`, {
      body,
      subject: `subscription ${subscriptionId} of webhook ${id}`,
    });
    return normalizeWebhook(data);
  }

  async removeSubscription(id: string, subscriptionId: string): Promise<void> {
    await this.http.request('DELETE', `/webhooks/v1/${pathId(id, 'webhook id')}/subscriptions/${pathId(subscriptionId, 'subscription id')}`, {
      subject: `subscription ${subscriptionId} of webhook ${id}`,
    });
  }

  /** One test delivery. Any answer but 2xx, 401/403 and 404 means the attempt failed (exit 7), a 5xx included. */
  async ping(id: string, subscriptionId: string): Promise<void> {
    try {
      await this.http.request('POST', `/webhooks/v1/${pathId(id, 'webhook id')}/subscriptions/${pathId(subscriptionId, 'subscription id')}/ping`, {
        subject: `subscription ${subscriptionId} of webhook ${id}`,
        writeHint: 'The test delivery may have been sent anyway; pings are never retried.',
      });
    } catch (err) {
      if ((err instanceof RefusedError || err instanceof UnreachableError) && err.status !== undefined) {
        const said = err.serviceMessage;
        throw new DeliveryFailedError(`The service took the ping but could not deliver it (it answered ${err.status})${said ? `: ${said}` : '.'}`, {
          status: err.status,
          serviceMessage: said,
          hint: "Check that the webhook's URL is reachable from the service and answers 2xx; `wxhooks listen` shows what arrives.",
        });
      }
      throw err;
    }
  }
}
