import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/files.js';
import { CHANNEL_NAME, INBOUND_PREFIX } from './protocol.js';
import { httpUrl, newChannelName } from './status-client.js';

/**
 * The lasting channel of a webhook (`listen --relay URL --webhook ID`): a name no one can work out from
 * what is public (the webhook's id, the service's address), so that anonymous senders cannot even find
 * it: `wh-<id>-` and 20 random hex digits, made by the first such listen. Later ones find it where the
 * deliveries go (the webhook's URL at the service, when it is the relay's inbound URL), else where this
 * machine noted it (`relay-channels.json` in the store folder, beside the secrets).
 */

const FILE = 'relay-channels.json';

interface Noted {
  version: 1;
  /** relay address → service base URL → webhook id → channel */
  channels: Record<string, Record<string, Record<string, string>>>;
}

/** A relay as the notes key it: its address, normalised. */
const relayKey = (relay: string) => httpUrl(relay).href;

async function read(dir: string): Promise<Noted> {
  try {
    const parsed = JSON.parse(await readFile(join(dir, FILE), 'utf8')) as Noted;
    if (parsed && typeof parsed.channels === 'object' && parsed.channels !== null) return parsed;
  } catch {
    // none yet, or unreadable: a channel is found from the webhook's URL, or made anew
  }
  return { version: 1, channels: {} };
}

/** The channel of `url` when it is one of this relay's inbound URLs (a webhook's URL), else undefined. */
export function channelOfUrl(relay: string, url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  const prefix = new URL(INBOUND_PREFIX.slice(1), httpUrl(relay)).href;
  if (!url.startsWith(prefix)) return undefined;
  const name = url.slice(prefix.length);
  return CHANNEL_NAME.test(name) ? name : undefined;
}

/** The channel noted on this machine for a webhook of a service at a relay. */
export async function notedChannel(dir: string, relay: string, base: string, webhook: string): Promise<string | undefined> {
  return (await read(dir)).channels[relayKey(relay)]?.[base]?.[webhook];
}

async function note(dir: string, relay: string, base: string, webhook: string, channel: string): Promise<void> {
  const noted = await read(dir);
  const forRelay = (noted.channels[relayKey(relay)] ??= {});
  const forBase = (forRelay[base] ??= {});
  if (forBase[webhook] === channel) return;
  forBase[webhook] = channel;
  await writeFileAtomic(join(dir, FILE), `${JSON.stringify(noted, null, 2)}\n`);
}

/** A new lasting channel's name for a webhook. */
export function newLastingChannel(webhook: string): string {
  const id = webhook.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 40);
  return newChannelName(`wh-${id}`);
}

/**
 * The lasting channel of a webhook: the one its URL at the service names (`hookUrl`), else the one noted
 * here, else a new one; noted here for next time. `from` says which.
 */
export async function lastingChannel(o: { dir: string; relay: string; base: string; webhook: string; hookUrl?: string }): Promise<{ channel: string; from: 'webhook' | 'noted' | 'new' }> {
  const fromHook = channelOfUrl(o.relay, o.hookUrl);
  const noted = fromHook ? undefined : await notedChannel(o.dir, o.relay, o.base, o.webhook);
  const channel = fromHook ?? noted ?? newLastingChannel(o.webhook);
  // a note that cannot be written is no reason to stop: the webhook's URL names the channel too
  await note(o.dir, o.relay, o.base, o.webhook, channel).catch(() => undefined);
  return { channel, from: fromHook ? 'webhook' : noted ? 'noted' : 'new' };
}
