import { describe, expect, it } from 'vitest';
import { decide, pairOf, type Facts } from '../src/receiver/decide.js';
import { signDelivery, verifyDelivery, type VerifySuccess } from '../src/signing/index.js';

// The receiver's answer table, as a function of what is known: no sockets, no files.

const SECRET = 'whsec_' + Buffer.alloc(32, 3).toString('base64');
const NOW = 1_790_000_000_000;

function verified(body: object | Buffer, layout: 'standard' | 'stripe' | 'hex-timestamp' = 'standard', triggerId = 'trg_1'): { v: VerifySuccess; bytes: Buffer } {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  const headers = signDelivery({ secret: SECRET, body: bytes, triggerId, timestamp: NOW / 1000, layout });
  const v = verifyDelivery({ secret: SECRET, headers, body: bytes, now: NOW, scheme: layout });
  if (!v.ok) throw new Error(v.message);
  return { v, bytes };
}

const ok = verified({ type: 'forecast_hour.available', subscription_id: '12', trigger_id: 'trg_1' }).v;

describe('decide', () => {
  it('a request that does not verify is answered at once: 401 not authentic, 400 not a delivery', () => {
    const bad = verifyDelivery({ secret: SECRET, headers: { 'Trigger-Id': 'x', 'Webhook-Timestamp': String(NOW / 1000), 'Webhook-Signature': 'v1,AAAA' }, body: '{}', now: NOW });
    expect(decide({ verification: bad })).toMatchObject({ do: 'answer', answer: { status: 401, outcome: 'unverified' } });
    const missing = verifyDelivery({ secret: SECRET, headers: {}, body: '{}', now: NOW });
    expect(decide({ verification: missing })).toMatchObject({ do: 'answer', answer: { status: 400, outcome: 'bad_request' } });
  });

  it('verified: claim the pair; a duplicate is 200 and nothing more; one in progress is 409', () => {
    expect(decide({ verification: ok })).toEqual({ do: 'claim' });
    expect(decide({ verification: ok, claim: 'done' })).toMatchObject({ do: 'answer', answer: { status: 200, outcome: 'duplicate' } });
    expect(decide({ verification: ok, claim: 'held' })).toMatchObject({ do: 'answer', answer: { status: 409, outcome: 'in_progress' } });
    expect(decide({ verification: ok, claim: 'won' })).toEqual({ do: 'process' });
  });

  it('processed: the pair is stored before any 2xx, with the status the app gave', () => {
    const facts: Facts = { verification: ok, claim: 'won', processed: { forward: { ok: true, status: 202, ms: 1 } } };
    expect(decide(facts)).toEqual({ do: 'store', status: 202 });
    expect(decide({ ...facts, stored: { ok: true } })).toMatchObject({ do: 'answer', answer: { status: 202, outcome: 'accepted' } });
  });

  it('a pair that could not be stored is answered 503, so the service retries', () => {
    const facts: Facts = { verification: ok, claim: 'won', processed: {}, stored: { ok: false, message: 'disk full', persistent: false } };
    expect(decide(facts)).toMatchObject({ do: 'answer', answer: { status: 503, outcome: 'store_failed' } });
  });

  it('what was not processed releases its claim: the app failed (502), --respond-status asked otherwise, saving failed (500)', () => {
    const won = { verification: ok, claim: 'won' } as const;
    expect(decide({ ...won, processed: { forward: { ok: false, error: 'connection refused', ms: 1 } } })).toMatchObject({ do: 'release', answer: { status: 502, outcome: 'forward_failed' } });
    expect(decide({ ...won, processed: { forward: { ok: false, status: 500, ms: 1 } } })).toMatchObject({ do: 'release', answer: { status: 502 } });
    expect(decide({ ...won, processed: {} }, { respondStatus: 500 })).toMatchObject({ do: 'release', answer: { status: 500, outcome: 'refused_by_flag' } });
    expect(decide({ ...won, processed: { saveError: 'ENOSPC' } })).toMatchObject({ do: 'release', answer: { status: 500, outcome: 'error' } });
    // a 2xx asked for is still a 2xx: stored first
    expect(decide({ ...won, processed: {} }, { respondStatus: 204 })).toEqual({ do: 'store', status: 204 });
  });
});

describe('the dedupe key', () => {
  it('standard signs the Trigger-Id: the body trigger_id, else the header', () => {
    expect(pairOf(ok, Buffer.alloc(0))).toEqual({ trigger: 'trg_1', subscription: '12', source: 'body' });
    const { v, bytes } = verified({ type: 't', subscription: { id: 7 } }, 'standard', 'trg_header');
    expect(pairOf(v, bytes)).toEqual({ trigger: 'trg_header', subscription: '7', source: 'header' });
  });

  it('a layout that does not sign the Trigger-Id: a capture re-sent under a new Trigger-Id keeps its key', () => {
    for (const layout of ['stripe', 'hex-timestamp'] as const) {
      const body = Buffer.from(JSON.stringify({ type: 't', subscription_id: '1' }));
      const first = verified(body, layout, 'r1');
      const again = verified(body, layout, 'r2');
      const a = pairOf(first.v, first.bytes);
      expect(a.source).toBe('hash');
      expect(pairOf(again.v, again.bytes)).toEqual(a);
      // with a trigger_id in the (signed) body, that is the key
      const withId = verified({ type: 't', subscription_id: '1', trigger_id: 'trg_body' }, layout, 'r3');
      expect(pairOf(withId.v, withId.bytes)).toEqual({ trigger: 'trg_body', subscription: '1', source: 'body' });
    }
  });
});
