import type { ForwardResult } from './forward.js';

export type Outcome =
  | 'listening'
  | 'accepted'
  | 'duplicate'
  | 'in_progress'
  | 'forward_failed'
  | 'refused_by_flag'
  /** A delivery re-sent to the app from the history (the inspector's replay): never counted as processed. */
  | 'replayed'
  | 'store_failed'
  | 'overloaded'
  | 'unverified'
  | 'bad_request'
  | 'timed_out'
  /** The client went away before its body arrived: nothing was answered (status 0). */
  | 'aborted'
  | 'too_large'
  | 'method_not_allowed'
  | 'not_found'
  | 'error';

/**
 * Where the trigger half of the dedupe key came from: the body's `trigger_id`, the `Trigger-Id`
 * header, or (when the matched layout does not sign the Trigger-Id and the body has no `trigger_id`)
 * a hash of the signed timestamp and body, so that a captured delivery re-sent under a new Trigger-Id
 * is still a duplicate.
 */
export type DedupeSource = 'body' | 'header' | 'hash';

/** One line of `listen`'s report: what arrived and what was answered. */
export interface ReceiverEvent {
  time: string;
  outcome: Outcome;
  status: number;
  method?: string;
  path?: string;
  size?: number;
  type?: string;
  webhook_id?: string;
  subscription_id?: string;
  trigger_id?: string;
  model?: string;
  initialization_time?: string;
  forecast_hour?: number;
  test?: boolean;
  layout?: string;
  /** Set on the first match in auto mode: the layout is now pinned. */
  pinned?: boolean;
  /** Set when the matched layout does not sign the Trigger-Id: what the dedupe key was taken from instead. */
  dedupe_key?: DedupeSource;
  warning?: string;
  forward?: ForwardResult;
  saved_to?: string;
  reason?: string;
  message?: string;
  hint?: string;
  skew_seconds?: number;
  /** `store_failed` only: the store has failed for too long, and listen stops. */
  fatal?: boolean;
}
