import * as DEFAULTS from '../delivery/defaults.js';

/**
 * What a history of requests keeps (in `listen`'s memory, or in the shared PostgreSQL store): the newest
 * `rows` verified requests, their bodies together at most `bytes` (past that, the older ones keep their
 * first `partBytes`, then nothing), and apart from them the newest `refusedRows` refused requests, with
 * at most their first `partBytes` each. An anonymous sender can thus push out only other refused requests,
 * and hold at most `refusedRows` × `partBytes` of body.
 */
export interface HistoryLimits {
  rows: number;
  bytes: number;
  partBytes: number;
  refusedRows: number;
}

/** A verified body larger than this is kept in part (its start) even within the budget. */
export const KEEP_BODY: number = 1024 * 1024;

/** The limits when none are given: DEFAULTS' (src/delivery/defaults.ts). */
export const HISTORY_DEFAULTS: HistoryLimits = { rows: DEFAULTS.historyRows, bytes: DEFAULTS.historyBytes, partBytes: DEFAULTS.historyPartBytes, refusedRows: DEFAULTS.historyRefusedRows };

/**
 * The most of a refused request's claimed Trigger-Id that is kept or shown, in characters. A real one is
 * about 30; a request that did not verify may carry one of 16 KB, for nothing, in every request: kept
 * whole, 20,000 of them took `listen --inspect` with a stalled page from 55 to 452 MiB (#32.5).
 */
export const CLAIM_KEPT = 64;

/** A claimed Trigger-Id as it is kept and shown: whole up to CLAIM_KEPT characters, else its start and `…`. */
export const claimKept = (id: string): string => (id.length <= CLAIM_KEPT ? id : `${id.slice(0, CLAIM_KEPT)}…`);
