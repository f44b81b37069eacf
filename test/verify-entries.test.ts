import { describe, expect, it } from 'vitest';
import { fromBase64, fromHex, toBase64, toBase64Url, toHex } from '../src/signing/encoding.js';
import { LAYOUTS, layoutNamed } from '../src/signing/layouts.js';
import { signDelivery } from '../src/signing/sign.js';
import { Verifier, verifyDelivery, type VerifyResult } from '../src/signing/verify.js';
import { WebVerifier } from '../src/signing/verify-web.js';

// The two entries of the library verify with different crypto (Node's, synchronous; Web Crypto,
// asynchronous) by the same rules (src/signing/rules.ts): over the same vectors, they give the same
// results, word for word. Every failure reason is among the vectors.

const SECRET = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
const OLD = 'whsec_' + Buffer.alloc(32, 3).toString('base64');
const NOW = 1_795_000_000_000;
const TS = NOW / 1000;
const BODY = JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '4', trigger_id: 'trg_1', data: { model: 'wm-6', forecast_hour: 6 } });

const sign = (body: string | Buffer, layout: (typeof LAYOUTS)[number]['name'] = 'standard', secret = SECRET, timestamp = TS, trigger = 'trg_1') =>
  signDelivery({ secret, body, triggerId: trigger, timestamp, layout }) as unknown as Record<string, string>;

interface Vector {
  name: string;
  headers: Record<string, string>;
  body: string | Buffer;
  secrets?: string[];
  scheme?: 'auto' | (typeof LAYOUTS)[number]['name'];
}

const vectors: Vector[] = [
  ...LAYOUTS.filter((l) => l.signsTimestamp).map((l) => ({
    name: `signed in ${l.name}`,
    headers: { 'trigger-id': 'trg_1', 'webhook-timestamp': String(TS), ...lower(sign(BODY, l.name)) },
    body: BODY,
  })),
  { name: 'hex-body, pinned', headers: lower(sign(BODY, 'hex-body')), body: BODY, scheme: 'hex-body' },
  { name: 'hex-body, not pinned: said so', headers: { 'trigger-id': 'trg_1', 'webhook-timestamp': String(TS), ...lower(sign(BODY, 'hex-body')) }, body: BODY },
  { name: 'the second of two secrets (a rotation)', headers: lower(sign(BODY, 'standard', OLD)), body: BODY, secrets: [SECRET, OLD] },
  {
    name: 'two signatures, the second matching',
    headers: { ...lower(sign(BODY)), 'webhook-signature': `v1,${Buffer.alloc(32, 1).toString('base64')} ${sign(BODY)['Webhook-Signature']}` },
    body: BODY,
  },
  { name: 'a tampered body', headers: lower(sign(BODY)), body: BODY.replace('wm-6', 'wm-7') },
  { name: 'a re-formatted body', headers: lower(sign(BODY)), body: JSON.stringify(JSON.parse(BODY), null, 2) },
  { name: 'a wrong secret', headers: lower(sign(BODY, 'standard', OLD)), body: BODY },
  { name: 'a secret with whitespace', headers: lower(sign(BODY, 'standard', OLD)), body: BODY, secrets: [` ${SECRET}`] },
  { name: 'no Trigger-Id', headers: without(lower(sign(BODY)), 'trigger-id'), body: BODY },
  { name: 'an empty Webhook-Timestamp', headers: { ...lower(sign(BODY)), 'webhook-timestamp': '' }, body: BODY },
  { name: 'no Webhook-Signature', headers: without(lower(sign(BODY)), 'webhook-signature'), body: BODY },
  { name: 'a timestamp in ISO form', headers: { ...lower(sign(BODY)), 'webhook-timestamp': '2026-11-24T00:00:00Z' }, body: BODY },
  { name: 'ten minutes old', headers: lower(sign(BODY, 'standard', SECRET, TS - 600)), body: BODY },
  { name: 'two hours ahead', headers: lower(sign(BODY, 'standard', SECRET, TS + 7200)), body: BODY },
  { name: 'a signature cut short', headers: { ...lower(sign(BODY)), 'webhook-signature': 'v1,' + Buffer.alloc(20, 1).toString('base64') }, body: BODY },
  { name: 'V1 in capitals', headers: { ...lower(sign(BODY)), 'webhook-signature': sign(BODY)['Webhook-Signature']!.replace('v1,', 'V1,') }, body: BODY },
  { name: 'a header of 5,000 bytes', headers: { ...lower(sign(BODY)), 'webhook-signature': 'v1,' + 'A'.repeat(5000) }, body: BODY },
  { name: 'a body that is a list, signed', headers: lower(sign('[1,2]')), body: '[1,2]' },
  { name: 'a body that is not JSON, signed', headers: lower(sign('hello')), body: 'hello' },
  { name: 'Headers with any casing', headers: { 'TRIGGER-ID': 'trg_1', 'Webhook-Timestamp': String(TS), 'WEBHOOK-SIGNATURE': sign(BODY)['Webhook-Signature']! }, body: BODY },
];

function lower(h: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
}
function without(h: Record<string, string>, name: string): Record<string, string> {
  const out = { ...h };
  delete out[name];
  return out;
}

describe('the Node entry and the web entry verify alike', () => {
  it.each(vectors)('$name', async (v) => {
    const secret = v.secrets ?? [SECRET];
    const node: VerifyResult = verifyDelivery({ secret, headers: v.headers, body: v.body, now: NOW, scheme: v.scheme });
    const session = new Verifier({ secret, scheme: v.scheme, pin: false, diagnosePerMinute: Infinity }).verify(v.headers, Buffer.from(v.body), NOW);
    const web = await new WebVerifier({ secret, scheme: v.scheme, diagnosePerMinute: Infinity }).verify(new Headers(v.headers), typeof v.body === 'string' ? v.body : new Uint8Array(v.body), NOW);
    expect(web).toEqual(node);
    expect(session).toEqual(node);
  });

  it("two Webhook-Signature headers (a rotation by a proxy that splits them): in a Headers object as in Node's, either one may match", async () => {
    const right = sign(BODY)['Webhook-Signature']!;
    const wrong = `v1,${Buffer.alloc(32, 1).toString('base64')}`;
    for (const order of [
      [right, wrong],
      [wrong, right],
    ]) {
      const headers = new Headers({ 'trigger-id': 'trg_1', 'webhook-timestamp': String(TS) });
      for (const value of order) headers.append('webhook-signature', value);
      const nodeHeaders = { 'trigger-id': 'trg_1', 'webhook-timestamp': String(TS), 'webhook-signature': order };
      expect(verifyDelivery({ secret: SECRET, headers: nodeHeaders, body: BODY, now: NOW }).ok).toBe(true);
      expect(verifyDelivery({ secret: SECRET, headers, body: BODY, now: NOW }).ok).toBe(true);
      expect((await new WebVerifier({ secret: SECRET }).verify(headers, BODY, NOW)).ok).toBe(true);
    }
  });

  it('every failure reason is among the vectors, and so is success', async () => {
    const reasons = new Set<string>();
    for (const v of vectors) {
      const r = verifyDelivery({ secret: v.secrets ?? [SECRET], headers: v.headers, body: v.body, now: NOW, scheme: v.scheme });
      reasons.add(r.ok ? 'ok' : r.reason);
    }
    expect([...reasons].sort()).toEqual(['body_reformatted', 'invalid_timestamp', 'malformed_signature', 'missing_header', 'no_match', 'not_json_object', 'ok', 'timestamp_out_of_window']);
  });

  it('the web verifier rations its further look for why, as listen does: the sixth refusal in a minute says it was skipped', async () => {
    const web = new WebVerifier({ secret: SECRET });
    const headers = new Headers(lower(sign(BODY, 'standard', OLD)));
    const results = [];
    for (let i = 0; i < 6; i++) results.push(await web.verify(headers, BODY, NOW));
    expect(results.slice(0, 5).every((r) => !r.ok && !r.diagnosisSkipped)).toBe(true);
    expect(results[5]).toMatchObject({ ok: false, reason: 'no_match', diagnosisSkipped: true });
    // a minute later, the budget is back
    expect(await web.verify(headers, BODY, NOW + 60_000)).not.toHaveProperty('diagnosisSkipped');
  });

  it('the exported Verifier rations it by default too (#33): an unrationed one gives anonymous senders several verifications for one', () => {
    const session = new Verifier({ secret: SECRET });
    const headers = lower(sign(BODY, 'standard', OLD));
    const results = Array.from({ length: 6 }, () => session.verify(headers, Buffer.from(BODY), NOW));
    expect(results.slice(0, 5).every((r) => !r.ok && !r.diagnosisSkipped)).toBe(true);
    expect(results[5]).toMatchObject({ ok: false, reason: 'no_match', diagnosisSkipped: true });
    // told otherwise, every look is taken
    const generous = new Verifier({ secret: SECRET, diagnosePerMinute: Infinity });
    expect(Array.from({ length: 6 }, () => generous.verify(headers, Buffer.from(BODY), NOW)).some((r) => !r.ok && r.diagnosisSkipped)).toBe(false);
  });

  it("the neutral encodings agree with Node's Buffer, byte for byte", () => {
    for (let n = 0; n < 70; n++) {
      const bytes = Buffer.from(Array.from({ length: n }, (_, i) => (i * 37 + n * 11) & 255));
      expect(toBase64(bytes)).toBe(bytes.toString('base64'));
      expect(toBase64Url(bytes)).toBe(bytes.toString('base64url'));
      expect(toHex(bytes)).toBe(bytes.toString('hex'));
      expect(Buffer.from(fromBase64(bytes.toString('base64')))).toEqual(bytes);
      expect(Buffer.from(fromBase64(bytes.toString('base64').replace(/=+$/, '')))).toEqual(bytes);
      expect(Buffer.from(fromHex(bytes.toString('hex')))).toEqual(bytes);
    }
    expect(layoutNamed('standard')!.keys(SECRET)[0]).toEqual(new Uint8Array(Buffer.alloc(32, 9)));
    // small results share a block: 1,000 kept at once (several blocks' worth) are each still their own bytes
    const sources = Array.from({ length: 1000 }, (_, i) => Buffer.from(Array.from({ length: 32 }, (_, j) => (i * 7 + j) & 255)));
    const kept = sources.map((b, i) => (i % 2 ? fromBase64(b.toString('base64')) : fromHex(b.toString('hex'))));
    kept.forEach((k, i) => expect(Buffer.from(k)).toEqual(sources[i]));
  });
});
