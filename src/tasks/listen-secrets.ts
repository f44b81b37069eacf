import { watch, type FSWatcher } from 'node:fs';
import { hostname } from 'node:os';
import { NGROK_API, ngrokPublicUrl } from '../api/ngrok.js';
import type { Webhook } from '../api/normalize.js';
import { createTemporary, type Temporary, type TemporaryEvent } from '../api/temporary.js';
import type { Context } from '../context.js';
import type { WxError } from '../errors.js';
import { relayTemporary, type RelayTarget } from '../receiver/relay-target.js';
import { lastingChannel } from '../relay/channels.js';
import { Verifier } from '../signing/verify.js';
import { configDir } from '../store/paths.js';
import { printable } from '../util/printable.js';
import { addSensitive } from '../util/redact.js';
import { SUBSCRIPTION_TYPES } from '../vocabulary.js';
import { resolveSecrets, secretStoreFor } from './secrets.js';
import { baseUrlFor, serviceFor } from './service.js';

/**
 * What `listen` verifies with, from one of its three sources: a temporary webhook of its own (created now,
 * at `--public-url` or at its `--relay`), or an existing webhook's secret (`--webhook ID` from the store,
 * `--secret-env VAR`, or stdin); and, for `--webhook ID`, the secret's rotation while it runs (the stored
 * secret changed: the webhook was re-created, `secret set`).
 */

/** What `listen` is listening for: a temporary webhook of its own, or an existing one whose secret it is given. */
export interface Listening {
  secrets: string[];
  from: string;
  temporary?: Temporary;
  /** The existing webhook, when it could be looked up. */
  hook?: Webhook;
  /** The service said it has no such webhook (its stored secret is of an older one). */
  missing?: boolean;
  /** The service's base URL, when known: what the stored secret is keyed by. */
  base?: string;
  /** With --relay: the relay and channel deliveries come from. */
  relay?: RelayTarget;
}

/** The flags that say where the secret comes from. */
export interface SecretSourceFlags {
  port: number;
  path: string;
  relay?: string;
  webhook?: string;
  secretEnv?: string;
  publicUrl?: string;
  subscribe?: string[];
  clean?: boolean;
}

/** Where what happens on the way is told: the temporary webhook's events, and warnings. */
export interface ListeningReport {
  temporary(event: TemporaryEvent): void;
  warn(text: string): void;
}

/** The secret to verify with: the temporary webhook's (created now), or the one given; and the webhook, looked up when it can be. */
export async function listeningFor(ctx: Context, o: SecretSourceFlags, report: ListeningReport): Promise<Listening> {
  if (o.relay !== undefined && o.webhook === undefined) {
    const { service } = await serviceFor(ctx);
    const { temporary, target, base } = await relayTemporary(ctx, service, { relay: o.relay, subscribe: o.subscribe, clean: o.clean }, report.temporary);
    return { secrets: [temporary.hook.secret!], from: `the secret of temporary webhook ${temporary.hook.id} (in memory, and in the relay)`, temporary, base, relay: target };
  }
  if (o.publicUrl !== undefined) {
    const { service } = await serviceFor(ctx);
    const base = o.publicUrl === 'ngrok' ? await ngrokPublicUrl(ctx.env.NGROK_API_URL || NGROK_API, o.port) : o.publicUrl;
    const temporary = await createTemporary(service, {
      url: o.path === '/' ? base : `${base.replace(/\/+$/, '')}${o.path}`,
      subscribe: o.subscribe ?? [...SUBSCRIPTION_TYPES],
      host: hostname(),
      pid: process.pid,
      started: new Date(ctx.clock.now()).toISOString(),
      clean: Boolean(o.clean),
      report: report.temporary,
    });
    return { secrets: [temporary.hook.secret!], from: `the secret of temporary webhook ${temporary.hook.id} (in memory only)`, temporary, base: service.http.baseUrl };
  }
  const { secrets, from } = await resolveSecrets(ctx, { webhook: o.webhook, secretEnv: o.secretEnv, command: 'listen' });
  const base = o.webhook === undefined ? undefined : (await baseUrlFor(ctx)).url;
  const looked = o.webhook === undefined ? {} : await lookUp(ctx, o.webhook, report.warn);
  // a lasting channel: the one the webhook's URL names, else the one noted here, else a new one (its name no one can work out)
  const relay =
    o.relay !== undefined && o.webhook !== undefined && base !== undefined
      ? {
          url: o.relay,
          token: ctx.env.WXHOOKS_RELAY_TOKEN,
          channel: (await lastingChannel({ dir: configDir(ctx.env), relay: o.relay, base, webhook: o.webhook, hookUrl: looked.hook?.url })).channel,
          temporary: false,
        }
      : undefined;
  return { secrets, from, base, relay, ...looked };
}

/**
 * The webhook `--webhook ID` names, when credentials are at hand to ask the service; `missing` when the
 * service has none (said once listen knows its own address), nothing (and a warning) when it cannot be
 * asked. Listening goes on either way: the secret is what verifies.
 */
async function lookUp(ctx: Context, id: string, warn: (text: string) => void): Promise<{ hook?: Webhook; missing?: boolean }> {
  if (!ctx.env.WX_API_KEY && !ctx.env.WB_API_KEY) return {};
  try {
    const { service } = await serviceFor(ctx);
    return { hook: await service.getWebhook(id) };
  } catch (err) {
    const e = err as WxError;
    if (e.status === 404) return { missing: true };
    warn(`could not look up webhook ${id} (${printable(e.message)}); listening anyway.`);
    return {};
  }
}

/**
 * A Verifier whose secrets can be replaced while the receiver runs (the webhook was re-created, and its
 * stored secret changed): the receiver keeps the object it was given, and each verification goes to the
 * session of the secrets of the moment.
 */
export class RekeyableVerifier extends Verifier {
  private current: Verifier;
  constructor(private readonly settings: ConstructorParameters<typeof Verifier>[0]) {
    super(settings);
    this.current = new Verifier(settings);
  }

  override verify(...args: Parameters<Verifier['verify']>): ReturnType<Verifier['verify']> {
    return this.current.verify(...args);
  }

  /** From now on, verify with these secrets (a new session: auto pins again at the next match). */
  rekey(secrets: string[]): void {
    this.current = new Verifier({ ...this.settings, secret: secrets });
  }
}

/**
 * Watches the secret store for the stored secret of `--webhook ID`: when it changes (the webhook was
 * re-created, `secret set`), listen verifies with the new one from then on (and `changed` is told, with
 * it). Inotify tells of a change at once; a store folder that cannot be watched is looked at every 2 s
 * instead.
 */
export function watchSecret(ctx: Context, webhook: string, base: string, secret: string, verifier: RekeyableVerifier, changed: (secrets: string[]) => void): { close(): void } {
  const dir = configDir(ctx.env);
  let known = secret;
  let looking: Promise<void> = Promise.resolve();
  const look = () => {
    looking = looking.then(async () => {
      const entry = await (await secretStoreFor(ctx)).get(base, webhook).catch(() => undefined);
      if (!entry || entry.secret === known) return; // removed (the webhook deleted?): the secret in use stays
      known = entry.secret;
      addSensitive(entry.secret);
      verifier.rekey([entry.secret]);
      changed([entry.secret]);
    });
  };
  look();
  let watcher: FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    watcher = watch(dir, (_event, name) => {
      if (name === null || name === 'secrets.json') look();
    });
    watcher.on('error', () => undefined);
  } catch {
    timer = setInterval(look, 2000);
    timer.unref();
  }
  return {
    close() {
      watcher?.close();
      clearInterval(timer);
    },
  };
}
