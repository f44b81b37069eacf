import { isDelivered } from '../delivery/outcomes.js';
import { compressHours, type RunTracker } from '../delivery/runs.js';
import { NotVerifiedError } from '../errors.js';
import { formatDuration } from '../util/duration.js';
import type { ReceiverEvent } from './event.js';

/**
 * When `listen` stops: a pure function of its flags, what it has counted and what just happened (no
 * sockets, no clock), and what it says when `--within` runs out first.
 */

/** The flags that end a listen. */
export interface StopRules {
  exitAfter?: number;
  until?: string;
  /** `--until-run [MODEL@INIT]`: true when given without a value. */
  untilRun?: string | true;
  within?: number;
}

/** What `listen` has counted so far towards its end. */
export interface Seen {
  /** Verified new deliveries (`--exit-after`). */
  accepted: number;
}

/** Why `listen` stops: what it waited for came (`done`), the store failed for good, or `--within` ran out first. */
export type Stop = 'done' | 'storage_failed' | 'not_complete';

/** What happened: a request's report (and, with --until-run, whether it completed the run), or `--within` ran out. */
export type StopInput = { event: Pick<ReceiverEvent, 'outcome' | 'type' | 'fatal'>; runComplete?: boolean } | 'expired';

/**
 * When `listen` stops, as a function of its flags, what it has counted and what just happened: after
 * `--exit-after N` verified new deliveries; at the first verified `--until TYPE` (a duplicate counts: the
 * delivery came); once `--until-run`'s run is complete; when the processed pairs can no longer be written;
 * and, when `--within` runs out first, not complete (exit 9).
 */
export function whenToStop(o: StopRules, seen: Seen, input: StopInput): { seen: Seen; stop?: Stop } {
  if (input === 'expired') return { seen, stop: o.within !== undefined && (o.until !== undefined || o.untilRun !== undefined) ? 'not_complete' : undefined };
  const { event } = input;
  const now = event.outcome === 'accepted' ? { accepted: seen.accepted + 1 } : seen;
  if (event.fatal) return { seen: now, stop: 'storage_failed' };
  if (o.exitAfter !== undefined && now.accepted >= o.exitAfter) return { seen: now, stop: 'done' };
  if (o.until !== undefined && event.type === o.until && isDelivered(event.outcome)) return { seen: now, stop: 'done' };
  if (o.untilRun !== undefined && input.runComplete) return { seen: now, stop: 'done' };
  return { seen: now };
}

/** What `--within` running out means: the delivery `--until` waits for, or the hours of the run `--until-run` waits for, that did not come. */
export function notComplete(o: StopRules & { initEvent: boolean; saveDir?: string }, runs: RunTracker | undefined): NotVerifiedError {
  const hint = 'Check that the webhook points here, is active and subscribed to those types (`wxhooks webhook get ID`), and `wxhooks doctor`.';
  if (!runs) return new NotVerifiedError(`No verified ${o.until} delivery arrived within ${formatDuration(o.within!)}.`, { hint });
  const p = runs.progress();
  if (!p) return new NotVerifiedError(`No delivery of ${runs.waitingFor()} arrived within ${formatDuration(o.within!)}.`, { hint });
  const what = [p.missing.length ? `missing ${compressHours(p.missing)}` : '', o.initEvent && !p.init_event ? 'its initialization_time.available has not come' : ''].filter(Boolean).join('; ');
  // some of the run came, so the chain works: sending the user to check the webhook (or doctor) would mislead
  const partial = `The rest of the run came, so deliveries reach listen: the service has not sent ${p.missing.length === 1 ? 'this hour' : 'these'} (yet). Wait longer with a larger --within${o.saveDir ? `; see what came with \`wxhooks runs --dir ${o.saveDir}\`` : ''}.`;
  return new NotVerifiedError(`Run ${p.model} ${p.initialization_time} is not complete after ${formatDuration(o.within!)} (${p.have.length}/${p.have.length + p.missing.length} hours): ${what}.`, {
    hint: partial,
  });
}
