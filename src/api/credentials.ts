import { AuthError, UsageError } from '../errors.js';

/**
 * How the API key is sent. `auto` does what the service's own client does (SERVICE.md, appendix):
 * a current `wb_` key whole as Bearer; a client id and a legacy key as Basic with a signed token;
 * anything else as Bearer.
 */
export type AuthScheme = 'auto' | 'bearer' | 'basic';

/** Where a value was read from, for `auth status` and error messages. */
export type KeyVariable = 'WX_API_KEY' | 'WB_API_KEY';
export type ClientIdSource = 'WX_CLIENT_ID' | 'WB_CLIENT_ID' | 'the wb_ key';

export interface Credentials {
  /** The scheme chosen. */
  scheme: 'bearer' | 'basic';
  /** The Authorization header's value for one request: a legacy Basic token is minted for each. Never print it. */
  authorization(): Promise<string>;
  /** The client id: the one sent with Basic, or the one a `wb_` key holds. */
  clientId?: string;
  clientIdFrom?: ClientIdSource;
  keyFrom: KeyVariable;
  /** The key, and the secret half of a `wb_` key: for redaction only. */
  secrets: string[];
}

const HOW_TO_SET =
  'Set it in your shell: `export WX_API_KEY=...` (macOS/Linux; add the line to ~/.zshrc or ~/.bashrc to keep it), ' +
  'or on Windows `setx WX_API_KEY "..."` (PowerShell for this session: `$env:WX_API_KEY = "..."`). ' +
  "WB_API_KEY, the name the service's own client uses, is read too.";

const CLIENT_ID = /^[a-z0-9_]+$/;
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const BASE64 = /^[A-Za-z0-9+/]+$/;

/** Whether a client id has one of the two forms the service issues: lowercase letters, digits and `_`, or a UUID v4. */
export function isClientId(text: string): boolean {
  return CLIENT_ID.test(text) || UUID_V4.test(text);
}

/** How long a legacy key is: 32 characters, or 35 (which may begin with `wb_` without being a current key). */
const LEGACY_LENGTHS = [32, 35];

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * `client_id:secret` in a `wb_` key, or undefined when what follows `wb_` is not exactly that: strict
 * base64 (padding optional, but then right; no stray bits: it must encode back to itself), valid UTF-8,
 * and a client id of the documented form before the first colon, a secret after it. The one decoder of
 * the CLI and the emulator. (Decoded leniently, as Buffer.from does, about 1 in 9 legacy keys of `wb_` +
 * 32 hexadecimal characters read as a current key with a garbled client id: #32.13.)
 */
export function decodeCurrentKey(key: string): { clientId: string; secret: string } | undefined {
  if (!key.startsWith('wb_')) return undefined;
  const encoded = key.slice(3);
  const bare = encoded.replace(/={1,2}$/, '');
  if (!BASE64.test(bare) || bare.length % 4 === 1 || (bare !== encoded && encoded.length % 4 !== 0)) return undefined;
  const bytes = Buffer.from(bare, 'base64');
  if (bytes.toString('base64').replace(/=+$/, '') !== bare) return undefined;
  let decoded: string;
  try {
    decoded = UTF8.decode(bytes);
  } catch {
    return undefined;
  }
  const colon = decoded.indexOf(':');
  if (colon <= 0 || colon === decoded.length - 1) return undefined;
  const clientId = decoded.slice(0, colon);
  return isClientId(clientId) ? { clientId, secret: decoded.slice(colon + 1) } : undefined;
}

/**
 * A current key, `wb_` + base64 (padding optional) of `client_id:secret`: its two halves, or
 * undefined if it is not one: no `wb_`, or (with a client id given) a 35-character legacy key that
 * happens to begin with `wb_`, as the service's own client takes it. Any other `wb_` key that does not
 * decode is a usage error.
 */
export function currentKeyParts(key: string, variable: string, clientId?: string): { clientId: string; secret: string } | undefined {
  if (!key.startsWith('wb_')) return undefined;
  const parts = decodeCurrentKey(key);
  if (parts) return parts;
  if (clientId !== undefined && LEGACY_LENGTHS.includes(key.length)) return undefined;
  throw new UsageError(`${variable} starts with wb_ but is not a current key: what follows wb_ must be base64 of "client_id:secret".`, {
    hint: `Copy the key again from the service; a legacy key (32 or 35 characters) goes with a client id in WX_CLIENT_ID or WB_CLIENT_ID.`,
  });
}

/**
 * A legacy Basic password: a JSON Web Token signed with the key (HS256), claims `client_id` and `iat`
 * (now, in whole seconds), as the service's own client mints them. `jose` is loaded only here.
 */
export async function legacyToken(clientId: string, key: string, nowMs: number = Date.now()): Promise<string> {
  const { SignJWT } = await import('jose');
  return new SignJWT({ client_id: clientId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt(Math.floor(nowMs / 1000))
    .sign(Buffer.from(key, 'utf8'));
}

/**
 * The credentials from the environment: the key from WX_API_KEY, else WB_API_KEY; the client id (legacy
 * keys only) from WX_CLIENT_ID, else WB_CLIENT_ID. Everything is checked before any request.
 */
export function resolveCredentials(env: Record<string, string | undefined>, scheme: AuthScheme = 'auto', now: () => number = Date.now): Credentials {
  const keyFrom: KeyVariable = env.WX_API_KEY !== undefined ? 'WX_API_KEY' : 'WB_API_KEY';
  const raw = env[keyFrom]?.trim();
  if (!raw) {
    throw new AuthError(env[keyFrom] === undefined ? 'No API key: neither WX_API_KEY nor WB_API_KEY is set.' : `${keyFrom} is empty.`, { hint: HOW_TO_SET });
  }
  const idFrom: ClientIdSource | undefined = env.WX_CLIENT_ID?.trim() ? 'WX_CLIENT_ID' : env.WB_CLIENT_ID?.trim() ? 'WB_CLIENT_ID' : undefined;
  const clientId = idFrom ? env[idFrom]!.trim() : undefined;
  if (clientId !== undefined && !isClientId(clientId)) {
    throw new UsageError(`${idFrom} is not a client id: it must be lowercase letters, digits and _, or a UUID.`, {
      hint: `Copy it again from the service. A current key (wb_...) needs no client id: unset ${idFrom}.`,
    });
  }
  const current = currentKeyParts(raw, keyFrom, clientId);
  const secrets = [raw, ...(current ? [current.secret] : [])];
  const bearer = (): Credentials => ({
    scheme: 'bearer',
    authorization: async () => `Bearer ${raw}`,
    clientId: current?.clientId,
    clientIdFrom: current ? 'the wb_ key' : undefined,
    keyFrom,
    secrets,
  });
  const basic = (id: string, from: ClientIdSource, signingKey: string): Credentials => ({
    scheme: 'basic',
    authorization: async () => `Basic ${Buffer.from(`${id}:${await legacyToken(id, signingKey, now())}`, 'utf8').toString('base64')}`,
    clientId: id,
    clientIdFrom: from,
    keyFrom,
    secrets,
  });
  if (scheme === 'bearer') return bearer();
  if (scheme === 'basic') {
    if (!clientId) {
      throw new UsageError('--auth basic needs a client id, and neither WX_CLIENT_ID nor WB_CLIENT_ID is set.', {
        hint: current
          ? `${keyFrom} is a current key (wb_...): it needs no client id and is sent as Bearer; drop --auth basic.`
          : 'Set WX_CLIENT_ID (or WB_CLIENT_ID) to your client id for a legacy key, or drop --auth basic to send the key as Bearer.',
      });
    }
    // a current key forced into Basic: its secret half is the legacy key, and its client id must agree
    if (current && current.clientId !== clientId) {
      throw new UsageError(`${idFrom} (${clientId}) is not the client id in ${keyFrom} (${current.clientId}).`, { hint: `A current key needs no client id: drop --auth basic, or unset ${idFrom}.` });
    }
    return basic(clientId, idFrom!, current ? current.secret : raw);
  }
  // auto, as the service's own client does
  if (current) return bearer();
  if (clientId) return basic(clientId, idFrom!, raw);
  return bearer();
}
