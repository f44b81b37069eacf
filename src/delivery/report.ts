import type { Outcome } from './outcomes.js';

// What a door reports of each request: `listen`'s NDJSON line, the history's record, the inspector's
// rows. Types only, and no imports but the outcomes: the inspector page bundles it.

export type { Outcome };

/**
 * Where the trigger half of the dedupe key came from: the body's `trigger_id`, the `Trigger-Id`
 * header, or (when the matched layout does not sign the Trigger-Id and the body has no `trigger_id`)
 * a hash of the signed timestamp and body, so that a captured delivery re-sent under a new Trigger-Id
 * is still a duplicate.
 */
export type DedupeSource = 'body' | 'header' | 'hash';

/** What forwarding a delivery to your app did. */
export interface ForwardResult {
  ok: boolean;
  status?: number;
  /** The start of the app's answer, on one line (what `listen`'s line shows). */
  body?: string;
  /** The app's answer as it came: its headers, and the start of its body (the inspector shows them). */
  answer?: { headers: Record<string, string>; body: string };
  error?: string;
  ms: number;
}

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
  /** A verified delivery's trigger id (the dedupe key's trigger half, or the Trigger-Id header when that was a hash). */
  trigger_id?: string;
  /** The Trigger-Id header of a request that did not verify: what it claims to be, nothing more. */
  claimed_trigger_id?: string;
  model?: string;
  initialization_time?: string;
  forecast_hour?: number;
  test?: boolean;
  /** A catch-up built from the forecast API by `reconcile --catch-up` (its signed body says so), not a delivery of the service's. */
  catch_up?: true;
  /** The notification's own `created_at` (when the service made it; for a forecast hour, about when the hour became available): what its delivery lag is counted from. */
  created_at?: string;
  /** The layout whose signature matched: set on every request that verified, and only on those (see `verified`). */
  layout?: string;
  /** Set on the first match in auto mode: the layout is now pinned. */
  pinned?: boolean;
  /** Set when the matched layout does not sign the Trigger-Id: what the dedupe key was taken from instead. */
  dedupe_key?: DedupeSource;
  warning?: string;
  forward?: ForwardResult;
  /** Why a verified delivery was not forwarded though listen forwards: its type has no `--forward-to` (`no --forward-to for TYPE`). */
  not_forwarded?: string;
  /** `listen --sink`: where each sink put it (the stream's id), and whether the broker had its pair already. */
  published?: { sink: string; id: string; duplicate: boolean }[];
  saved_to?: string;
  reason?: string;
  message?: string;
  hint?: string;
  skew_seconds?: number;
  /** No signature matched, and the further look for why (a re-formatted body? another layout?) was not taken: at most a few a minute. */
  diagnosis_skipped?: true;
  /** `store_failed` only: the store has failed for too long, and listen stops. */
  fatal?: boolean;
  /** A retry of a delivery processed before whose pair could not be stored then, and is now: answered as a duplicate. */
  stored_later?: true;
  /** A replay whose body was edited before it was sent (the inspector's "replay with changes"). */
  replay_edited?: true;
  /** Set when the answer could not be written: the connection closed first. (The client got nothing; a retry is a duplicate.) */
  answer_sent?: false;
  /** `listen --relay`: a delivery that did not verify here, kept at the relay as refused (its channel, its number there) until someone drops it. */
  relay_kept?: { channel: string; seq: number };
}

/** Whether a report is of a request whose signature verified: only such bytes are ever signed again (replay). */
export const verified = (e: Pick<ReceiverEvent, 'layout'>): boolean => e.layout !== undefined;

/** One request `listen` answered, as the inspector shows it: the report, and the history's id for it. */
export interface DeliveryRecord extends ReceiverEvent {
  id: number;
  /** When it was answered, after how long (ms). */
  ms?: number;
  /** A replay (from the inspector or `deliveries replay`) of delivery N: never counted as processed. */
  replay_of?: number;
}

/** A record with what arrived: its headers and (the start of) its body. */
export interface FullRecord extends DeliveryRecord {
  headers: Record<string, string>;
  /** The body as text when it is UTF-8, else `body_base64`. */
  body?: string;
  body_base64?: string;
  /** Bytes of the body kept: less than `size` when it was cut. */
  body_kept: number;
  /** Who sent it (address:port). */
  peer?: string;
  /** Your app's answer as it came, when the delivery was forwarded: its headers and the start of its body. */
  app_answer?: { headers: Record<string, string>; body: string };
}
