import { UsageError } from '../errors.js';
import { url } from '../util/parse.js';
import { hourOfDayProblem, SUBSCRIPTION_TYPES } from '../vocabulary.js';

export interface SubscriptionConfig {
  note?: string | null;
  filters?: Record<string, unknown>;
  response_options?: Record<string, unknown> | null;
}

/** The filter and response flags of `subscription add|update`, and the keys of `--subscribe`. */
export interface SubscriptionFlags {
  model?: string[];
  hours?: string[];
  eventType?: string[];
  response?: string | false;
  responseOption?: string[];
  note?: string;
  clearFilters?: boolean;
  clearNote?: boolean;
}

/** `H:MM` hours of day, comma-separated or repeated. */
export function checkHours(values: string[]): string[] {
  const out = values
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);
  for (const h of out) {
    const problem = hourOfDayProblem(h);
    if (problem) throw new UsageError(`${problem}.`, { hint: 'Use values such as 0:00, 6:00, 12:00, 18:30.' });
  }
  return out;
}

function checkType(type: string): string {
  if (!type || /\s/.test(type)) throw new UsageError(`"${type}" is not a subscription type.`, { hint: `Known types: ${SUBSCRIPTION_TYPES.join(', ')}.` });
  return type;
}

const listOf = (values: string[] | undefined) =>
  (values ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);

function parseOptionValue(v: string): unknown {
  if (v === 'true') return true;
  if (v === 'false') return false;
  return v;
}

/** Filters from the flags, or undefined when no filter flag was given. */
export function filtersFrom(flags: SubscriptionFlags): Record<string, unknown> | undefined {
  const filters: Record<string, unknown> = {};
  const models = listOf(flags.model);
  if (models.length) filters.model = models.length === 1 ? models[0] : models;
  if (flags.hours?.length) filters.initialization_time_hours = checkHours(flags.hours);
  const events = listOf(flags.eventType);
  if (events.length) filters.event_type = events;
  return Object.keys(filters).length ? filters : undefined;
}

/** Response options from the flags, `null` for `--no-response`, or undefined. */
export function responseFrom(flags: SubscriptionFlags): Record<string, unknown> | null | undefined {
  if (flags.response === false) {
    if (flags.responseOption?.length) throw new UsageError('--no-response cannot be given with --response-option.');
    return null;
  }
  const options: Record<string, unknown> = {};
  for (const kv of flags.responseOption ?? []) {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new UsageError(`--response-option takes key=value, not "${kv}".`, { hint: 'For example --response-option coordinates=37.77,-122.42' });
    options[kv.slice(0, eq)] = parseOptionValue(kv.slice(eq + 1));
  }
  if (flags.response === undefined) {
    if (Object.keys(options).length) throw new UsageError('--response-option needs --response TYPE (the options belong to a response type).');
    return undefined;
  }
  if (!flags.response.trim()) throw new UsageError('--response needs a type, such as gridded.');
  return Object.keys(options).length ? { type: flags.response, options } : { type: flags.response };
}

/** The body of `subscription add`. */
export function addSubscriptionBody(type: string, flags: SubscriptionFlags): Record<string, unknown> {
  const body: Record<string, unknown> = { subscription_type: checkType(type) };
  if (flags.note !== undefined) body.note = flags.note;
  const filters = filtersFrom(flags);
  if (filters) body.filters = filters;
  const response = responseFrom(flags);
  if (response) body.response_options = response;
  if (response === null) throw new UsageError('--no-response is for `subscription update`; a new subscription has no response unless --response is given.');
  return body;
}

/** The body of `subscription update`: omitted keeps, `{}` clears the filters, `null` removes the response. */
export function updateSubscriptionBody(flags: SubscriptionFlags): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (flags.note !== undefined && flags.clearNote) throw new UsageError('--note and --clear-note cannot be given together.');
  if (flags.note !== undefined) body.note = flags.note;
  if (flags.clearNote) body.note = null;
  const filters = filtersFrom(flags);
  if (filters && flags.clearFilters) throw new UsageError('--clear-filters cannot be given with filter flags (a new set of filters replaces the old one anyway).');
  if (filters) body.filters = filters;
  if (flags.clearFilters) body.filters = {};
  const response = responseFrom(flags);
  if (response !== undefined) body.response_options = response;
  if (Object.keys(body).length === 0) {
    throw new UsageError('Nothing to update.', {
      hint: 'Give at least one of --model, --hours, --event-type, --response, --note, --clear-filters, --no-response, --clear-note.',
    });
  }
  return body;
}

/**
 * `TYPE[:key=value[;key=value]...]` with keys model, hours, event_type,
 * response and note, e.g. `forecast_hour.available:model=wm-6;hours=0:00,12:00;response=gridded`.
 */
export function parseSubscribeSpec(spec: string): { type: string; config: SubscriptionConfig } {
  const colon = spec.indexOf(':');
  const type = checkType((colon === -1 ? spec : spec.slice(0, colon)).trim());
  const flags: SubscriptionFlags = {};
  if (colon !== -1) {
    for (const part of spec.slice(colon + 1).split(';')) {
      if (!part.trim()) continue;
      const eq = part.indexOf('=');
      if (eq <= 0) throw new UsageError(`--subscribe "${spec}": "${part}" is not key=value.`, { hint: SPEC_HINT });
      const key = part.slice(0, eq).trim();
      const value = part.slice(eq + 1).trim();
      // `model=wm-6,hours=0:00`: a comma where a ";" belongs would make "hours=0:00" a model
      if (key !== 'note' && value.includes('=')) {
        throw new UsageError(`--subscribe "${spec}": the value of ${key} ("${value}") holds "=": keys are separated by ";", not ",".`, { hint: SPEC_HINT });
      }
      switch (key) {
        case 'model':
          flags.model = [value];
          break;
        case 'hours':
          flags.hours = [value];
          break;
        case 'event_type':
          flags.eventType = [value];
          break;
        case 'response':
          flags.response = value;
          break;
        case 'note':
          flags.note = value;
          break;
        default:
          throw new UsageError(`--subscribe "${spec}": unknown key "${key}".`, { hint: SPEC_HINT });
      }
    }
  }
  const config: SubscriptionConfig = {};
  if (flags.note !== undefined) config.note = flags.note;
  const filters = filtersFrom(flags);
  if (filters) config.filters = filters;
  const response = responseFrom(flags);
  if (response) config.response_options = response;
  return { type, config };
}

const SPEC_HINT =
  'Form: TYPE[:key=value[;key=value]...], keys model, hours (H:MM,...), event_type, response, note. ' + "Example: --subscribe 'forecast_hour.available:model=wm-6;hours=0:00,12:00;response=gridded'";

export interface CreateFlags {
  url?: string;
  name?: string;
  note?: string;
  inactive?: boolean;
  subscribe?: string[];
}

/**
 * The create body: `--body` first (an object), then the flags over it. The
 * subscriptions go as a map from type to configuration, one per type.
 */
export function createWebhookBody(base: unknown, flags: CreateFlags): { body: Record<string, unknown>; types: string[] } {
  if (base !== undefined && (typeof base !== 'object' || base === null || Array.isArray(base))) {
    throw new UsageError('--body must hold a JSON object.');
  }
  const body: Record<string, unknown> = { ...((base as Record<string, unknown> | undefined) ?? {}) };
  if (flags.url !== undefined) body.url = flags.url;
  if (flags.name !== undefined) body.name = flags.name;
  if (flags.note !== undefined) body.note = flags.note;
  if (flags.inactive) body.active = false;
  if (typeof body.url !== 'string' || !body.url) throw new UsageError('A webhook needs a URL: give --url (or "url" in --body).');
  url(body.url, '--url');

  const subs: Record<string, unknown> = {};
  const seen = new Set<string>();
  const addType = (type: string, config: unknown, from: string) => {
    if (seen.has(type)) {
      throw new UsageError(`The type ${type} appears twice (${from}); a webhook has at most one subscription of each type.`);
    }
    seen.add(type);
    subs[type] = config;
  };
  const given = body.subscriptions;
  if (Array.isArray(given)) {
    for (const s of given as Record<string, unknown>[]) {
      const { subscription_type: t, type: t2, ...rest } = (s ?? {}) as Record<string, unknown>;
      addType(checkType(String(t ?? t2 ?? '')), rest, '--body');
    }
  } else if (given && typeof given === 'object') {
    for (const [t, c] of Object.entries(given)) addType(checkType(t), c, '--body');
  } else if (given !== undefined && given !== null) {
    throw new UsageError('"subscriptions" in --body must be an object keyed by type.');
  }
  const fromFlags = new Set<string>();
  for (const spec of flags.subscribe ?? []) {
    const { type, config } = parseSubscribeSpec(spec);
    if (fromFlags.has(type)) throw new UsageError(`The type ${type} appears twice in --subscribe; a webhook has at most one subscription of each type.`);
    fromFlags.add(type);
    seen.delete(type); // a flag overrides the same type from --body
    addType(type, config, '--subscribe');
  }
  for (const config of Object.values(subs)) {
    const hours = (config as SubscriptionConfig | undefined)?.filters?.initialization_time_hours;
    if (Array.isArray(hours)) checkHours(hours.map(String));
  }
  if (Object.keys(subs).length || given !== undefined) body.subscriptions = subs;
  return { body, types: Object.keys(subs) };
}
