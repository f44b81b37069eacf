/**
 * The one place secrets are taken out of text: every logger and the error
 * printer pass what they write through `redact`.
 */
const sensitive = new Set<string>();
/** Every form of every registered value, as one pattern, and the texts one of them must hold; made again when a value is added. */
let forms: { pattern: RegExp; needles: RegExp } | undefined;

/** Registers a value (an API key, a webhook secret, a token) that must never be printed. */
export function addSensitive(value: string | undefined): void {
  if (value && value.length >= 4 && !sensitive.has(value)) {
    sensitive.add(value);
    forms = undefined;
  }
}

/** The credential of an Authorization header, after its scheme: a key, base64 of `id:key`, a token. */
const CREDENTIAL = /\b(bearer|basic)(\s+)[A-Za-z0-9+/=._~-]{8,}/gi;
/** A JSON Web Token (base64url parts, the first a JSON object: `eyJ`), whole or cut short by a message's length limit. */
const JWT = /\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*)?/g;

/**
 * The text with every registered secret (in any of the forms below), every credential after `Basic` or
 * `Bearer` (a service may echo the header, in any words) and every token replaced by `***`.
 */
export function redact(text: string, extra: readonly (string | undefined)[] = []): string {
  let out = text;
  for (const value of extra) {
    if (value && value.length >= 4) out = out.split(value).join('***');
  }
  if (sensitive.size) {
    forms ??= compile([...sensitive].flatMap(formsOf));
    // the pattern is long (~7 µs on a line of 250 characters): it runs only on a text that holds a piece
    // one of its forms always has, which a pattern of plain words finds in ~0.2 µs
    if (forms.needles.test(out)) out = out.replace(forms.pattern, '***');
  }
  return out.replace(CREDENTIAL, '$1$2***').replace(JWT, '***');
}

/** A form of a value: its pattern, and a piece of text that every match of it holds (none: the pattern is always run). */
interface Form {
  pattern: string;
  needle?: string;
}

/** Below this, a needle would be in too many texts to save anything. */
const NEEDLE_MIN = 6;

function compile(list: Form[]): { pattern: RegExp; needles: RegExp } {
  const patterns = [...new Set(list.map((f) => f.pattern))].sort((a, b) => b.length - a.length);
  const always = list.some((f) => f.needle === undefined);
  return { pattern: new RegExp(patterns.join('|'), 'g'), needles: always ? /(?:)/ : new RegExp([...new Set(list.map((f) => escaped(f.needle!)))].join('|')) };
}

/** The longest run of `text` that a form writes as it is (letters, digits, `-._~`), when it is long enough. */
function needleOf(text: string): string | undefined {
  const longest = (text.match(/[A-Za-z0-9\-._~]+/g) ?? []).reduce((a, b) => (b.length > a.length ? b : a), '');
  return longest.length >= NEEDLE_MIN ? longest : undefined;
}

/** Below this, a value is taken out only as it is: its encodings would be short enough to turn up by chance. */
const ENCODED_MIN = 12;

/**
 * The forms a value takes where an app, a proxy or a log may have put it (a pattern each), so that none
 * of them gets past: the value as it is; without a `whsec_`- or `wb_`-like prefix; each of these
 * URL-encoded (once or twice), JSON-escaped (`\/`, `\u002f`), or mixed; in hexadecimal (either case); in
 * base64 and base64url, alone or inside a longer base64 text (all three alignments); and for a value whose
 * rest is base64 (a webhook secret's key, a `wb_` key's `client:secret`), its bytes in hexadecimal and
 * base64url.
 */
function formsOf(value: string): Form[] {
  if (value.length < ENCODED_MIN) return [{ pattern: escaped(value), needle: value }];
  const texts = new Set([value]);
  const prefixed = /^[A-Za-z][A-Za-z0-9]*_(.+)$/.exec(value);
  if (prefixed && prefixed[1]!.length >= ENCODED_MIN) texts.add(prefixed[1]!);
  const out: Form[] = [];
  for (const text of texts) {
    const bytes = Buffer.from(text, 'utf8');
    out.push(spelled(text), ...hex(bytes), ...base64Forms(bytes));
    const decoded = base64Bytes(text);
    if (decoded && decoded.length >= ENCODED_MIN) out.push(...hex(decoded), spelled(decoded.toString('base64url')), ...base64Forms(decoded));
  }
  return out;
}

/** A pattern that matches `text` exactly. */
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/**
 * A pattern for `text` in which each character other than a letter, a digit or `-._~` may also be
 * percent-encoded (in either case, once or twice), or JSON-escaped (`\u002f`, and `\/` for a slash).
 */
function spelled(text: string): Form {
  let out = '';
  for (const ch of text) {
    if (/[A-Za-z0-9\-._~]/.test(ch) || ch.codePointAt(0)! > 0x7f) {
      out += escaped(ch);
      continue;
    }
    const code = ch.charCodeAt(0).toString(16).padStart(2, '0');
    const either = (h: string) => [...h].map((c) => (/[a-f]/.test(c) ? `[${c}${c.toUpperCase()}]` : c)).join('');
    out += `(?:${escaped(ch)}|%(?:25)?${either(code)}|\\\\u00${either(code)}${ch === '/' ? '|\\\\/' : ''})`;
  }
  return { pattern: out, needle: needleOf(text) };
}

/** Bytes in hexadecimal: in lower case, in upper case, and in any mix of the two (found only where a run of either case is). */
function hex(bytes: Buffer): Form[] {
  const lower = bytes.toString('hex');
  const pattern = [...lower].map((c) => (/[a-f]/.test(c) ? `[${c}${c.toUpperCase()}]` : c)).join('');
  return [
    { pattern, needle: lower.slice(0, 16) },
    { pattern, needle: lower.slice(0, 16).toUpperCase() },
  ];
}

/**
 * Patterns for `bytes` in base64 and base64url: the whole, and the part of it that stays the same
 * wherever the bytes stand in a longer text (one for each of the three places a byte can fall in a
 * group of three), so that a secret inside a larger base64 blob (an Authorization header, a JSON
 * document encoded whole) is found too.
 */
function base64Forms(bytes: Buffer): Form[] {
  const out: Form[] = [];
  for (const shift of [0, 1, 2]) {
    // with `shift` bytes before it, the first group that is all ours starts at (3 - shift) % 3
    const from = (3 - shift) % 3;
    const whole = Math.floor((bytes.length - from) / 3) * 3;
    const inner = bytes.subarray(from, from + whole);
    for (const alphabet of ['base64', 'base64url'] as const) {
      const text = inner.toString(alphabet).replace(/=+$/, '');
      if (text.length >= ENCODED_MIN) out.push(spelled(text));
    }
  }
  return out;
}

/** The bytes `text` stands for when it is base64 or base64url (padding optional), else undefined. */
function base64Bytes(text: string): Buffer | undefined {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text) || text.replace(/=+$/, '').length % 4 === 1) return undefined;
  return Buffer.from(text, text.includes('-') || text.includes('_') ? 'base64url' : 'base64');
}
