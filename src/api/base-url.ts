import { UsageError } from '../errors.js';
import { urlProblem } from '../vocabulary.js';

export type BaseUrlSource = 'flag' | 'env' | 'setting';

export interface ResolvedBaseUrl {
  url: string;
  source: BaseUrlSource;
}

/** Checks an absolute http(s) URL and returns it without a trailing slash. */
export function normalizeBaseUrl(text: string, where: string): string {
  const problem = urlProblem(text.trim());
  if (problem) throw new UsageError(`${where} ${problem}: "${text}".`, { hint: 'Give an absolute http(s) address such as https://api.example.com or http://127.0.0.1:8788.' });
  const u = new URL(text.trim());
  if (u.username || u.password) {
    throw new UsageError(`${where} must not carry credentials; the API key is read from WX_API_KEY.`);
  }
  if (u.search || u.hash) {
    throw new UsageError(`${where} must not have a query or fragment: "${text}".`);
  }
  return u.toString().replace(/\/+$/, '');
}

/**
 * `--base-url`, else `WX_BASE_URL`, else the stored setting; `stored` is only
 * called when the first two are absent (it may load the settings file).
 */
export function resolveBaseUrl(flag: string | undefined, env: string | undefined, stored: () => string | undefined): ResolvedBaseUrl {
  if (flag !== undefined) return { url: normalizeBaseUrl(flag, '--base-url'), source: 'flag' };
  if (env) return { url: normalizeBaseUrl(env, 'WX_BASE_URL'), source: 'env' };
  const setting = stored();
  if (setting) return { url: normalizeBaseUrl(setting, 'The stored base-url setting'), source: 'setting' };
  throw new UsageError('No service address is set.', {
    hint: 'Pass --base-url URL, or set WX_BASE_URL, or store one with `wxhooks config set base-url URL`. ' + 'To work offline, start a local copy of the service with `wxhooks emulator`.',
  });
}
