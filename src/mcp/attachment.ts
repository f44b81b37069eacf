import type { FullRecord, RunsView } from '../receiver/history.js';
import type { Listed } from '../receiver/listed.js';
import { NotFoundError, NotVerifiedError, RefusedError, type WxError } from '../errors.js';
import type { ForwardResult } from '../receiver/forward.js';
import type { RunFigures } from '../observe/figures.js';
import type { ReplayRefused } from '../receiver/replay.js';

/** What the server is attached to, as the status tool and the logs show it: never a token or a password. */
export interface Attached {
  kind: 'listen' | 'store' | 'save-dir';
  /** The inspector's address (without its token), the store's URL (without its password), or the folder. */
  where: string;
  /** The running listen, as it recorded itself (src/store/running.ts), when it is one. */
  listen?: { pid: number; receiver: string; forward_to: string | null; forward_routes?: Record<string, string>; webhook_id: string | null; started: string };
  /** Where a replay goes (of a type routed elsewhere: `replay_routes`); null when none can be made, and `replay_unavailable` says why. */
  replay_to: string | null;
  /** A running listen's routes by type (`--forward-to TYPE=URL`): a delivery of such a type is replayed there. */
  replay_routes?: Record<string, string>;
  replay_unavailable?: string;
  /** What this server waits for, when there is nothing to read yet (no listen started, or none answers): what to start. */
  waiting?: string;
}

/** A replay's outcome: the app's answer (with its headers and the start of its body), and the replay's own record, when one is kept. */
export interface Replayed {
  result: ForwardResult & { trigger_id: string };
  replay_id?: number;
}

/**
 * A replay refused by replay's rules (src/receiver/replay.ts), as the typed error a tool answers with: in
 * the rules' own words, the delivery gone as `gone` says it (where it was looked for).
 */
export function replayRefused(id: number, r: Pick<ReplayRefused, 'rule' | 'error'>, gone: string): WxError {
  switch (r.rule) {
    case 'gone':
      return new NotFoundError(gone);
    case 'notVerified':
      return new NotVerifiedError(`${r.error.charAt(0).toUpperCase()}${r.error.slice(1)}.`, { hint: "What did not verify is never signed with the webhook's secret." });
    default:
      return new RefusedError(`Delivery ${id} cannot be replayed: ${r.error}.`);
  }
}

/**
 * The deliveries the MCP server reads: a running `listen --inspect` (through its inspector's API), or a
 * history kept elsewhere (a shared PostgreSQL store, a `--save-dir` folder). The tools know only this.
 */
export interface Attachment {
  /** (It may change: a listen found through the store folder that restarted elsewhere is followed.) */
  readonly about: Attached;
  /** Every record the source keeps (its own limits bound them), oldest first, as the inspector's list has them. */
  records(): Promise<Listed[]>;
  /** One record whole (its headers, body, verdict, your app's answer), with every attempt of its delivery. */
  one(id: number): Promise<{ record: FullRecord; attempts: FullRecord[] } | undefined>;
  /** The ids of the records whose report or kept body holds `text` (any case), newest first. */
  search(text: string, limit: number): Promise<number[]>;
  /** Each model run seen, and the hours a run should have when the source knows them (listen's --expect-hours). */
  runs(): Promise<RunsView & { expect_hours: number[] | null }>;
  /** Sends a verified delivery again to the app, signed afresh (with `body` in place of its own: edited). Throws a WxError when it cannot. */
  replay(id: number, body?: Buffer): Promise<Replayed>;
  /**
   * Calls `listener` with each new record, as it comes; returns how to stop. `after`: the newest id the
   * caller has seen, so that nothing after it is missed while the watch starts (default: the newest now).
   */
  watch(listener: (record: Listed) => void, after?: number): () => void;
  /** The counters of the listen's run (a running listen only: its inspector's `/api/metrics`). */
  figures?(): Promise<RunFigures>;
  /** Looks again for what it reads, when it was not there (a listen started since): before status answers. */
  lookAgain?(): Promise<void>;
  close(): Promise<void>;
}
