import type { Context } from '../context.js';
import { AuthError, NotFoundError, UnreachableError, UsageError, type WxError } from '../errors.js';
import { HISTORY_DEFAULTS } from '../store/history-limits.js';
import { readKept } from '../store/kept.js';
import { readSaveKey } from '../receiver/saved.js';
import { configDir } from '../store/paths.js';
import { runningListens, type RunningListen } from '../store/running.js';
import { shownUrl, storeKind, storeSecrets } from '../store/store-url.js';
import { url as urlParser } from '../util/parse.js';
import { addSensitive } from '../util/redact.js';
import { forwardsAnywhere } from '../receiver/routes.js';
import type { FullRecord, RunsView } from '../receiver/history.js';
import type { Listed } from '../receiver/listed.js';
import type { Attached, Attachment, Replayed } from './attachment.js';
import { KeptHistory, openSavedFolder, type KeptReplay } from './kept.js';
import { LiveListen } from './live.js';

/** Where `wxhooks mcp` is told to look, if anywhere; and, for a kept history, where replays go and what signs them. */
export interface AttachOptions {
  listen?: string;
  store?: string;
  storeSchema: string;
  saveDir?: string;
  forwardTo?: string;
  /** The secret(s) a kept history's replays are signed with (from --webhook or --secret-env), when --forward-to is given. */
  secrets?: () => Promise<string[]>;
  /** Told of each running listen attached from the store folder (the first, one found later, one restarted elsewhere). */
  onListen?: (about: Attached) => Promise<void>;
}

const TOKEN_FILE = 'inspector-token.json';

/** The inspector's token, kept in the store folder by every `listen --inspect` that uses it; never made here. */
async function keptToken(dir: string): Promise<string> {
  const value = await readKept(dir, TOKEN_FILE);
  if (!value) {
    throw new AuthError(`No inspector token is kept in ${dir}: no \`listen --inspect\` has run with this store folder.`, {
      hint: 'Run this server with the same WXHOOKS_CONFIG_DIR as the listen, or give --listen with the link the listen printed (it holds the token).',
    });
  }
  addSensitive(value);
  return value;
}

type Inspecting = RunningListen & { inspector: string };

/** The running listens with an inspector (the last started first): what this server can attach to. */
const inspecting = async (dir: string): Promise<Inspecting[]> => (await runningListens(dir)).filter((r): r is Inspecting => r.inspector !== null);

function listenAbout(inspector: string, record: RunningListen | undefined): Attached {
  if (!record) return { kind: 'listen', where: inspector, replay_to: null, replay_unavailable: 'not known here (this listen did not record itself in this store folder): a replay says' };
  const { pid, receiver, forward_to, forward_routes = {}, webhook_id, started } = record;
  return {
    kind: 'listen',
    where: inspector,
    listen: { pid, receiver, forward_to, forward_routes, webhook_id, started },
    // a delivery is replayed to the URL its type routes to: forward_to is every other type's
    replay_to: forward_to,
    ...(Object.keys(forward_routes).length ? { replay_routes: forward_routes } : {}),
    ...(forwardsAnywhere(record) ? {} : { replay_unavailable: 'this listen forwards nowhere: start it with --forward-to URL' }),
  };
}

/** What to start, said wherever no listen is there yet (the log, status, each delivery tool's error). */
const START_HINT =
  'Start one, with the same WXHOOKS_CONFIG_DIR as this server: `wxhooks listen --webhook ID --inspect` (add --forward-to URL for replays). This server finds it by itself: no restart. Or start this server with --listen URL, --store postgres://… or --save-dir DIR.';

/**
 * What the server attaches to: the listen at --listen; or the history of --store or --save-dir; or else
 * the running `listen --inspect` that recorded itself in the store folder (the last started that answers);
 * or else, when WXHOOKS_STORE_URL is set, that store's history; or else the listen that will be started
 * (SoughtListen). A listen that is not there yet, or does not answer yet, does not stop the server: a
 * client that starts it before the listen would otherwise lose every tool for its session. The delivery
 * tools say what to start until there is one.
 */
export async function attach(ctx: Context, o: AttachOptions): Promise<Attachment> {
  const given = [o.listen !== undefined && '--listen', o.store !== undefined && '--store', o.saveDir !== undefined && '--save-dir'].filter(Boolean);
  if (given.length > 1) throw new UsageError(`Give one of --listen, --store and --save-dir, not ${given.join(' and ')}.`);
  const dir = configDir(ctx.env);
  if (o.listen !== undefined) {
    if (o.forwardTo !== undefined) throw new UsageError('--forward-to is for a kept history (--store, --save-dir): a listen replays to its own --forward-to.');
    urlParser(o.listen, '--listen');
    const u = new URL(o.listen);
    const token = u.searchParams.get('token');
    if (token) addSensitive(token);
    const inspector = `${u.origin}/`;
    const record = (await inspecting(dir)).find((r) => r.inspector === inspector);
    const live = new LiveListen(inspector, token ?? (await keptToken(dir)), listenAbout(inspector, record), ctx.global.timeoutMs);
    // not answering yet is no reason to stop (each tool says it until it does); a token it refuses is
    await live.check().catch((err: unknown) => {
      if (!(err instanceof UnreachableError)) throw err;
      live.about = { ...live.about, waiting: `${err.message} ${err.hint ?? ''}`.trim() };
    });
    return live;
  }
  if (o.store === undefined && o.saveDir === undefined) {
    if (o.forwardTo !== undefined) throw new UsageError('--forward-to is for a kept history (--store, --save-dir): a running listen replays to its own --forward-to.');
    const running = await inspecting(dir);
    if (!running.length && ctx.env.WXHOOKS_STORE_URL) return attachKept(ctx, { ...o, store: ctx.env.WXHOOKS_STORE_URL });
    const sought = new SoughtListen(ctx, dir, o.onListen);
    return (await sought.find().catch(() => undefined)) ?? sought;
  }
  return attachKept(ctx, o);
}

/** The newest running listen of the store folder whose inspector answers, and which follows it when it restarts elsewhere. */
async function attachRunning(ctx: Context, dir: string, running: Inspecting[], onListen?: AttachOptions['onListen']): Promise<LiveListen> {
  const token = await keptToken(dir);
  // a listen that went away may have been started again, elsewhere: the newest recorded one that answers
  const findAgain = async () => {
    for (const record of await inspecting(dir)) {
      const live = new LiveListen(record.inspector, token, listenAbout(record.inspector, record), ctx.global.timeoutMs);
      if (
        await live.check().then(
          () => true,
          () => false,
        )
      ) {
        await onListen?.(live.about);
        return { inspector: record.inspector, about: live.about };
      }
    }
    return undefined;
  };
  let failure: WxError | undefined;
  for (const record of running) {
    const live = new LiveListen(record.inspector, token, listenAbout(record.inspector, record), ctx.global.timeoutMs, findAgain);
    try {
      await live.check();
      return live;
    } catch (err) {
      if (!(err instanceof UnreachableError)) throw err;
      failure = err;
    }
  }
  throw new UnreachableError(`${running.length} running listen${running.length === 1 ? ' is' : 's are'} recorded in ${dir}, but no inspector answers (${failure?.message}).`, {
    hint: 'Start `wxhooks listen --inspect` again (this server finds it by itself), or give --listen URL.',
  });
}

/** How often a watch looks for a listen that is not there yet. */
const SEEK_MS = 1000;

/**
 * The running `listen --inspect` of the store folder, before there is one: each call looks for it
 * (through the folder's records), and once found, it is the attachment (it follows a restarted listen
 * itself). Until then, every delivery tool fails with what to start.
 */
export class SoughtListen implements Attachment {
  private found: LiveListen | undefined;

  constructor(
    private readonly ctx: Context,
    private readonly dir: string,
    private readonly onListen?: AttachOptions['onListen'],
  ) {}

  get about(): Attached {
    return (
      this.found?.about ?? {
        kind: 'listen',
        where: `no running \`wxhooks listen --inspect\` in ${this.dir} yet`,
        waiting: START_HINT,
        replay_to: null,
        replay_unavailable: 'no listen is attached yet',
      }
    );
  }

  /** The listen, looked for now if it was not found before; a NotFoundError (or UnreachableError) that says what to start. */
  async find(): Promise<LiveListen> {
    if (this.found) return this.found;
    const running = await inspecting(this.dir);
    if (!running.length) throw new NotFoundError(`No \`wxhooks listen --inspect\` runs with the store folder ${this.dir} (yet).`, { hint: START_HINT });
    const live = await attachRunning(this.ctx, this.dir, running, this.onListen);
    await this.onListen?.(live.about);
    this.found = live;
    return live;
  }

  async lookAgain(): Promise<void> {
    await this.find().catch(() => undefined);
  }

  async records(): Promise<Listed[]> {
    return (await this.find()).records();
  }

  async one(id: number): Promise<{ record: FullRecord; attempts: FullRecord[] } | undefined> {
    return (await this.find()).one(id);
  }

  async search(text: string, limit: number): Promise<number[]> {
    return (await this.find()).search(text, limit);
  }

  async runs(): Promise<RunsView & { expect_hours: number[] | null }> {
    return (await this.find()).runs();
  }

  async replay(id: number, body?: Buffer): Promise<Replayed> {
    return (await this.find()).replay(id, body);
  }

  watch(listener: (record: Listed) => void, after?: number): () => void {
    if (this.found) return this.found.watch(listener, after);
    // not there yet: looked for until it is (everything it has then came after this watch began)
    let stop: (() => void) | undefined;
    let stopped = false;
    const look = setInterval(() => {
      void this.find().then(
        (live) => {
          clearInterval(look);
          if (!stopped) stop = live.watch(listener, 0);
        },
        () => undefined,
      );
    }, SEEK_MS).unref();
    return () => {
      stopped = true;
      clearInterval(look);
      stop?.();
    };
  }

  async close(): Promise<void> {
    await this.found?.close();
  }
}

async function attachKept(ctx: Context, o: AttachOptions): Promise<Attachment> {
  let replay: KeptReplay | undefined;
  if (o.forwardTo !== undefined) {
    urlParser(o.forwardTo, '--forward-to');
    if (!o.secrets) throw new UsageError('--forward-to needs a secret to sign the replays with: --webhook ID (its stored secret) or --secret-env VAR.');
    replay = { to: o.forwardTo, secret: (await o.secrets())[0]!, timeoutMs: ctx.global.timeoutMs, clock: ctx.clock };
  }
  const replayAbout = {
    replay_to: o.forwardTo ?? null,
    ...(o.forwardTo ? {} : { replay_unavailable: 'a kept history replays only when this server is started with --forward-to URL (and --webhook ID or --secret-env VAR)' }),
  };
  if (o.saveDir !== undefined) {
    // a file is taken as verified when it carries this store's mark, or verifies with the secret given
    const folder = await openSavedFolder(o.saveDir, HISTORY_DEFAULTS, await readSaveKey(configDir(ctx.env)), o.secrets ? await o.secrets() : []);
    return new KeptHistory(folder.history, { kind: 'save-dir', where: o.saveDir, ...replayAbout }, replay, folder);
  }
  const url = o.store!;
  storeSecrets(url).forEach(addSensitive);
  if (storeKind(url) === 'file') throw new UsageError('The file store keeps no history: give --save-dir DIR, or attach to the running listen.');
  const [{ PgStore }, { PgHistory }] = await Promise.all([import('../store/postgres.js'), import('../receiver/history.js')]);
  const pg = await PgStore.open({ url, schema: o.storeSchema, ttlMs: 0, leaseMs: 0, readOnly: true });
  return new KeptHistory(new PgHistory(pg, HISTORY_DEFAULTS), { kind: 'store', where: `${shownUrl(url)} (schema ${o.storeSchema})`, ...replayAbout }, replay, undefined, () => pg.close());
}
