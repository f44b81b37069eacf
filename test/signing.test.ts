import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { Verifier, signDelivery, verifyDelivery, type VerifyFailure } from '../src/signing/index.js';
import { generateSecret } from '../src/signing/sign.js';
import { LAYOUTS, type Layout } from '../src/signing/layouts.js';
import { hmac } from '../src/signing/hmac.js';
import { parseTimestamp } from '../src/signing/timestamp.js';

const vector = JSON.parse(readFileSync(new URL('./fixtures/standard-webhooks-vector.json', import.meta.url), 'utf8')) as {
  secret: string;
  id: string;
  timestamp: number;
  payload: string;
  signature: string;
};

const SECRET = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
const NOW = 1_790_000_000_000; // ms
const TS = NOW / 1000;
const BODY = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', subscription_id: '12', trigger_id: 'trg_1', data: { model: 'wm-6' } }));

function delivery(overrides: { body?: Buffer; ts?: number | string; id?: string; secret?: string } = {}) {
  const body = overrides.body ?? BODY;
  const ts = overrides.ts ?? TS;
  const headers: Record<string, string> = { ...signDelivery({ secret: overrides.secret ?? SECRET, body, triggerId: overrides.id ?? 'trg_1', timestamp: Number(ts) }) };
  if (typeof ts === 'string') headers['Webhook-Timestamp'] = ts;
  return { headers, body };
}

function verify(headers: Record<string, string | undefined>, body: Buffer = BODY, extra: Partial<Parameters<typeof verifyDelivery>[0]> = {}) {
  return verifyDelivery({ secret: SECRET, headers, body, now: NOW, ...extra });
}

const failure = (r: ReturnType<typeof verifyDelivery>) => {
  expect(r.ok).toBe(false);
  return r as VerifyFailure;
};

describe('timestamps', () => {
  it.each([
    ['1790000000', 1790000000],
    ['1790000000123', 1790000000],
    ['179000000', undefined],
    ['17900000001234', undefined],
    [' 1790000000', undefined],
    ['+1790000000', undefined],
    ['1.79e9', undefined],
    ['1790000000.5', undefined],
    ['\u0661\u0667\u0669\u0660\u0660\u0660\u0660\u0660\u0660\u0660', undefined],
    ['０１２３４５６７８９', undefined],
  ])('parseTimestamp(%j) is %j: 10 to 13 ASCII digits, nothing else', (text, expected) => {
    expect(parseTimestamp(text)).toBe(expected);
  });
});

describe('published vectors', () => {
  it('passes the Standard Webhooks test vector', () => {
    const headers = { 'Trigger-Id': vector.id, 'Webhook-Timestamp': String(vector.timestamp), 'Webhook-Signature': vector.signature };
    const r = verifyDelivery({ secret: vector.secret, headers, body: Buffer.from(vector.payload), now: vector.timestamp * 1000 });
    expect(r).toMatchObject({ ok: true, layout: 'standard', triggerId: vector.id });
    expect(signDelivery({ secret: vector.secret, body: vector.payload, triggerId: vector.id, timestamp: vector.timestamp })['Webhook-Signature']).toBe(vector.signature);
  });

  it('agrees with the standardwebhooks package both ways', () => {
    const wh = new Webhook(SECRET);
    const now = new Date();
    const sig = wh.sign('trg_9', now, BODY.toString());
    const headers = { 'Trigger-Id': 'trg_9', 'Webhook-Timestamp': String(Math.floor(+now / 1000)), 'Webhook-Signature': sig };
    expect(verifyDelivery({ secret: SECRET, headers, body: BODY }).ok).toBe(true);
    const ours = signDelivery({ secret: SECRET, body: BODY, triggerId: 'trg_9' });
    expect(() => wh.verify(BODY.toString(), { 'webhook-id': ours['Trigger-Id'], 'webhook-timestamp': ours['Webhook-Timestamp'], 'webhook-signature': ours['Webhook-Signature'] })).not.toThrow();
  });

  it("verifies a header made by Stripe's own library, and pins the stripe layout", () => {
    const stripe = new Stripe('sk_test_unused');
    const secret = 'whsec_stripe_style_secret_value';
    const header = stripe.webhooks.generateTestHeaderString({ payload: BODY.toString(), secret, timestamp: TS });
    const headers = { 'Trigger-Id': 'evt_1', 'Webhook-Timestamp': String(TS), 'Webhook-Signature': header };
    expect(verifyDelivery({ secret, headers, body: BODY, now: NOW })).toMatchObject({ ok: true, layout: 'stripe' });
    const v = new Verifier({ secret });
    expect(v.verify(headers, BODY, NOW)).toMatchObject({ ok: true, pinnedNow: true });
    expect(v.pinned).toBe('stripe');
    // once pinned, a standard signature no longer passes
    const std = delivery({ secret });
    expect(v.verify(std.headers, std.body, NOW).ok).toBe(false);
  });
});

describe('layouts', () => {
  it.each(['standard', 'stripe', 'hex-timestamp'] as const)('%s round-trips and is found by auto', (layout) => {
    const headers = signDelivery({ secret: SECRET, body: BODY, triggerId: 'trg_1', timestamp: TS, layout });
    expect(verify(headers)).toMatchObject({ ok: true, layout });
    expect(verify(headers, BODY, { scheme: layout })).toMatchObject({ ok: true, layout });
  });

  it('hex-body is accepted only when pinned, with a warning; auto says why it refused', () => {
    const headers = signDelivery({ secret: SECRET, body: BODY, triggerId: 'trg_1', timestamp: TS, layout: 'hex-body' });
    const auto = failure(verify(headers));
    expect(auto.reason).toBe('no_match');
    expect(auto.message).toContain('in the hex-body layout, which does not sign the timestamp');
    expect(auto.hint).toContain('--scheme hex-body');
    const pinned = verify(headers, BODY, { scheme: 'hex-body' });
    expect(pinned).toMatchObject({ ok: true, layout: 'hex-body' });
    expect((pinned as { warning?: string }).warning).toContain('replayed');
  });

  it('a plain hex HMAC over timestamp.body with a plain secret (hex-timestamp)', () => {
    const secret = 'plain-shared-secret';
    const sig = createHmac('sha256', secret).update(`${TS}.`).update(BODY).digest('hex');
    const r = verifyDelivery({ secret, headers: { 'trigger-id': 'x', 'webhook-timestamp': String(TS), 'webhook-signature': sig }, body: BODY, now: NOW });
    expect(r).toMatchObject({ ok: true, layout: 'hex-timestamp' });
  });

  it('key rotation: any of the listed signatures, and any of the secrets, may match', () => {
    const old = delivery({ secret: 'whsec_' + Buffer.alloc(32, 1).toString('base64') });
    const cur = delivery();
    const both = { ...cur.headers, 'Webhook-Signature': `${old.headers['Webhook-Signature']} ${cur.headers['Webhook-Signature']}` };
    expect(verify(both).ok).toBe(true);
    const r = verifyDelivery({ secret: ['whsec_' + Buffer.alloc(32, 9).toString('base64'), SECRET], headers: cur.headers, body: BODY, now: NOW });
    expect(r).toMatchObject({ ok: true, secretIndex: 1 });
  });

  it('generates whsec_ secrets of 32 random bytes', () => {
    const s = generateSecret();
    expect(s).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(s.slice(6), 'base64').length).toBe(32);
    expect(generateSecret()).not.toBe(s);
  });
});

describe('adversarial deliveries', () => {
  it('a body changed by one byte', () => {
    const { headers } = delivery();
    const changed = Buffer.from(BODY);
    changed[changed.length - 3] = changed[changed.length - 3]! ^ 1;
    expect(failure(verify(headers, changed)).reason).toBe('no_match');
  });

  it('an invalid UTF-8 byte swapped for another (raw bytes are what is signed)', () => {
    const withBad = Buffer.concat([Buffer.from('{"note":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    const { headers } = delivery({ body: withBad });
    expect(verify(headers, withBad).ok).toBe(true);
    const swapped = Buffer.concat([Buffer.from('{"note":"'), Buffer.from([0xfe]), Buffer.from('"}')]);
    // both decode to U+FFFD as text: only a byte-exact check tells them apart
    expect(swapped.toString('utf8')).toBe(withBad.toString('utf8'));
    expect(failure(verify(headers, swapped)).reason).toBe('no_match');
  });

  it('the timestamp or the Trigger-Id changed under an unchanged signature', () => {
    const { headers } = delivery();
    expect(failure(verify({ ...headers, 'Webhook-Timestamp': String(TS - 1) })).reason).toBe('no_match');
    expect(failure(verify({ ...headers, 'Trigger-Id': 'trg_2' })).reason).toBe('no_match');
  });

  it('the wrong secret says what to check', () => {
    const { headers } = delivery({ secret: 'whsec_' + Buffer.alloc(32, 3).toString('base64') });
    const f = failure(verify(headers));
    expect(f.reason).toBe('no_match');
    expect(f.message).toContain('No signature matched');
    expect(f.hint).toContain('secret');
  });

  it('a secret with stray whitespace is pointed out', () => {
    const { headers } = delivery();
    const f = failure(verifyDelivery({ secret: SECRET + '\n', headers, body: BODY, now: NOW }));
    expect(f.hint).toContain('whitespace');
  });

  it('a truncated signature', () => {
    const { headers } = delivery();
    const sig = headers['Webhook-Signature']!;
    const f = failure(verify({ ...headers, 'Webhook-Signature': sig.slice(0, sig.length - 8) }));
    expect(f.reason).toBe('malformed_signature');
    expect(f.message).toMatch(/truncated|not base64/);
  });

  it.each([
    ['V1,', 'V1,'],
    ['an empty entry', 'v1,'],
    ['no separator', 'abcdef'],
    ['only spaces between', '   '],
  ])('%s is rejected, never a crash', (_name, value) => {
    const { headers } = delivery();
    const r = verify({ ...headers, 'Webhook-Signature': value });
    expect(r.ok).toBe(false);
    expect(['malformed_signature', 'missing_header']).toContain((r as VerifyFailure).reason);
  });

  it('a 10 KB signature header is rejected', () => {
    const { headers } = delivery();
    const big = `${headers['Webhook-Signature']} ${'v1,AAAA '.repeat(1300)}`;
    const f = failure(verify({ ...headers, 'Webhook-Signature': big }));
    expect(f.reason).toBe('malformed_signature');
    expect(f.message).toContain('bytes long');
  });

  it('timestamps: 299 s old passes, 301 s old and 301 s ahead fail, 300 passes', () => {
    for (const [offset, ok] of [
      [-299, true],
      [-300, true],
      [300, true],
      [-301, false],
      [301, false],
    ] as const) {
      const d = delivery({ ts: TS + offset });
      const r = verify(d.headers);
      expect(r.ok, `offset ${offset}`).toBe(ok);
      if (!ok) {
        expect((r as VerifyFailure).reason).toBe('timestamp_out_of_window');
        expect((r as VerifyFailure).message).toContain(offset < 0 ? '301 s old' : '301 s in the future');
        expect((r as VerifyFailure).skewSeconds).toBe(-offset);
      }
    }
  });

  it('milliseconds are accepted', () => {
    const ms = String(NOW);
    const headers = { ...signDelivery({ secret: SECRET, body: BODY, triggerId: 'trg_1', timestamp: Number(ms) }) };
    expect(headers['Webhook-Timestamp']).toBe(ms);
    expect(verify(headers).ok).toBe(true);
  });

  it.each([`${TS}abc`, ` ${TS}`, `${TS} `, '1e9', `-${TS}`, '12345678901234567890', `+${TS}`, `${TS}.5`, '１７９０００００００', ''])('timestamp %j is refused as malformed (or missing)', (value) => {
    const { headers } = delivery();
    const f = failure(verify({ ...headers, 'Webhook-Timestamp': value }));
    expect(['invalid_timestamp', 'missing_header']).toContain(f.reason);
  });

  it.each(['Trigger-Id', 'Webhook-Timestamp', 'Webhook-Signature'])('%s missing or empty is named', (name) => {
    const { headers } = delivery();
    const without = { ...headers, [name]: undefined };
    const f = failure(verify(without));
    expect(f.reason).toBe('missing_header');
    expect(f.message).toBe(`The ${name} header is missing.`);
    const empty = failure(verify({ ...headers, [name]: '' }));
    expect(empty.message).toBe(`The ${name} header is empty.`);
  });

  it('a valid signature over text that is not a JSON object', () => {
    for (const text of ['[1,2,3]', '"just a string"', 'not json at all', 'null', '42']) {
      const body = Buffer.from(text);
      const { headers } = delivery({ body });
      const f = failure(verify(headers, body));
      expect(f.reason, text).toBe('not_json_object');
    }
  });

  it('a body re-formatted by something in between is diagnosed', () => {
    const { headers } = delivery();
    const pretty = Buffer.from(JSON.stringify(JSON.parse(BODY.toString()), null, 2));
    const f = failure(verify(headers, pretty));
    expect(f.reason).toBe('body_reformatted');
    expect(f.hint).toContain('raw bytes');
  });

  it('headers are found whatever their case, and from a Headers object', () => {
    const { headers } = delivery();
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    expect(verify(lower).ok).toBe(true);
    expect(verifyDelivery({ secret: SECRET, headers: new Headers(headers), body: BODY, now: NOW }).ok).toBe(true);
  });
});

describe('the layout table is the one place a layout is defined', () => {
  // A layout of a sender of one's own: HMAC-SHA256 over "timestamp:trigger:body", sent as "hmac=<hex>".
  const colon: Layout = {
    name: 'colon-hex',
    signsTimestamp: true,
    signsTriggerId: true,
    keys: (secret) => [Buffer.from(secret, 'utf8')],
    prefix: (id, ts) => `${ts}:${id}:`,
    parse: (header) => ({ signatures: header.startsWith('hmac=') ? [Buffer.from(header.slice(5), 'hex')] : [], problems: [] }),
    format: (sig) => `hmac=${Buffer.from(sig).toString('hex')}`,
  };
  const table = [...LAYOUTS, colon];

  it('a row added to the table is signed, tried by auto, pinned by name, and reported', () => {
    const headers = signDelivery({ secret: SECRET, body: BODY, triggerId: 'trg_1', timestamp: TS, layout: colon });
    expect(headers['Webhook-Signature']).toBe(`hmac=${hmac(Buffer.from(SECRET), `${TS}:trg_1:`, BODY).toString('hex')}`);
    expect(verify(headers, BODY, { layouts: table })).toMatchObject({ ok: true, layout: 'colon-hex', signs: { timestamp: true, triggerId: true } });
    expect(verify(headers, BODY, { layouts: table, scheme: 'colon-hex' as never })).toMatchObject({ ok: true, layout: 'colon-hex' });
    // without the row, the same delivery is not verified
    expect(failure(verify(headers, BODY)).reason).toBe('malformed_signature');
    // a session pins it like any other
    const session = new Verifier({ secret: SECRET, layouts: table });
    expect(session.verify(headers, BODY, NOW)).toMatchObject({ ok: true, layout: 'colon-hex', pinnedNow: true });
    expect(session.pinned).toBe('colon-hex');
  });

  it('auto never tries a row that does not sign the timestamp, whatever the table', () => {
    const loose: Layout = { ...colon, name: 'loose', signsTimestamp: false, prefix: (id) => `${id}:` };
    const headers = signDelivery({ secret: SECRET, body: BODY, triggerId: 'trg_1', timestamp: TS, layout: loose });
    const refused = failure(verify(headers, BODY, { layouts: [...LAYOUTS, loose] }));
    expect(refused.message).toContain('in the loose layout, which does not sign the timestamp');
    expect(refused.hint).toContain('--scheme loose');
    expect(verify(headers, BODY, { layouts: [...LAYOUTS, loose], scheme: 'loose' as never })).toMatchObject({ ok: true, layout: 'loose' });
  });
});
