import { createHash } from 'node:crypto';
import { unkeyableIds, withHashedIds, type Pair } from '../delivery/pair.js';
import type { ReceiverEvent } from '../delivery/report.js';
import type { VerifyFailure, VerifySuccess } from '../signing/verify.js';
import { claimKept } from '../store/history-limits.js';
import { idText } from '../util/bytes.js';

/** The pair as the store keys it, hashed with Node's crypto: an id no store can key by (src/delivery/pair.ts) by its hash (reconcile's look-ups key the pairs as a door does). */
export function keyedPair(pair: Pair): Pair {
  const odd = unkeyableIds(pair);
  return odd.length ? withHashedIds(pair, Object.fromEntries(odd.map((k) => [k, createHash('sha256').update(pair[k]!).digest()]))) : pair;
}

/** The report of a verified delivery: its ids, its model run, its size, the layout that matched. */
export function deliveryEvent(time: string, path: string, v: VerifySuccess & { pinnedNow?: true }, pair: Pair, size: number): ReceiverEvent {
  const p = v.payload;
  const data = (typeof p.data === 'object' && p.data !== null ? p.data : {}) as Record<string, unknown>;
  const event: ReceiverEvent = {
    time,
    outcome: 'accepted',
    status: 200,
    method: 'POST',
    path,
    size,
    type: idText(p.type),
    webhook_id: idText(p.webhook_id),
    subscription_id: pair.subscription || undefined,
    trigger_id: pair.source === 'hash' ? v.triggerId : pair.trigger,
    model: idText(data.model),
    initialization_time: idText(data.initialization_time),
    forecast_hour: typeof data.forecast_hour === 'number' ? data.forecast_hour : undefined,
    created_at: idText(p.created_at),
    layout: v.layout,
  };
  // the rarely set ones only when set: four undefined properties cost JSON.stringify 86 ns a report
  // (989 against 903 ns), 0.2% of the ~42 µs of CPU `listen` spends on a delivery (BENCHMARKS.md)
  if (p.test === true) event.test = true;
  if (p.catch_up === true) event.catch_up = true;
  if (!v.signs.triggerId) event.dedupe_key = pair.source;
  if (v.warning) event.warning = v.warning;
  if (v.pinnedNow) event.pinned = true;
  return event;
}

/** The report of a request that did not verify. */
export function failureEvent(time: string, path: string, f: VerifyFailure, status: number, size: number, triggerHeader: string | undefined): ReceiverEvent {
  const event: ReceiverEvent = {
    time,
    outcome: status === 400 ? 'bad_request' : 'unverified',
    status,
    method: 'POST',
    path,
    size,
    reason: f.reason,
    message: f.message,
    hint: f.hint,
    skew_seconds: f.skewSeconds,
    // cut at the source: a header may carry 16 KB, kept and shown for nothing (#32.5)
    claimed_trigger_id: triggerHeader === undefined ? undefined : claimKept(triggerHeader),
  };
  if (f.diagnosisSkipped) event.diagnosis_skipped = true;
  return event;
}
