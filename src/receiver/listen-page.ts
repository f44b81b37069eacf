import { randomBytes } from 'node:crypto';
import type { RunFigures } from '../observe/figures.js';
import type { LateNotification } from '../delivery/reconcile.js';
import type { Clock } from '../util/clock.js';
import type { ReceiverEvent } from './event.js';
import { History, type HistorySource } from './history.js';
import { startInspector, type RunningInspector } from './inspector.js';
import { replayable, replayCommands, replayFromHistory } from './replay.js';
import { routeFor, type ForwardRoutes } from './routes.js';
import { readSavedDir, savedAsEvent, savedBody } from './saved.js';

/**
 * `listen --inspect`: the inspector page (src/receiver/inspector.ts) wired to this listen: the history it
 * shows (first, with --save-dir, what was saved before), the token kept in the store folder (so that a
 * page left open reconnects to a restarted listen), replay (with changes) to --forward-to, and commands to
 * send a delivery again; every replay under replay's rules (src/receiver/replay.ts).
 */

/**
 * What was saved to `--save-dir` before this listen, into the history the page shows: each accepted if it
 * shows it verified (the store's mark, or its signature), else listed as not verified. Read before the
 * receiver takes its first request, so that what this listen saves is listed once, as it comes.
 */
export async function historyFromSaved(history: HistorySource, saveDir: string, saveKey: Buffer | undefined, secrets: string[]): Promise<void> {
  if (!(history instanceof History)) return; // a PostgreSQL history holds what was received already
  const { deliveries } = await readSavedDir(saveDir, saveKey);
  for (const d of deliveries.slice(-history.limits.rows))
    history.add(savedAsEvent(d, saveKey, secrets), { headers: d.saved.headers, body: savedBody(d.saved), received: Date.parse(d.saved.received_at), ms: 0 });
}

export interface ListenPageOptions {
  /** Where it binds (`--inspect`), and the other names it may be reached by (`--inspect-host`). */
  host: string;
  port: number;
  hostNames?: string[];
  history: HistorySource;
  /** The store folder: where the page's token is kept. */
  dir: string;
  clock: Clock;
  /** What the page says of this listen. */
  about: Record<string, unknown>;
  /** Every secret listen verifies with (the first signs a replay), and the key of --save-dir's marks. */
  secrets: string[];
  saveKey?: Buffer;
  forwardTo?: ForwardRoutes;
  forwardTimeoutMs: number;
  /** Where a command sends a delivery again when it does not go to --forward-to: listen's own receiver. */
  receiverUrl: string;
  /** The webhook `wxhooks send` names in a command (an existing one: a temporary webhook is gone after listen). */
  webhook?: string;
  /** A replay made from the page, reported as listen reports a delivery. */
  replayed(event: ReceiverEvent, of: number): void;
  /** `--watch-runs`: the notifications late now, for the Runs view. */
  late?: () => LateNotification[];
  /** `--metrics`, `--inspect`: this run's figures, for the Figures view. */
  figures?: () => RunFigures;
}

/** The page, started: its link (with the token), and a warning when the kept token could not be trusted. */
export async function startListenPage(o: ListenPageOptions): Promise<{ inspector: RunningInspector; warning?: string }> {
  const { keptValue } = await import('../store/kept.js');
  const token = await keptValue(o.dir, 'inspector-token.json', () => randomBytes(24).toString('base64url'));
  const secret = o.secrets[0]!;
  const forwardTo = o.forwardTo;
  const inspector = await startInspector({
    host: o.host,
    port: o.port,
    hostNames: o.hostNames,
    history: o.history,
    token: token.value,
    late: o.late,
    figures: o.figures,
    about: o.about,
    replay: forwardTo
      ? async (id, edited) => {
          const r = await replayFromHistory(o.history, id, { secret, to: forwardTo, timeoutMs: o.forwardTimeoutMs, clock: o.clock, edited, saveKey: o.saveKey });
          if (!r.ok) return { status: r.status, body: { error: r.error } };
          o.replayed(r.event, id);
          return { status: 200, body: r.result };
        }
      : undefined,
    async commands(id) {
      const found = await replayable(o.history, id, { secrets: o.secrets, saveKey: o.saveKey });
      if (!found.ok) return { status: found.status, body: { error: found.error } };
      const to = (forwardTo && routeFor(forwardTo, found.record.type)) ?? o.receiverUrl;
      return { status: 200, body: replayCommands(found.record, found.body, secret, to, o.webhook) };
    },
  });
  return { inspector, warning: token.warning };
}
