// The one outcome vocabulary: what became of a request, whichever door it came through (`listen`, the
// Node middleware, the web handler, the relay, a sink's consumer). Each door reports a subset of these
// names, each name one meaning. They are written in listen's NDJSON, the inspector, the history's SQL and
// the handler's receipt, and read by users' scripts (`jq 'select(.outcome=="accepted")'`): a name is
// never changed, only added. Each row also holds what every reader of the outcome needs: its label (the
// inspector's rows, listen's lines, MCP), whether it counts as delivered, whether anyone can cause it,
// what it shows of the chain to `--check`, and where the inspector's filter lists it.
// Adding an outcome is adding a row. No imports: the inspector page bundles this.

/** One outcome: what it means, the words a person reads for it, and the two rules read from it. */
export interface OutcomeRow {
  /** What it means, for the reference and for `wxhooks mcp`'s tools. */
  means: string;
  /** A few words for a row or a line: what the inspector shows in its list, and listen where it has no line of its own. */
  label: string;
  /** A verified delivery that was processed (now or before): it counts towards `--exit-after`, `--until`, a model run. */
  delivered?: true;
  /** Refused before (or without) verifying: anyone can cause it, it claims nothing, and nothing of it is signed again. */
  refused?: true;
  /**
   * What a ping's delivery that ended so shows of the chain (`listen --check`, `doctor`): it reached this
   * receiver and verified, or it reached it and is none of its deliveries (it did not verify, or came to
   * another path or method). Unset: the check waits on (the service retries, or says why it failed).
   */
  check?: 'verified' | 'not_verified';
  /** The inspector's outcome filter lists it under this entry of OUTCOME_FILTERS (one entry may list several outcomes). */
  filter?: keyof typeof FILTERS;
}

/** The inspector's outcome filter: its entries, in the order it lists them, with their words; each outcome's row says which lists it. */
const FILTERS = {
  accepted: 'accepted',
  duplicate: 'duplicate',
  unverified: 'not verified (400/401)',
  forward_failed: 'your app failed (502)',
  sink_failed: 'a sink failed (502/503)',
  limits: 'refused: limits (408/413/503)',
  replayed: 'replays',
} as const;

/** Every outcome, each with what it means, its label, and whether it is delivered or refused. */
export const OUTCOMES = {
  accepted: { label: 'accepted', delivered: true, check: 'verified', filter: 'accepted', means: "verified, new, handled, and its pair stored: answered 2xx (a stream's message: acknowledged)" },
  duplicate: { label: 'duplicate', delivered: true, check: 'verified', filter: 'duplicate', means: 'verified, and processed before: answered 200, nothing handled again' },
  in_progress: { label: 'in progress', check: 'verified', means: 'verified, and being handled right now (a live claim, here or in another instance): 409' },
  forward_failed: { label: 'app failed', filter: 'forward_failed', means: 'verified, and your app was down, slow or answered non-2xx: 502, not marked processed' },
  refused_by_flag: { label: 'refused by flag', check: 'verified', means: 'verified, and answered as --respond-status asked (not 2xx): not marked processed' },
  handler_failed: { label: 'handler failed', means: "verified, and a handler threw: 500 (a stream's message: given back), not marked processed, so the retry runs it again" },
  handler_timed_out: { label: 'handler timed out', means: "verified, and a handler ran past its time: 500 (a stream's message: given back), its claim let go, so the retry runs it again" },
  replayed: { label: 'replayed', filter: 'replayed', means: 'a delivery sent again to your app from the history (the inspector): never counted as processed' },
  sink_failed: {
    label: 'sink failed',
    filter: 'sink_failed',
    means: 'verified, and a sink (NATS JetStream, Redis) did not take it: 503 with Retry-After while the broker is away, 502 when it refused it for good; not marked processed',
  },
  store_failed: { label: 'store failed', means: 'the processed pairs could not be read or written (a full disk, a database away): 503' },
  dead_lettered: {
    label: 'dead lettered',
    means:
      "a stream's message its consumer will not process: not ours, not verified, its envelope disagreeing with its signed content, refused by its handler, or past its deliveries; moved to the dead letters with why, and acknowledged",
  },
  overloaded: { label: 'overloaded', refused: true, filter: 'limits', means: 'the bodies in flight would pass the in-flight limit: 503 before the body was read' },
  unverified: { label: 'not verified', refused: true, check: 'not_verified', filter: 'unverified', means: 'no signature matched, a signature header missing, or a timestamp out of its window: 401' },
  bad_request: {
    label: 'not verified',
    refused: true,
    check: 'not_verified',
    filter: 'unverified',
    means: 'not a delivery: a Trigger-Id or Webhook-Timestamp header missing, a body that is not a JSON object, malformed HTTP: 400',
  },
  timed_out: { label: 'timed out', refused: true, filter: 'limits', means: 'the request did not arrive within the read timeout: 408, its connection closed' },
  aborted: { label: 'aborted', refused: true, means: 'the client went away before its body arrived: nothing was answered (status 0)' },
  too_large: { label: 'too large', refused: true, filter: 'limits', means: 'the body is over the body limit: 413, read no further' },
  method_not_allowed: { label: 'method not allowed', refused: true, check: 'not_verified', means: 'not a POST: 405' },
  not_found: { label: 'not found', refused: true, check: 'not_verified', means: 'another path: 404' },
  error: { label: 'error', means: 'something failed inside the receiver (the delivery could not be saved, a bug): 500' },
} as const;

/**
 * Every row is an OutcomeRow, with no key OutcomeRow lacks: the check `satisfies` would make, as a type,
 * since a declaration written file by file (isolatedDeclarations) cannot take its type from `satisfies`.
 */
type Rows<T extends { readonly [K in keyof T]: OutcomeRow & { readonly [P in Exclude<keyof T[K], keyof OutcomeRow>]: never } }> = T;
type _OutcomesAreRows = Rows<typeof OUTCOMES>;

export type Outcome = keyof typeof OUTCOMES;

export const OUTCOME_NAMES = Object.keys(OUTCOMES) as Outcome[];

const where = (rule: 'delivered' | 'refused'): readonly Outcome[] => OUTCOME_NAMES.filter((o) => (OUTCOMES[o] as OutcomeRow)[rule]);

/** The outcomes of requests refused before (or without) verifying (the rows marked `refused`). */
export const REFUSED_OUTCOMES: readonly Outcome[] = where('refused');

/** The outcomes of a verified delivery that was processed (the rows marked `delivered`): what the history's SQL counts as delivered too. */
export const DELIVERED_OUTCOMES: readonly Outcome[] = where('delivered');

/** Whether an outcome counts as delivered: towards `--exit-after`, `--until`, a model run. */
export const isDelivered = (outcome: string): boolean => (OUTCOMES as Record<string, OutcomeRow>)[outcome]?.delivered === true;

/** What a ping's delivery that ended with this outcome shows of the chain (`--check`, `doctor`), if anything. */
export const checkShows = (outcome: string): OutcomeRow['check'] => (OUTCOMES as Record<string, OutcomeRow>)[outcome]?.check;

/** The inspector's outcome filter: each entry's value (what the page keeps), its words, and the outcomes it shows. */
export const OUTCOME_FILTERS: readonly { value: keyof typeof FILTERS; words: string; outcomes: readonly Outcome[] }[] = (Object.keys(FILTERS) as (keyof typeof FILTERS)[]).map((value) => ({
  value,
  words: FILTERS[value],
  outcomes: OUTCOME_NAMES.filter((o) => (OUTCOMES[o] as OutcomeRow).filter === value),
}));

/** The label of an outcome (its name, for one this vocabulary does not know: a newer receiver's). */
export const outcomeLabel = (outcome: string): string => (OUTCOMES as Record<string, OutcomeRow>)[outcome]?.label ?? outcome.replace(/_/g, ' ');
