import { resolveBaseUrl, type ResolvedBaseUrl } from '../api/base-url.js';
import { resolveCredentials, type Credentials } from '../api/credentials.js';
import { HttpClient, proxyConfigured } from '../api/http.js';
import { Service } from '../api/service.js';
import { line, type Context } from '../context.js';
import { readSetting } from '../store/settings.js';
import { addSensitive } from '../util/redact.js';

export async function baseUrlFor(ctx: Context): Promise<ResolvedBaseUrl> {
  const needStored = ctx.global.baseUrl === undefined && !ctx.env.WX_BASE_URL;
  const stored = needStored ? await readSetting(ctx.env, 'base-url') : undefined;
  return resolveBaseUrl(ctx.global.baseUrl, ctx.env.WX_BASE_URL, () => stored);
}

export async function serviceFor(ctx: Context): Promise<{ service: Service; base: ResolvedBaseUrl; credentials: Credentials }> {
  if (ctx.serviceFactory) return ctx.serviceFactory(ctx);
  const credentials = resolveCredentials(ctx.env, ctx.global.auth ?? 'auto', () => ctx.clock.now());
  credentials.secrets.forEach(addSensitive);
  const base = await baseUrlFor(ctx);
  const http = new HttpClient({
    baseUrl: base.url,
    credentials,
    timeoutMs: ctx.global.timeoutMs,
    log: ctx.global.verbose ? (text) => line(ctx.stderr, text) : undefined,
    retryBaseMs: ctx.retryBaseMs,
    proxy: proxyConfigured(ctx.env),
  });
  return { service: new Service(http), base, credentials };
}

/** How the key was sent, in words: the scheme, and which variable each part came from. */
export function describeScheme(c: Credentials): string {
  if (c.scheme === 'basic') return `Basic (legacy: the client id from ${c.clientIdFrom}, and a token signed with the key from ${c.keyFrom}, new for each request)`;
  if (c.clientIdFrom === 'the wb_ key') return `Bearer (the current key from ${c.keyFrom}, sent whole)`;
  return `Bearer (the key from ${c.keyFrom})`;
}
