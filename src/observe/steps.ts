import type { Receiving } from '../delivery/receive.js';
import type { PairStore } from '../delivery/store.js';
import type { HeaderSource, VerifyResult } from '../signing/rules.js';
import type { Counter, Histogram } from './series.js';
import { isPromise } from '../util/then.js';
import { recording, step } from './trace.js';

/**
 * A door's receiving (src/delivery/receive.ts: its verifier and its store) with each step told to the
 * delivery's span as an event (verified or refused, the claim and what it found, completed, released)
 * and, when `timed` is given, timed into its histograms (listen --metrics). Runtime-neutral. With neither
 * an SDK recording nor `timed`, a step costs one look at the active span.
 */

/** Where listen --metrics times the steps. */
export interface Timed {
  verify: Histogram;
  store: Histogram;
  storeErrors: Counter;
}

const now = () => performance.now();

/** A store operation's event, once it is done. */
const DONE: Record<string, string> = { claim: 'claim', extend: 'extended', complete: 'completed', release: 'released', peek: 'looked' };

/** The verifier, its result told to the span (and its time to `timed`). */
function watchedVerify<B extends Uint8Array>(verify: Receiving<B>['verify'], timed?: Timed): Receiving<B>['verify'] {
  const told = (v: VerifyResult) => (v.ok ? step('verified', { 'wxhooks.layout': v.layout }) : step('refused', { 'wxhooks.reason': v.reason }));
  return (headers: HeaderSource, body: B, at: number) => {
    const traced = recording();
    if (!traced && !timed) return verify(headers, body, at);
    const began = timed ? now() : 0;
    const r = verify(headers, body, at);
    const done = (v: VerifyResult) => {
      if (timed) timed.verify.observe([v.ok ? 'ok' : 'failed'], (now() - began) / 1000);
      if (traced) told(v);
      return v;
    };
    return isPromise(r) ? r.then(done) : done(r);
  };
}

/** A store whose claims, completes and releases are told to the delivery's span (and timed into `timed`). */
export function watchedStore(store: PairStore, timed?: Timed): PairStore {
  const op = <T>(name: string, call: () => Promise<T>, said?: (r: T) => Record<string, string> | undefined): Promise<T> => {
    const traced = recording();
    if (!traced && !timed) return call();
    const began = timed ? now() : 0;
    return call().then(
      (r) => {
        timed?.store.observe([name], (now() - began) / 1000);
        if (traced) step(DONE[name] ?? name, said?.(r));
        return r;
      },
      (error: unknown) => {
        timed?.store.observe([name], (now() - began) / 1000);
        timed?.storeErrors.inc([name]);
        if (traced) step(`${name} failed`);
        throw error;
      },
    );
  };
  const watched: PairStore = {
    get where() {
      return store.where;
    },
    get leaseMs() {
      return store.leaseMs;
    },
    claim: (t, s) =>
      op(
        'claim',
        () => store.claim(t, s),
        (c) => ({ 'wxhooks.claim': c }),
      ),
    extend: (t, s) => op('extend', () => store.extend(t, s)),
    complete: (t, s) => op('complete', () => store.complete(t, s)),
    release: (t, s) => op('release', () => store.release(t, s)),
    close: () => store.close(),
  };
  if (store.peek) watched.peek = (t, s) => op('peek', () => store.peek!(t, s));
  return watched;
}

/** A door's receiving, its verification and its store watched. */
export function watchedReceiving<B extends Uint8Array>(r: Receiving<B>, timed?: Timed): Receiving<B> {
  return { ...r, verify: watchedVerify(r.verify.bind(r), timed), store: watchedStore(r.store, timed) };
}
