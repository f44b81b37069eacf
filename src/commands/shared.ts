import { resolveBaseUrl, type ResolvedBaseUrl } from '../api/base-url.js';
import { resolveCredentials } from '../api/credentials.js';
import { HttpClient } from '../api/http.js';
import { Service } from '../api/service.js';
import { line, type AuthScheme, type Context } from '../context.js';
import { configDir } from '../store/paths.js';
import { SecretStore } from '../store/secrets.js';
import { addSensitive } from '../util/redact.js';

/** The stored setting, read only when neither the flag nor the variable gave a value. */
async function storedSetting(ctx: Context, key: string): Promise<string | undefined> {
  const { Settings } = await import('../store/settings.js');
  try {
    return new Settings(ctx.env).get(key);
  } catch {
    return undefined;
  }
}

export async function baseUrlFor(ctx: Context): Promise<ResolvedBaseUrl> {
  const needStored = ctx.global.baseUrl === undefined && !ctx.env.WX_BASE_URL;
  const stored = needStored ? await storedSetting(ctx, 'base-url') : undefined;
  return resolveBaseUrl(ctx.global.baseUrl, ctx.env.WX_BASE_URL, () => stored);
}

export async function serviceFor(ctx: Context): Promise<{ service: Service; base: ResolvedBaseUrl; scheme: AuthScheme }> {
  const scheme: AuthScheme = ctx.global.auth ?? 'bearer';
  const credentials = resolveCredentials(ctx.env, scheme);
  addSensitive(credentials.key);
  addSensitive(ctx.env.WX_API_KEY?.trim());
  const base = await baseUrlFor(ctx);
  const http = new HttpClient({
    baseUrl: base.url,
    credentials,
    timeoutMs: ctx.global.timeoutMs,
    log: ctx.global.verbose ? (text) => line(ctx.stderr, text) : undefined,
    retryBaseMs: ctx.env.WXHOOKS_RETRY_BASE_MS ? Number(ctx.env.WXHOOKS_RETRY_BASE_MS) : undefined,
  });
  return { service: new Service(http), base, scheme };
}

export function secretStoreFor(ctx: Context): SecretStore {
  return new SecretStore(configDir(ctx.env));
}
