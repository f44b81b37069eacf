/**
 * The one place secrets are taken out of text: every logger and the error
 * printer pass what they write through `redact`.
 */
const sensitive = new Set<string>();

/** Registers a value (an API key, a webhook secret, a token) that must never be printed. */
export function addSensitive(value: string | undefined): void {
  if (value && value.length >= 4) sensitive.add(value);
}

/** The credential of an Authorization header, after its scheme: a key, base64 of `id:key`, a token. */
const CREDENTIAL = /\b(bearer|basic)(\s+)[A-Za-z0-9+/=._~-]{8,}/gi;
/** A JSON Web Token (base64url parts, the first a JSON object: `eyJ`), whole or cut short by a message's length limit. */
const JWT = /\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*)?/g;

/**
 * The text with every registered secret, every credential after `Basic` or `Bearer` (a service may echo
 * the header, in any words) and every token replaced by `***`.
 */
export function redact(text: string, extra: readonly (string | undefined)[] = []): string {
  let out = text;
  for (const value of [...sensitive, ...extra]) {
    if (value && value.length >= 4) out = out.split(value).join('***');
  }
  return out.replace(CREDENTIAL, '$1$2***').replace(JWT, '***');
}
