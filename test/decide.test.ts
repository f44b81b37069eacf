import { describe, expect, it } from 'vitest';
import * as ANSWERS from '../src/delivery/answers.js';
import { BodyGatherer, InflightBudget } from '../src/util/bodies.js';
import { OUTCOMES, OUTCOME_NAMES } from '../src/delivery/outcomes.js';
import { settle } from '../src/delivery/runner.js';
import { manualTimers } from './helpers/clock.js';
import { decide, forwarded, type Facts, type Handled } from '../src/delivery/steps.js';
import type { Claim, PairStore } from '../src/delivery/store.js';
import { createHash } from 'node:crypto';
import type { Pair } from '../src/delivery/pair.js';
import { keyed } from '../src/delivery/receive.js';
import { signDelivery, verifyDelivery, type VerifySuccess } from '../src/signing/index.js';

// The delivery core without sockets: the step machine, the answers, the runner (claim, extend while
// handling, complete or release, a handler that runs past its time), the body's budget, the dedupe key.

const SECRET = 'whsec_' + Buffer.alloc(32, 3).toString('base64');

/** The pair of a verified delivery, hashed with Node's crypto (at once) where it must be: the core's rule. */
const pairOf = (v: VerifySuccess, body: Buffer): Pair => (keyed(v, body, (prefix, bytes) => createHash('sha256').update(prefix).update(bytes).digest()) as { pair: Pair }).pair;
const NOW = 1_790_000_000_000;

function verified(body: object | Buffer, layout: 'standard' | 'stripe' | 'hex-timestamp' = 'standard', triggerId = 'trg_1'): { v: VerifySuccess; bytes: Buffer } {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  const headers = signDelivery({ secret: SECRET, body: bytes, triggerId, timestamp: NOW / 1000, layout });
  const v = verifyDelivery({ secret: SECRET, headers, body: bytes, now: NOW, scheme: layout });
  if (!v.ok) throw new Error(v.message);
  return { v, bytes };
}

const ok = verified({ type: 'forecast_hour.available', subscription_id: '12', trigger_id: 'trg_1' }).v;

/** A store of pairs kept in this test, honest to the contract: a claim held for `leaseMs` unless extended, on the test's own clock. */
class LeaseStore implements PairStore {
  readonly where = 'this test';
  now = 0;
  readonly held = new Map<string, number>();
  readonly done = new Set<string>();
  readonly calls: string[] = [];
  failComplete = false;
  constructor(readonly leaseMs: number) {}
  async claim(t: string, s: string): Promise<Claim> {
    this.calls.push('claim');
    const k = `${t}|${s}`;
    if (this.done.has(k)) return 'done';
    if ((this.held.get(k) ?? -1) > this.now) return 'held';
    this.held.set(k, this.now + this.leaseMs);
    return 'won';
  }
  async extend(t: string, s: string): Promise<boolean> {
    this.calls.push('extend');
    const k = `${t}|${s}`;
    if (!this.held.has(k)) return false;
    this.held.set(k, this.now + this.leaseMs);
    return true;
  }
  async complete(t: string, s: string): Promise<void> {
    this.calls.push('complete');
    if (this.failComplete) throw Object.assign(new Error('disk full'), { persistent: false });
    this.held.delete(`${t}|${s}`);
    this.done.add(`${t}|${s}`);
  }
  async release(t: string, s: string): Promise<void> {
    this.calls.push('release');
    this.held.delete(`${t}|${s}`);
  }
  async close(): Promise<void> {}
}

describe('the step machine', () => {
  it('verified: claim the pair; a duplicate is 200 and nothing more; one in progress is 409; the store away is 503 with Retry-After', () => {
    expect(decide({})).toEqual({ do: 'claim' });
    expect(decide({ claim: 'done' })).toMatchObject({ do: 'answer', answer: { status: 200, outcome: 'duplicate', body: '{"ok":true,"duplicate":true}' } });
    expect(decide({ claim: 'stored_now' })).toMatchObject({ do: 'answer', answer: { status: 200, outcome: 'duplicate' } });
    expect(decide({ claim: 'held' })).toMatchObject({ do: 'answer', answer: { status: 409, outcome: 'in_progress' } });
    expect(decide({ claim: 'won' })).toEqual({ do: 'handle' });
    expect(decide({ claimFailed: new Error('away') })).toMatchObject({ do: 'answer', answer: { status: 503, outcome: 'store_failed', headers: { 'retry-after': '5' } } });
  });

  it('handled: the pair is stored before any 2xx, with the status handling gave; a store that fails is 503', () => {
    const facts: Facts = { claim: 'won', handled: { ok: true, status: 202 } };
    expect(decide(facts)).toEqual({ do: 'complete', status: 202 });
    expect(decide({ ...facts, stored: { ok: true } })).toMatchObject({ do: 'answer', answer: { status: 202, outcome: 'accepted', body: '{"ok":true}' } });
    expect(decide({ ...facts, stored: { ok: false, error: new Error('disk full') } })).toMatchObject({
      do: 'answer',
      answer: { status: 503, outcome: 'store_failed', headers: { 'retry-after': '5' } },
    });
  });

  it('what was not processed releases its claim: the app failed (502), --respond-status asked otherwise, saving failed (500)', () => {
    const won = (handled: Handled) => decide({ claim: 'won', handled });
    expect(won(forwarded({ forward: { ok: false, error: 'connection refused', ms: 1 } }))).toMatchObject({ do: 'release', answer: { status: 502, outcome: 'forward_failed' } });
    expect(won(forwarded({ forward: { ok: false, status: 500, ms: 1 } }))).toMatchObject({ do: 'release', answer: { status: 502, body: '{"error":"forwarding failed: your app answered 500"}' } });
    expect(won(forwarded({}, 500))).toMatchObject({ do: 'release', answer: { status: 500, outcome: 'refused_by_flag' } });
    expect(won(forwarded({ saveError: 'ENOSPC' }))).toMatchObject({ do: 'release', answer: { status: 500, outcome: 'error' } });
    // --sink: a broker away is 503 with Retry-After; one that refused it for good is 502, final; the claim let go either way
    const away = won(forwarded({ sinkError: { refused: false, why: 'redis://127.0.0.1:6379/s: the connection is down' } }));
    expect(away).toMatchObject({ do: 'release', answer: { status: 503, outcome: 'sink_failed', headers: { 'retry-after': '5' } } });
    // which broker, and why, is listen's line: the sender is told only to come back
    expect(JSON.parse((away as { answer: { body: string } }).answer.body)).toEqual({ error: 'the stream cannot take it now; try again later', reason: 'sink_unavailable' });
    const refused = won(forwarded({ sinkError: { refused: true, why: 'over max_payload' }, forward: { ok: true, status: 200, ms: 1 } }));
    expect(refused).toMatchObject({ do: 'release', answer: { status: 502, outcome: 'sink_failed' } });
    expect((refused as { answer: { headers?: object } }).answer.headers).toBeUndefined();
    // a 2xx asked for is still a 2xx: stored first; the app's own 2xx is passed on
    expect(won(forwarded({}, 204))).toEqual({ do: 'complete', status: 204 });
    expect(won(forwarded({ forward: { ok: true, status: 201, ms: 1 } }))).toEqual({ do: 'complete', status: 201 });
  });
});

describe('the table of answers', () => {
  it('every refusal has one body shape, {error, reason?, hint?}; every 503 says when to come back; 405 says what is allowed', () => {
    const bad = verifyDelivery({ secret: SECRET, headers: { 'Trigger-Id': 'x', 'Webhook-Timestamp': String(NOW / 1000), 'Webhook-Signature': 'v1,AAAA' }, body: '{}', now: NOW });
    const missing = verifyDelivery({ secret: SECRET, headers: {}, body: '{}', now: NOW });
    if (bad.ok || missing.ok) throw new Error('verified');
    const answers = [
      ANSWERS.inProgress,
      ANSWERS.notVerified(bad),
      ANSWERS.notVerified(missing),
      ANSWERS.notFound('deliveries go to /'),
      ANSWERS.notFound(),
      ANSWERS.methodNotAllowed,
      ANSWERS.tooLarge(10),
      ANSWERS.timedOut(60_000),
      ANSWERS.malformed,
      ANSWERS.aborted,
      ANSWERS.overloaded,
      ANSWERS.storeUnreadable,
      ANSWERS.storeUnwritten,
      ANSWERS.handlerFailed,
      ANSWERS.handlerTimedOut(120_000),
      ANSWERS.forwardFailed('connection refused'),
      ANSWERS.refusedByFlag(500),
      ANSWERS.savingFailed('ENOSPC'),
      ANSWERS.bodyParsed('mount it first'),
      ANSWERS.internal,
    ];
    for (const a of answers) {
      const body = JSON.parse(a.body) as Record<string, unknown>;
      expect(Object.keys(body).every((k) => ['error', 'reason', 'hint'].includes(k))).toBe(true);
      expect(typeof body.error).toBe('string');
      expect(a.outcome in OUTCOMES).toBe(true);
      if (a.status === 503) expect(a.headers).toEqual({ 'retry-after': '5' });
    }
    expect(ANSWERS.notVerified(bad)).toMatchObject({ status: 401, outcome: 'unverified' });
    expect(JSON.parse(ANSWERS.notVerified(bad).body)).toMatchObject({ reason: 'malformed_signature', error: expect.any(String) });
    expect(ANSWERS.notVerified(missing)).toMatchObject({ status: 400, outcome: 'bad_request' });
    expect(ANSWERS.methodNotAllowed).toEqual({ status: 405, outcome: 'method_not_allowed', body: '{"error":"only POST is accepted here"}', headers: { allow: 'POST' } });
    expect(JSON.parse(ANSWERS.accepted().body)).toEqual({ ok: true });
    expect(JSON.parse(ANSWERS.duplicate.body)).toEqual({ ok: true, duplicate: true });
  });

  it('one row per outcome: its label, and whether it counts as delivered or is refused, read from the row by every reader', async () => {
    const { DELIVERED_OUTCOMES, REFUSED_OUTCOMES, isDelivered, outcomeLabel } = await import('../src/delivery/outcomes.js');
    expect(DELIVERED_OUTCOMES).toEqual(['accepted', 'duplicate']);
    expect([...REFUSED_OUTCOMES].sort()).toEqual(['aborted', 'bad_request', 'method_not_allowed', 'not_found', 'overloaded', 'timed_out', 'too_large', 'unverified']);
    for (const name of OUTCOME_NAMES) expect(outcomeLabel(name)).toMatch(/^[a-z][a-z ]+$/);
    expect([outcomeLabel('forward_failed'), outcomeLabel('bad_request'), outcomeLabel('in_progress')]).toEqual(['app failed', 'not verified', 'in progress']);
    // one a newer receiver reports: its name in words
    expect(outcomeLabel('rate_limited')).toBe('rate limited');
    expect([isDelivered('duplicate'), isDelivered('replayed'), isDelivered('rate_limited')]).toEqual([true, false, false]);
  });

  it("what --check reads of each outcome, and the inspector's filter entries, are rows' fields too", async () => {
    const { OUTCOME_FILTERS, checkShows } = await import('../src/delivery/outcomes.js');
    expect(OUTCOME_NAMES.filter((o) => checkShows(o) === 'verified')).toEqual(['accepted', 'duplicate', 'in_progress', 'refused_by_flag']);
    expect(OUTCOME_NAMES.filter((o) => checkShows(o) === 'not_verified')).toEqual(['unverified', 'bad_request', 'method_not_allowed', 'not_found']);
    expect(OUTCOME_FILTERS.map((f) => [f.value, f.words, [...f.outcomes]])).toEqual([
      ['accepted', 'accepted', ['accepted']],
      ['duplicate', 'duplicate', ['duplicate']],
      ['unverified', 'not verified (400/401)', ['unverified', 'bad_request']],
      ['forward_failed', 'your app failed (502)', ['forward_failed']],
      ['sink_failed', 'a sink failed (502/503)', ['sink_failed']],
      ['limits', 'refused: limits (408/413/503)', ['overloaded', 'timed_out', 'too_large']],
      ['replayed', 'replays', ['replayed']],
    ]);
  });

  it('one vocabulary: the library\'s and listen\'s names are in it, and "processed" is not', () => {
    expect(OUTCOME_NAMES).toEqual(expect.arrayContaining(['accepted', 'duplicate', 'in_progress', 'handler_failed', 'handler_timed_out', 'store_failed', 'unverified', 'bad_request']));
    expect(OUTCOME_NAMES).not.toContain('processed');
  });
});

describe('the runner', () => {
  const pair = { trigger: 'trg_r', subscription: '1', source: 'body' as const };

  it('claims, handles, completes: 200; the same pair again is a duplicate, not handled', async () => {
    const store = new LeaseStore(60_000);
    let runs = 0;
    const handle = async (): Promise<Handled> => (runs++, { ok: true, status: 200 });
    expect((await settle({ store, pair, handle })).answer).toMatchObject({ status: 200, outcome: 'accepted' });
    expect((await settle({ store, pair, handle })).answer).toMatchObject({ status: 200, outcome: 'duplicate' });
    expect(runs).toBe(1);
    expect(store.calls).toEqual(['claim', 'complete', 'claim']);
  });

  it('a handling that throws: its claim let go, 500; the retry handles it again', async () => {
    const store = new LeaseStore(60_000);
    const first = await settle({ store, pair, handle: async () => Promise.reject(new Error('boom')) });
    expect(first.answer).toMatchObject({ status: 500, outcome: 'error' });
    expect(first.handled).toMatchObject({ ok: false, error: expect.objectContaining({ message: 'boom' }) });
    expect(store.calls).toEqual(['claim', 'release']);
    expect((await settle({ store, pair, handle: () => ({ ok: true, status: 200 }) })).answer.outcome).toBe('accepted');
  });

  it("handled, and the pair not stored: 503, and the store's error kept for the report", async () => {
    const store = new LeaseStore(60_000);
    store.failComplete = true;
    const s = await settle({ store, pair, handle: () => ({ ok: true, status: 200 }) });
    expect(s.answer).toMatchObject({ status: 503, outcome: 'store_failed' });
    expect(s.stored).toMatchObject({ ok: false, error: expect.objectContaining({ message: 'disk full' }) });
  });

  it('a claim is extended every third of the lease while its delivery is handled, so a second instance finds it held past the lease', async () => {
    const store = new LeaseStore(300);
    const timers = manualTimers((now) => (store.now = now));
    let finish!: () => void;
    const slow = settle({ store, pair, timers, timeoutMs: 10_000, handle: () => new Promise<Handled>((r) => (finish = () => r({ ok: true, status: 200 }))) });
    await expect.poll(() => finish).toBeDefined(); // handling has begun
    await timers.advance(1000); // more than three leases
    expect(store.calls.filter((c) => c === 'extend')).toHaveLength(10);
    // another instance's retry, now: still held
    expect(await store.claim(pair.trigger, pair.subscription)).toBe('held');
    finish();
    expect((await slow).answer.outcome).toBe('accepted');
    expect(timers.pending()).toBe(0);
  });

  it('a handler that runs past its time is let go: 500 handler_timed_out, the claim released, so the retry runs it; nothing is waited on', async () => {
    const store = new LeaseStore(60_000);
    const timers = manualTimers((now) => (store.now = now));
    let began = false;
    const hung = settle({ store, pair, timers, timeoutMs: 90_000, handle: () => ((began = true), new Promise<Handled>(() => undefined)) });
    await expect.poll(() => began).toBe(true);
    await timers.advance(89_999);
    expect(store.calls).toEqual(['claim', 'extend', 'extend', 'extend', 'extend']);
    await timers.advance(1);
    const s = await hung;
    expect(s.timedOut).toBe(true);
    expect(s.answer).toMatchObject({ status: 500, outcome: 'handler_timed_out', body: '{"error":"a handler took longer than 90 s; the delivery will be retried"}' });
    expect(store.calls.at(-1)).toBe('release');
    expect(await store.claim(pair.trigger, pair.subscription)).toBe('won');
  });

  it('an extension that fails is said (leaseLost)', async () => {
    const store = new LeaseStore(300);
    const timers = manualTimers((now) => (store.now = now));
    let finish!: () => void;
    const slow = settle({ store, pair, timers, handle: () => new Promise<Handled>((r) => (finish = () => r({ ok: true, status: 200 }))) });
    await expect.poll(() => finish).toBeDefined();
    store.held.clear(); // taken over (its lease ran out somewhere else)
    await timers.advance(100);
    finish();
    expect((await slow).leaseLost).toBe(true);
  });
});

describe('the body and the in-flight budget', () => {
  it('is charged for what arrived, not for what was declared: two bytes of a declared 256 MiB hold kilobytes', () => {
    const budget = new InflightBudget(1024 * 1024);
    const bodies = Array.from({ length: 11 }, () => new BodyGatherer<Uint8Array>(25 * 1024 * 1024, budget, (n) => new Uint8Array(n), 256 * 1024 * 1024));
    for (const b of bodies) {
      expect(b.add(new Uint8Array([1]))).toBe('ok');
      expect(b.add(new Uint8Array([2]))).toBe('ok');
    }
    expect(budget.used).toBeLessThanOrEqual(11 * 16 * 1024);
    // a real body still fits beside them
    const real = new BodyGatherer<Uint8Array>(25 * 1024 * 1024, budget, (n) => new Uint8Array(n), 500_000);
    for (let i = 0; i < 50; i++) expect(real.add(new Uint8Array(10_000).fill(i))).toBe('ok');
    expect(real.body()).toHaveLength(500_000);
    expect(real.body()[499_999]).toBe(49);
    for (const b of [...bodies, real]) b.release();
    expect(budget.used).toBe(0);
  });

  it('over the budget: refused and counted; over the body limit, or past what was declared: too large', () => {
    const budget = new InflightBudget(1000);
    const a = new BodyGatherer<Uint8Array>(10_000, budget, (n) => new Uint8Array(n));
    expect(a.add(new Uint8Array(900))).toBe('ok');
    expect(a.add(new Uint8Array(200))).toBe('over_budget');
    expect(budget.refused).toBe(1);
    a.release();
    const b = new BodyGatherer<Uint8Array>(100, budget, (n) => new Uint8Array(n));
    expect(b.add(new Uint8Array(101))).toBe('too_large');
    const c = new BodyGatherer<Uint8Array>(100, budget, (n) => new Uint8Array(n), 10);
    expect(c.add(new Uint8Array(11))).toBe('too_large');
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
