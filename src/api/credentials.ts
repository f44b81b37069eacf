import { AuthError, UsageError } from '../errors.js';

/** How the key is sent: `auto` chooses as the service's own client does. */
export type AuthScheme = 'auto' | 'bearer' | 'basic';

export interface Credentials {
  scheme: AuthScheme;
  /** The full Authorization header value. Never print it. */
  authorization: string;
  /** The client id, when the scheme carries one (Basic). */
  clientId?: string;
  /** The key itself, for redaction. */
  key: string;
}

const HOW_TO_SET =
  'Set it in your shell: `export WX_API_KEY=...` (macOS/Linux; add the line to ~/.zshrc or ~/.bashrc to keep it), ' +
  'or on Windows `setx WX_API_KEY "..."` (PowerShell for this session: `$env:WX_API_KEY = "..."`).';

/** Splits a combined `wb_` + base64(`client_id:key`) key, or returns undefined. */
export function splitCombinedKey(value: string): { clientId: string; key: string } | undefined {
  if (!value.startsWith('wb_')) return undefined;
  const decoded = Buffer.from(value.slice(3), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0 || colon === decoded.length - 1) return undefined;
  return { clientId: decoded.slice(0, colon), key: decoded.slice(colon + 1) };
}

/** Builds the Authorization header from the environment; the key is read from `WX_API_KEY` only. */
export function resolveCredentials(env: Record<string, string | undefined>, scheme: AuthScheme = 'bearer'): Credentials {
  const raw = env.WX_API_KEY?.trim();
  if (!raw) {
    throw new AuthError(env.WX_API_KEY === undefined ? 'WX_API_KEY is not set.' : 'WX_API_KEY is empty.', { hint: HOW_TO_SET });
  }
  if (scheme === 'bearer') {
    return { scheme, authorization: `Bearer ${raw}`, key: raw };
  }
  const combined = splitCombinedKey(raw);
  const clientId = env.WX_CLIENT_ID?.trim() || combined?.clientId;
  const key = env.WX_CLIENT_ID?.trim() ? raw : (combined?.key ?? raw);
  if (!clientId) {
    throw new UsageError('--auth basic needs a client id: WX_CLIENT_ID is not set and WX_API_KEY is not a combined wb_ key.', {
      hint: 'Set WX_CLIENT_ID to your client id, or drop --auth basic to use the recommended Bearer scheme.',
    });
  }
  const token = Buffer.from(`${clientId}:${key}`, 'utf8').toString('base64');
  return { scheme, authorization: `Basic ${token}`, clientId, key };
}
