import { hostname } from 'node:os';
import type { Service } from '../api/service.js';
import { createTemporary, type Temporary, type TemporaryEvent } from '../api/temporary.js';
import type { Context } from '../context.js';
import { UsageError } from '../errors.js';
import { inboundUrl, newChannelName } from '../relay/status-client.js';
import { SUBSCRIPTION_TYPES } from '../vocabulary.js';
import { url } from '../util/parse.js';

/**
 * `listen --relay URL`: the checks of its flags, and which channel it opens (a temporary one here, a
 * lasting one by src/relay/channels.ts). The door itself is src/receiver/relay-door.ts; listen.ts only
 * chooses it.
 */

/** What `listen --relay` connects to. */
export interface RelayTarget {
  url: string;
  /** The relay token, when it is set: without it, the channel's keys reach a channel that exists. */
  token?: string;
  channel: string;
  /** A channel for this session only (its temporary webhook): deleted on exit. */
  temporary: boolean;
}

/** The flags `--relay` cannot go with: listen opens no port of its own. */
const NO_PORT = [
  ['port', '--port'],
  ['host', '--host'],
  ['publicUrl', '--public-url'],
  ['secretEnv', '--secret-env'],
  ['check', '--check'],
] as const;

/** Every check of `--relay` (exit 2), before anything starts. */
export function checkRelayOptions(ctx: Context, o: { relay?: string; webhook?: string; subscribe?: string[] }): void {
  if (o.relay === undefined) return;
  for (const [name, flag] of NO_PORT) {
    if (!ctx.given(name)) continue;
    if (name === 'secretEnv') {
      throw new UsageError('--relay cannot go with --secret-env: the relay must be given the secret of a webhook it can verify for.', {
        hint: 'Give --webhook ID (its stored secret; a lasting channel), or neither (a temporary webhook whose URL is the relay).',
      });
    }
    if (name === 'check')
      throw new UsageError('--relay cannot go with --check yet: --check pings through a local port.', { hint: 'Use `wxhooks doctor --relay URL --webhook ID` to check the relay link.' });
    throw new UsageError(`--relay cannot go with ${flag}: with a relay, listen opens no port of its own (the service posts to the relay, and listen connects out to it).`, {
      hint: `Drop ${flag}, or drop --relay to listen on a port.`,
    });
  }
  url(o.relay, '--relay');
  // with --webhook, the channel's keys (from the webhook's secret) reach a channel that exists; a new
  // channel (the one-command loop's, always) is created only with the relay's own token
  if (!ctx.env.WXHOOKS_RELAY_TOKEN && o.webhook === undefined) {
    throw new UsageError('--relay without --webhook creates a channel for a temporary webhook, which needs the relay token: WXHOOKS_RELAY_TOKEN is not set.', {
      hint: 'export WXHOOKS_RELAY_TOKEN=… (the token the relay was started with: `wxhooks relay token` made it). It is never a flag, so that it stays out of shell history. With --webhook ID, a channel opened before needs no token.',
    });
  }
  if (o.webhook !== undefined && o.subscribe !== undefined) {
    throw new UsageError('--subscribe is for the temporary webhook --relay creates without --webhook: an existing webhook keeps its own subscriptions.', {
      hint: 'Drop --subscribe, or drop --webhook.',
    });
  }
}

/**
 * The one-command loop: a temporary webhook whose URL is a fresh channel's inbound URL, subscribed as
 * --subscribe asks (or to every type); its secret goes to the relay over the authenticated connection.
 */
export async function relayTemporary(
  ctx: Context,
  service: Service,
  o: { relay: string; subscribe?: string[]; clean?: boolean },
  report: (event: TemporaryEvent) => void,
): Promise<{ temporary: Temporary; target: RelayTarget; base: string }> {
  const channel = newChannelName();
  const temporary = await createTemporary(service, {
    url: inboundUrl(o.relay, channel),
    subscribe: o.subscribe ?? [...SUBSCRIPTION_TYPES],
    host: hostname(),
    pid: process.pid,
    started: new Date(ctx.clock.now()).toISOString(),
    clean: Boolean(o.clean),
    report,
  });
  return { temporary, base: service.http.baseUrl, target: { url: o.relay, token: ctx.env.WXHOOKS_RELAY_TOKEN, channel, temporary: true } };
}
