import type { RelayClientEvent } from '../relay/client.js';
import { formatDuration } from '../util/duration.js';
import { printable } from '../util/printable.js';
import type { Style } from './style.js';

/**
 * What happens to `listen --relay`'s link, as a line for a person and as the NDJSON line of `--json`
 * (an `event` field, as every line about listen itself). Never the token or a secret: the client never
 * has them in an event.
 */
export function relayLinkEvent(e: RelayClientEvent): Record<string, unknown> {
  switch (e.kind) {
    case 'connected':
      return {
        event: e.again ? 'relay_back' : 'relay_connected',
        channel: e.channel,
        inbound_url: e.inboundUrl,
        created: e.created,
        temporary: e.temporary,
        queued: e.queued,
        bytes: e.bytes,
        refused: e.refused,
        ...(e.downMs !== undefined ? { down_ms: e.downMs } : {}),
      };
    case 'disconnected':
      return { event: 'relay_lost', reason: e.reason };
    case 'unreachable':
      return { event: 'relay_unreachable', reason: e.reason, retry_in_ms: e.retryInMs, attempt: e.attempt };
  }
}

/** The line for a person; `relay` is where the commands it suggests point. */
export function describeRelayLink(e: RelayClientEvent, style: Style, relay: { url: string; channel: string }): string {
  switch (e.kind) {
    case 'connected': {
      const waiting = e.queued ? `${e.queued} ${e.queued === 1 ? 'delivery' : 'deliveries'} waiting, handed over first, in order` : 'nothing waiting';
      const refused = e.refused
        ? style.yellow(
            `\n${e.refused} ${e.refused === 1 ? 'delivery' : 'deliveries'} refused before (a listen could not verify them) wait at the relay, apart: \`wxhooks relay refused ${relay.url} --channel ${relay.channel}\` says why.`,
          )
        : '';
      if (e.again) return style.green(`The relay is back${e.downMs !== undefined ? ` after ${formatDuration(e.downMs)}` : ''}: ${waiting}.`) + refused;
      return `Relay channel ${style.bold(e.channel)} ${e.created ? 'created' : 'opened'}${e.temporary ? ' (temporary: deleted on exit)' : ''}: ${waiting}.${refused}`;
    }
    case 'disconnected':
      return style.yellow(`Lost the relay (${printable(e.reason)}): connecting again; deliveries wait in the relay meanwhile.`);
    case 'unreachable':
      return style.red(`The relay is unreachable (${printable(e.reason)}): trying again in ${formatDuration(e.retryInMs)} (try ${e.attempt}); deliveries wait in the relay meanwhile.`);
  }
}
