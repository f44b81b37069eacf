import { utf8 } from '../signing/encoding.js';
import type { HeaderSource, VerifyFailure, VerifyResult, VerifySuccess } from '../signing/rules.js';
import * as ANSWERS from './answers.js';
import type { Answer } from './answers.js';
import { hashedPair, pairFrom, unkeyableIds, withHashedIds, type Pair } from './pair.js';
import { settle, type Settled, type Timers } from './runner.js';
import type { Handled } from './steps.js';
import type { PairStore } from './store.js';
import { andThen, isPromise } from '../util/then.js';

/**
 * What every door does with a delivery whose body is in, once: `verified` (by the door's verifier: Node's
 * crypto or Web Crypto), `keyed` (its pair, as a store keys it), then `settle` (src/delivery/runner.ts:
 * claimed, handled by the door's own step, completed or released). Between the two, the door says what the
 * delivery is to it (`accept`: listen's report, the library's event) and how it is handled. Synchronous as
 * far as it can be: a delivery that does not verify with Node's crypto is refused in the same turn.
 */

/** What a door receives with: its verifier, its SHA-256 (for the pairs that are keyed by a hash), its store and its handlers' time. */
export interface Receiving<B extends Uint8Array> {
  store: PairStore;
  verify(headers: HeaderSource, body: B, now: number): VerifyResult | PromiseLike<VerifyResult>;
  sha256(prefix: string, bytes: Uint8Array): Uint8Array | Promise<Uint8Array>;
  /** A handling still running after this is let go (default: a few of the store's leases). */
  timeoutMs?: number;
  timers?: Timers;
}

/** What a door makes of a verified delivery: anything it keeps (`W`), and how it is handled once its claim is won. */
export interface Accepted {
  handle(): Handled | PromiseLike<Handled>;
}

/** What became of a delivery: refused (it did not verify), or settled (with what the door made of it). */
export type Verdict<W extends Accepted> =
  | { verified: false; failure: VerifyFailure; answer: Answer }
  | { verified: true; v: VerifySuccess; pair: Pair; keyed: Pair; work: W; settled: Settled; answer: Answer };

/**
 * The pair of a verified delivery (the rule: src/delivery/pair.ts), and the pair as a store keys it (an
 * id no store can key by replaced by its hash): hashed with the door's SHA-256, at once when it is Node's.
 */
export function keyed(v: VerifySuccess, body: Uint8Array, sha256: Receiving<Uint8Array>['sha256']): { pair: Pair; keyed: Pair } | PromiseLike<{ pair: Pair; keyed: Pair }> {
  const found = pairFrom(v);
  const pair = 'trigger' in found ? found : andThen(sha256(found.hashPrefix, body), (digest) => hashedPair(found.subscription, digest, found.forecast, found.catchUp));
  return andThen(pair, (p) => {
    const odd = unkeyableIds(p);
    if (!odd.length) return { pair: p, keyed: p };
    const digests: Partial<Record<(typeof odd)[number], Uint8Array>> = {};
    let pending: PromiseLike<unknown> | undefined;
    for (const k of odd) {
      const d = sha256('', utf8(p[k]!));
      if (isPromise(d)) pending = Promise.all([pending, d.then((x) => void (digests[k] = x))]);
      else digests[k] = d;
    }
    return andThen(pending, () => ({ pair: p, keyed: withHashedIds(p, digests) }));
  });
}

/**
 * Verifies a delivery and settles it. `accept` is told the verified delivery and its pairs, and gives the
 * door's work (its handle step); `done` makes the door's result of the verdict (in the same turn when it
 * did not verify and the verifier is synchronous). A settle that rejects (a bug) is `failed`'s, else rejects.
 */
export function verifyAndSettle<B extends Uint8Array, W extends Accepted, R>(
  r: Receiving<B>,
  headers: HeaderSource,
  body: B,
  now: number,
  accept: (v: VerifySuccess, pair: Pair, keyed: Pair) => W,
  done: (verdict: Verdict<W>) => R,
  failed?: (error: unknown) => R,
): R | PromiseLike<R> {
  return andThen(r.verify(headers, body, now), (v): R | PromiseLike<R> => {
    if (!v.ok) return done({ verified: false, failure: v, answer: ANSWERS.notVerified(v) });
    return andThen(keyed(v, body, r.sha256), (k) => {
      const work = accept(v, k.pair, k.keyed);
      return settle({ store: r.store, pair: k.keyed, handle: () => work.handle(), timeoutMs: r.timeoutMs, timers: r.timers }).then(
        (settled) => done({ verified: true, v, pair: k.pair, keyed: k.keyed, work, settled, answer: settled.answer }),
        failed,
      );
    });
  });
}
