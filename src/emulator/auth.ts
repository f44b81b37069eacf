import { randomBytes, timingSafeEqual } from 'node:crypto';
import { currentKeyParts, isClientId } from '../api/credentials.js';
import { UsageError } from '../errors.js';

/** The emulator's credentials: the key it issued (a current `wb_` key unless told), and its two halves. */
export interface EmulatorCredentials {
  /** What it prints for WX_API_KEY / WB_API_KEY: `--api-key` as given, else a current key. */
  apiKey: string;
  clientId: string;
  /** The secret half: the legacy key, or what a `wb_` key holds after its client id. */
  secret: string;
  /** The current form: `wb_` + base64(`client_id:secret`). */
  currentKey: string;
}

/** How far a legacy token's `iat` may be from the emulator's clock, either way. */
export const TOKEN_WINDOW_SECONDS = 300;

/**
 * The credentials an emulator accepts. By default it issues a current key, `wb_` + base64 of
 * `<client id>:<32 random hex>`, as the live service does, so the service's own client works against it
 * unchanged. `--api-key` sets the key: a `wb_` key (its client id must agree with `--client-id`, if one
 * is given), or a legacy key that goes with `--client-id` (a 35-character one may begin with `wb_`).
 */
export function emulatorCredentials(apiKey: string | undefined, clientId: string | undefined): EmulatorCredentials {
  if (apiKey !== undefined) {
    const current = currentKeyParts(apiKey, '--api-key', clientId);
    if (current) {
      if (clientId !== undefined && clientId !== current.clientId) throw new UsageError(`--client-id ${clientId} is not the client id in --api-key (${current.clientId}).`);
      return { apiKey, clientId: current.clientId, secret: current.secret, currentKey: apiKey };
    }
  }
  const id = clientId ?? 'emulator';
  if (!isClientId(id)) throw new UsageError(`--client-id must be lowercase letters, digits and _, or a UUID (as the service issues them), not "${id}".`);
  const secret = apiKey ?? randomBytes(16).toString('hex');
  const currentKey = `wb_${Buffer.from(`${id}:${secret}`, 'utf8').toString('base64')}`;
  return { apiKey: apiKey ?? currentKey, clientId: id, secret, currentKey };
}

/** Byte-for-byte equality in constant time; texts of different byte lengths (non-ASCII included) are simply not equal. */
function same(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Checks an Authorization header as the live service does: Bearer with the key (or its current
 * `wb_` form); Basic with the client id and, as password, a token signed with the key (HS256,
 * `client_id`, `iat` within 5 minutes either way) or the key itself (as the service's own text
 * describes). Returns undefined when accepted, else what failed, in words.
 */
export async function authProblem(header: string | undefined, creds: EmulatorCredentials, nowMs: number = Date.now()): Promise<string | undefined> {
  if (!header) return 'no Authorization header: send Authorization: Bearer <API key>';
  const space = header.indexOf(' ');
  const scheme = header.slice(0, space).toLowerCase(); // schemes are case-insensitive (RFC 9110)
  if (scheme === 'bearer') {
    const token = header.slice(space + 1);
    return same(token, creds.apiKey) || same(token, creds.currentKey) || same(token, creds.secret) ? undefined : "the Bearer key is not this emulator's key";
  }
  if (scheme !== 'basic') return 'the Authorization scheme is neither Bearer nor Basic';
  const decoded = Buffer.from(header.slice(space + 1), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return 'Basic credentials must be client_id:password';
  const user = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (!same(user, creds.clientId)) return `Basic auth names client ${JSON.stringify(user.slice(0, 60))}, not this emulator's client id`;
  if (same(password, creds.secret)) return undefined;
  if (password.split('.').length !== 3) return 'the Basic password is neither the key nor a token (a JSON Web Token signed with the key)';
  const { jwtVerify, errors } = await import('jose');
  let claims: Record<string, unknown>;
  try {
    ({ payload: claims } = await jwtVerify(password, Buffer.from(creds.secret, 'utf8'), { algorithms: ['HS256'] }));
  } catch (err) {
    if (err instanceof errors.JWSSignatureVerificationFailed) return "the token's signature does not verify with this emulator's key (is it signed with the right key?)";
    if (err instanceof errors.JOSEAlgNotAllowed) return 'the token is not signed with HS256';
    return `the token cannot be read (${(err as Error).message})`;
  }
  if (claims.client_id !== creds.clientId) return `the token's client_id (${JSON.stringify(claims.client_id)}) is not the client id it was sent with`;
  if (typeof claims.iat !== 'number') return 'the token has no iat (the time it was made, in Unix seconds)';
  const off = Math.floor(nowMs / 1000) - claims.iat;
  if (Math.abs(off) > TOKEN_WINDOW_SECONDS) {
    return `the token's iat is ${Math.abs(off)} s ${off > 0 ? 'old' : 'in the future'}; at most ${TOKEN_WINDOW_SECONDS} s either way is accepted (mint one per request)`;
  }
  return undefined;
}
