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
import type { Attached, Attachment } from './attachment.js';
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

/**
 * What the server attaches to: the listen at --listen; or the history of --store or --save-dir; or else
 * the running `listen --inspect` that recorded itself in the store folder (the last started that answers);
 * or else, when WXHOOKS_STORE_URL is set, that store's history. Nothing: a clear error (the server does
 * not start), which says what to start or give.
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
    await live.check();
    return live;
  }
  if (o.store === undefined && o.saveDir === undefined) {
    const running = await inspecting(dir);
    if (running.length) return attachRunning(ctx, dir, running, o);
    if (ctx.env.WXHOOKS_STORE_URL) return attachKept(ctx, { ...o, store: ctx.env.WXHOOKS_STORE_URL });
    throw new NotFoundError(`No running \`wxhooks listen --inspect\` was found in ${dir}, and nothing else was given to attach to.`, {
      hint: "Start one (wxhooks listen --webhook ID --inspect), with the same WXHOOKS_CONFIG_DIR as this server; or give --listen URL, --store postgres://… or --save-dir DIR; or --service-only for the service's tools alone.",
    });
  }
  return attachKept(ctx, o);
}

async function attachRunning(ctx: Context, dir: string, running: Inspecting[], o: AttachOptions): Promise<Attachment> {
  if (o.forwardTo !== undefined) throw new UsageError('--forward-to is for a kept history (--store, --save-dir): a running listen replays to its own --forward-to.');
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
      )
        return { inspector: record.inspector, about: live.about };
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
    hint: 'Start `wxhooks listen --inspect` again, or give --listen URL.',
  });
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
