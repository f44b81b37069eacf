// The one outcome vocabulary: what became of a request, whichever door it came through (`listen`, the
// Node middleware, the web handler, the relay, a sink's consumer). Each door reports a subset of these
// names, each name one meaning. They are written in listen's NDJSON, the inspector, the history's SQL and
// the handler's receipt, and read by users' scripts (`jq 'select(.outcome=="accepted")'`): a name is
// never changed, only added. No imports: the inspector page bundles this.

/** Every outcome, each with what it means. */
export const OUTCOMES = {
  accepted: "verified, new, handled, and its pair stored: answered 2xx (a stream's message: acknowledged)",
  duplicate: 'verified, and processed before: answered 200, nothing handled again',
  in_progress: 'verified, and being handled right now (a live claim, here or in another instance): 409',
  forward_failed: 'verified, and your app was down, slow or answered non-2xx: 502, not marked processed',
  refused_by_flag: 'verified, and answered as --respond-status asked (not 2xx): not marked processed',
  handler_failed: "verified, and a handler threw: 500 (a stream's message: given back), not marked processed, so the retry runs it again",
  handler_timed_out: "verified, and a handler ran past its time: 500 (a stream's message: given back), its claim let go, so the retry runs it again",
  replayed: 'a delivery sent again to your app from the history (the inspector): never counted as processed',
  sink_failed: 'verified, and a sink (NATS JetStream, Redis) did not take it: 503 with Retry-After while the broker is away, 502 when it refused it for good; not marked processed',
  store_failed: 'the processed pairs could not be read or written (a full disk, a database away): 503',
  dead_lettered:
    "a stream's message its consumer will not process: not ours, not verified, its envelope disagreeing with its signed content, refused by its handler, or past its deliveries; moved to the dead letters with why, and acknowledged",
  overloaded: 'the bodies in flight would pass the in-flight limit: 503 before the body was read',
  unverified: 'no signature matched, a signature header missing, or a timestamp out of its window: 401',
  bad_request: 'not a delivery: a Trigger-Id or Webhook-Timestamp header missing, a body that is not a JSON object, malformed HTTP: 400',
  timed_out: 'the request did not arrive within the read timeout: 408, its connection closed',
  aborted: 'the client went away before its body arrived: nothing was answered (status 0)',
  too_large: 'the body is over the body limit: 413, read no further',
  method_not_allowed: 'not a POST: 405',
  not_found: 'another path: 404',
  error: 'something failed inside the receiver (the delivery could not be saved, a bug): 500',
} as const;

export type Outcome = keyof typeof OUTCOMES;

export const OUTCOME_NAMES = Object.keys(OUTCOMES) as Outcome[];

/**
 * The outcomes of requests refused before (or without) verifying: anyone can cause them, they claim
 * nothing, and nothing of theirs is signed again.
 */
export const REFUSED_OUTCOMES: readonly Outcome[] = ['unverified', 'bad_request', 'too_large', 'overloaded', 'timed_out', 'aborted', 'not_found', 'method_not_allowed'];

/** The outcomes of a verified delivery that was processed: it counts towards `--exit-after`, `--until`, a model run. */
export const DELIVERED_OUTCOMES: readonly Outcome[] = ['accepted', 'duplicate'];
