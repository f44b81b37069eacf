import { newTriggerId } from '../signing/sign.js';
import { hourOfDayProblem, isKnownType, isoSeconds, latestCycle, SUBSCRIPTION_TYPES, urlProblem } from '../vocabulary.js';
import { authProblem, type EmulatorCredentials } from './auth.js';
import { payloadFor, type DeliveryScheduler, type PublishedEvent } from './deliveries.js';
import { Missing } from './forecasts.js';
import type { EmuSubscription, EmuWebhook, EmulatorState } from './state.js';
import * as DEFAULTS from '../delivery/defaults.js';

/** Which field names the emulator answers with: the documentation's (default) or the live service's. */
export type Shape = 'documented' | 'live';

export interface EmuRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body; undefined when there was none. */
  body: unknown;
}

export interface EmuResponse {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface RouterOptions {
  credentials: EmulatorCredentials;
  shape: Shape;
  /** How long `POST /emulator/v1/events` waits for the first attempts before answering (3 s). */
  publishWaitMs?: number;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export function errorBody(code: string, message: string): { error: { code: string; message: string } } {
  return { error: { code, message } };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function bad(message: string): never {
  throw new HttpError(400, 'invalid_request', message);
}

function checkUrl(v: unknown): string {
  if (typeof v !== 'string') bad('url must be a string');
  const problem = urlProblem(v);
  if (problem) bad(`url ${problem}: ${JSON.stringify(v)}`);
  return v;
}

function optionalText(v: unknown, field: string): string | null | undefined {
  if (v === undefined || v === null) return v;
  if (typeof v !== 'string') bad(`${field} must be a string or null`);
  return v;
}

function checkFilters(v: unknown): Record<string, unknown> | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) bad('filters must be an object');
  const hours = v.initialization_time_hours;
  if (hours !== undefined) {
    if (!Array.isArray(hours)) bad('filters.initialization_time_hours must be a list of H:MM strings');
    for (const h of hours) {
      const problem = typeof h === 'string' ? hourOfDayProblem(h) : 'is not a string';
      if (problem) bad(`filters.initialization_time_hours: ${problem}`);
    }
  }
  if (v.model !== undefined && typeof v.model !== 'string' && !(Array.isArray(v.model) && v.model.every((m) => typeof m === 'string'))) {
    bad('filters.model must be a string or a list of strings');
  }
  if (v.event_type !== undefined && typeof v.event_type !== 'string' && !(Array.isArray(v.event_type) && v.event_type.every((m) => typeof m === 'string'))) {
    bad('filters.event_type must be a string or a list of strings');
  }
  return v;
}

function checkResponseOptions(v: unknown): Record<string, unknown> | null | undefined {
  if (v === undefined || v === null) return v;
  if (!isObject(v) || typeof v.type !== 'string' || !v.type) bad('response_options must be an object with a "type"');
  return v;
}

function checkType(v: unknown): string {
  if (typeof v !== 'string' || !isKnownType(v)) {
    bad(`unknown subscription type ${JSON.stringify(v)}; known: ${SUBSCRIPTION_TYPES.join(', ')}`);
  }
  return v;
}

/** The HTTP API of the service, over the emulator's state. */
export class EmulatorRouter {
  constructor(
    private readonly state: EmulatorState,
    private readonly scheduler: DeliveryScheduler,
    private readonly options: RouterOptions,
  ) {}

  render(hook: EmuWebhook, withSecret = false): Record<string, unknown> {
    const live = this.options.shape === 'live';
    const subscriptionOf = (s: EmuSubscription) =>
      live
        ? { id: Number(s.id), subscription_type: s.type, note: s.note, filters: s.filters, response_options: s.response_options }
        : { subscription_id: s.id, note: s.note, filters: s.filters, response_options: s.response_options };
    const out: Record<string, unknown> = {
      ...(live ? { id: Number(hook.id) } : { webhook_id: hook.id }),
      url: hook.url,
      name: hook.name,
      note: hook.note,
      active: hook.active,
      created_at: hook.created_at,
      updated_at: hook.updated_at,
      subscriptions: live ? hook.subscriptions.map(subscriptionOf) : Object.fromEntries(hook.subscriptions.map((s) => [s.type, subscriptionOf(s)])),
    };
    if (withSecret) out[live ? 'signing_secret' : 'secret'] = hook.secret;
    return out;
  }

  private hook(id: string): EmuWebhook {
    const hook = this.state.webhooks.get(id);
    if (!hook) throw new HttpError(404, 'not_found', `webhook ${id} not found`);
    return hook;
  }

  private subscription(hook: EmuWebhook, sid: string): EmuSubscription {
    const sub = hook.subscriptions.find((s) => s.id === sid);
    if (!sub) throw new HttpError(404, 'not_found', `subscription ${sid} of webhook ${hook.id} not found`);
    return sub;
  }

  async handle(req: EmuRequest): Promise<EmuResponse> {
    try {
      return await this.route(req);
    } catch (err) {
      if (err instanceof HttpError) return { status: err.status, body: errorBody(err.code, err.message), headers: err.headers };
      return { status: 500, body: errorBody('internal', (err as Error).message) };
    }
  }

  /**
   * What a request is answered before its body is read, or undefined to read it: 404 for a path the
   * emulator does not have, 401 without its key. An anonymous sender's body is never read.
   */
  async before(req: Omit<EmuRequest, 'body'>): Promise<EmuResponse | undefined> {
    try {
      await this.guard({ ...req, body: undefined });
      return undefined;
    } catch (err) {
      if (err instanceof HttpError) return { status: err.status, body: errorBody(err.code, err.message), headers: err.headers };
      throw err;
    }
  }

  private async guard(req: EmuRequest): Promise<() => Promise<EmuResponse> | EmuResponse> {
    const parts = req.path
      .split('/')
      .filter(Boolean)
      .map((p) => {
        try {
          return decodeURIComponent(p);
        } catch {
          return p;
        }
      });
    const route = this.match(req, parts);
    if (!route) throw new HttpError(404, 'not_found', `no route for ${req.path}`);
    const header = req.headers.authorization;
    const problem = await authProblem(Array.isArray(header) ? header[0] : header, this.options.credentials);
    if (problem) throw new HttpError(401, 'unauthorized', `not authenticated: ${problem}`, { 'www-authenticate': 'Bearer' });
    return route;
  }

  private async route(req: EmuRequest): Promise<EmuResponse> {
    return (await this.guard(req))();
  }

  /** The route for a path and method: undefined for an unknown path; 405 for a known path and the wrong method. */
  private match(req: EmuRequest, p: string[]): (() => Promise<EmuResponse> | EmuResponse) | undefined {
    const method = req.method;
    const methods: Record<string, () => Promise<EmuResponse> | EmuResponse> = {};
    const [a, b, c, d, e, f] = p;
    if (p.length === 3 && a === 'debug' && b === 'v1' && c === 'auth_status') {
      methods.GET = () => ({ status: 200, body: { authed: true, client_id: this.options.credentials.clientId } });
    } else if (a === 'webhooks' && b === 'v1') {
      if (p.length === 2) {
        methods.GET = () => this.list(req.query);
        methods.POST = () => this.create(req.body);
      } else if (p.length === 3) {
        methods.GET = () => ({ status: 200, body: this.render(this.hook(c!)) });
        methods.PATCH = () => this.update(c!, req.body);
        methods.DELETE = () => this.remove(c!);
      } else if (p.length === 4 && d === 'subscriptions') {
        methods.PATCH = () => this.addSubscription(c!, req.body);
      } else if (p.length === 5 && d === 'subscriptions') {
        methods.PATCH = () => this.updateSubscription(c!, e!, req.body);
        methods.DELETE = () => this.removeSubscription(c!, e!);
      } else if (p.length === 6 && d === 'subscriptions' && f === 'ping') {
        methods.POST = () => this.ping(c!, e!);
      }
    } else if ((a === 'forecasts' || a === 'insights') && b === 'v1' && c !== undefined) {
      const route = this.forecastRoute(req.query, a, c, p.slice(3).join('/'));
      if (route) methods.GET = route;
    } else if (a === 'emulator' && b === 'v1' && p.length === 3) {
      if (c === 'info') methods.GET = () => ({ status: 200, body: { emulator: true, shape: this.options.shape, client_id: this.options.credentials.clientId } });
      if (c === 'events') methods.POST = () => this.publish(req.body);
      if (c === 'deliveries') methods.GET = () => this.deliveries(req.query);
    }
    if (Object.keys(methods).length === 0) return undefined;
    const handler = methods[method];
    if (handler) return handler;
    const allow = Object.keys(methods).join(', ');
    return () => {
      throw new HttpError(405, 'method_not_allowed', `${method} is not allowed here; use ${allow}`, { allow });
    };
  }

  /**
   * The forecast API's record of what the emulator published (src/emulator/forecasts.ts): the calls of
   * SERVICE.md's last section. A model it never published is a 404, as the other routes answer.
   */
  private forecastRoute(q: URLSearchParams, api: string, model: string, rest: string): (() => EmuResponse) | undefined {
    const record = this.state.forecasts;
    const time = (name: string): string | undefined => {
      const v = q.get(name);
      if (v === null || v === '') return undefined;
      if (Number.isNaN(Date.parse(v))) bad(`${name} must be an ISO 8601 time`);
      return isoSeconds(v);
    };
    const answer = (found: object | Missing): EmuResponse => {
      if (found instanceof Missing) throw new HttpError(404, 'not_found', found.message);
      return { status: 200, body: found };
    };
    if (api === 'forecasts' && rest === 'initialization_times') return () => answer(record.initializationTimes(model));
    if (api === 'forecasts' && rest === 'initialization_times/archive') return () => answer(record.archive(model, Date.parse(time('page_end') ?? new Date().toISOString())));
    if (api === 'forecasts' && rest === 'run_information') return () => answer(record.runInformation(model, time('initialization_time')));
    if (api === 'forecasts' && rest === 'tropical_cyclones') return () => answer(record.tropicalCyclones(model, time('initialization_time')));
    if (api === 'insights' && rest === 'calculation_times/degree_days') return () => answer(record.degreeDays(model));
    return undefined;
  }

  private list(q: URLSearchParams): EmuResponse {
    const int = (name: string, def: number, max: number) => {
      const v = q.get(name);
      if (v === null) return def;
      if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max) bad(`${name} must be a whole number from 1 to ${max}`);
      return Number(v);
    };
    const page = int('page', 1, 1_000_000);
    const pageSize = int('page_size', 20, 100);
    // `true`/`false`, or Python's `True`/`False` as one version of the official client sends them, or 1/0
    const activeText = q.get('active');
    const active = activeText === null ? null : ({ true: 'true', True: 'true', '1': 'true', false: 'false', False: 'false', '0': 'false' } as Record<string, string>)[activeText];
    if (active === undefined) bad('active must be true or false (True, False, 1 and 0 are taken too)');
    const url = q.get('url');
    const type = q.get('subscription_type');
    const all = [...this.state.webhooks.values()].filter(
      (h) => (active === null || h.active === (active === 'true')) && (url === null || h.url === url) && (type === null || h.subscriptions.some((s) => s.type === type)),
    );
    const slice = all.slice((page - 1) * pageSize, page * pageSize);
    return { status: 200, body: { webhooks: slice.map((h) => this.render(h)), page, page_size: pageSize, total: all.length } };
  }

  private async create(body: unknown): Promise<EmuResponse> {
    if (!isObject(body)) bad('the body must be a JSON object');
    const url = checkUrl(body.url);
    const name = optionalText(body.name, 'name');
    const note = optionalText(body.note, 'note');
    if (body.active !== undefined && typeof body.active !== 'boolean') bad('active must be true or false');
    const subs = body.subscriptions ?? {};
    if (!isObject(subs)) bad('subscriptions must be an object keyed by subscription type');
    const configs = Object.entries(subs).map(([type, config]) => {
      checkType(type);
      if (!isObject(config)) bad(`subscriptions.${type} must be an object`);
      return {
        type,
        note: optionalText(config.note, `subscriptions.${type}.note`),
        filters: checkFilters(config.filters),
        response_options: checkResponseOptions(config.response_options),
      };
    });
    const hook = this.state.createWebhook({ url, name, note, active: body.active as boolean | undefined });
    for (const c of configs) this.state.addSubscription(hook, c.type, c);
    this.state.changed();
    return { status: 201, body: this.render(hook, true) };
  }

  private async update(id: string, body: unknown): Promise<EmuResponse> {
    const hook = this.hook(id);
    if (!isObject(body)) bad('the body must be a JSON object');
    if ('url' in body) hook.url = checkUrl(body.url);
    if ('name' in body) hook.name = optionalText(body.name, 'name') ?? null;
    if ('note' in body) hook.note = optionalText(body.note, 'note') ?? null;
    if ('active' in body) {
      if (typeof body.active !== 'boolean') bad('active must be true or false');
      hook.active = body.active;
    }
    hook.updated_at = new Date().toISOString();
    this.state.changed();
    return { status: 200, body: this.render(hook) };
  }

  private async remove(id: string): Promise<EmuResponse> {
    this.hook(id);
    this.state.webhooks.delete(id);
    this.state.changed();
    return { status: 204 };
  }

  private async addSubscription(id: string, body: unknown): Promise<EmuResponse> {
    const hook = this.hook(id);
    if (!isObject(body)) bad('the body must be a JSON object');
    const type = checkType(body.subscription_type);
    if (hook.subscriptions.some((s) => s.type === type)) {
      throw new HttpError(409, 'conflict', `webhook ${id} already has a ${type} subscription`);
    }
    this.state.addSubscription(hook, type, {
      note: optionalText(body.note, 'note'),
      filters: checkFilters(body.filters),
      response_options: checkResponseOptions(body.response_options),
    });
    this.state.changed();
    return { status: 200, body: this.render(hook) };
  }

  private async updateSubscription(id: string, sid: string, body: unknown): Promise<EmuResponse> {
    const hook = this.hook(id);
    const sub = this.subscription(hook, sid);
    if (!isObject(body)) bad('the body must be a JSON object');
    if ('note' in body) sub.note = optionalText(body.note, 'note') ?? null;
    if ('filters' in body) sub.filters = checkFilters(body.filters) ?? {};
    if ('response_options' in body) sub.response_options = checkResponseOptions(body.response_options) ?? null;
    hook.updated_at = new Date().toISOString();
    this.state.changed();
    return { status: 200, body: this.render(hook) };
  }

  private async removeSubscription(id: string, sid: string): Promise<EmuResponse> {
    const hook = this.hook(id);
    this.subscription(hook, sid);
    hook.subscriptions = hook.subscriptions.filter((s) => s.id !== sid);
    this.state.changed();
    return { status: 204 };
  }

  private async ping(id: string, sid: string): Promise<EmuResponse> {
    const hook = this.hook(id);
    const sub = this.subscription(hook, sid);
    const triggerId = newTriggerId();
    const hour = new Date();
    hour.setUTCMinutes(0, 0, 0);
    const event: PublishedEvent = { type: sub.type, model: DEFAULTS.model, initialization_time: isoSeconds(hour), forecast_hour: 0 };
    const body = payloadFor(hook, sub, event, triggerId, true, this.options.shape);
    const attempt = await this.scheduler.deliver({ webhook: hook, subscription: sub, type: sub.type, triggerId, body, test: true });
    if (attempt.outcome === 'delivered') return { status: 204 };
    const said =
      attempt.status !== undefined ? `the receiver answered ${attempt.status}${attempt.response ? `: ${attempt.response.slice(0, 120)}` : ''}` : `the receiver could not be reached: ${attempt.error}`;
    throw new HttpError(502, 'ping_failed', `test delivery to ${hook.url} failed: ${said}`);
  }

  private async publish(body: unknown): Promise<EmuResponse> {
    if (!isObject(body)) bad('the body must be a JSON object');
    const type = checkType(body.type);
    const model = body.model === undefined ? DEFAULTS.model : body.model;
    if (typeof model !== 'string' || !model) bad('model must be a string');
    const init = body.initialization_time ?? latestCycle();
    if (typeof init !== 'string' || Number.isNaN(Date.parse(init))) bad('initialization_time must be an ISO 8601 time');
    const fh = body.forecast_hour;
    if (fh !== undefined && (typeof fh !== 'number' || !Number.isInteger(fh) || fh < 0)) bad('forecast_hour must be a whole number of hours');
    if (body.event_type !== undefined && typeof body.event_type !== 'string') bad('event_type must be a string');
    const event: PublishedEvent = {
      type,
      model,
      initialization_time: isoSeconds(init),
      ...(fh !== undefined ? { forecast_hour: fh as number } : type === 'forecast_hour.available' ? { forecast_hour: 0 } : {}),
      ...(typeof body.event_type === 'string' ? { event_type: body.event_type } : {}),
    };
    // the forecast API says it exists from now on, whatever becomes of its deliveries
    this.state.forecasts.published(event, Date.now());
    this.state.changed();
    const notifications = this.scheduler.notificationsFor(event);
    // Every notification is sent at once; the answer waits for the first attempts a little while, so a
    // receiver that hangs delays neither the others nor the caller beyond that.
    const waitMs = this.options.publishWaitMs ?? 3_000;
    const first = await Promise.all(
      notifications.map((n) => {
        const pending = {
          webhook_id: n.webhook.id,
          subscription_id: n.subscription.id,
          trigger_id: n.triggerId,
          attempt: 1,
          url: n.webhook.url,
          outcome: 'pending' as const,
        };
        let timer: NodeJS.Timeout | undefined;
        const wait = new Promise<typeof pending>((resolve) => (timer = setTimeout(() => resolve(pending), waitMs)));
        return Promise.race([this.scheduler.deliver(n), wait]).finally(() => clearTimeout(timer));
      }),
    );
    return {
      status: 202,
      body: { event, trigger_id: notifications[0]?.triggerId ?? null, notifications: notifications.length, deliveries: first },
    };
  }

  private deliveries(q: URLSearchParams): EmuResponse {
    const hook = q.get('webhook_id');
    const trigger = q.get('trigger_id');
    const list = this.state.deliveries.filter((d) => (hook === null || d.webhook_id === hook) && (trigger === null || d.trigger_id === trigger));
    return { status: 200, body: { deliveries: list } };
  }
}
