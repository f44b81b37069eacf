import type { Context } from '../context.js';
import { AuthError, type WxError } from '../errors.js';
import { configDir } from '../store/paths.js';
import { SecretStore } from '../store/secrets.js';
import { printable } from '../util/printable.js';
import { channelOfUrl, notedChannel } from './channels.js';
import { channelStatus, inboundUrl, relayStatus, type ChannelStatus, type RelayStatus } from './status-client.js';

/** One line of `doctor`'s report (its Check): what was checked, whether it held, what to do about it. */
export interface RelayCheck {
  name: string;
  ok: boolean;
  detail: string;
  hint?: string;
}

/**
 * `doctor --relay URL` (or WXHOOKS_RELAY_URL): the relay link, as `listen --relay` will use it: the relay
 * answers and accepts the token (or, without it, the channel's keys); with --webhook, it knows that
 * webhook's lasting channel (a `listen --relay --webhook ID` opened it), nothing waits there refused,
 * and the webhook delivers to it.
 */
export async function relayChecks(ctx: Context, relay: string, webhook: { id: string; url?: string; base: string } | undefined): Promise<RelayCheck[]> {
  const token = ctx.env.WXHOOKS_RELAY_TOKEN;
  const dir = configDir(ctx.env);
  const channel = webhook && (channelOfUrl(relay, webhook.url) ?? (await notedChannel(dir, relay, webhook.base, webhook.id)));
  const checks: RelayCheck[] = [];
  let known: ChannelStatus | undefined;
  if (token) {
    let status: RelayStatus;
    try {
      status = await relayStatus(relay, token, ctx.global.timeoutMs);
    } catch (err) {
      const e = err as WxError;
      return [{ name: 'relay', ok: false, detail: printable(e.message), hint: e.hint }];
    }
    checks.push({ name: 'relay', ok: true, detail: `${relay} answers and accepts the token: ${status.channels.length} channel(s), ${status.queued} deliveries queued` });
    known = channel === undefined ? undefined : status.channels.find((c) => c.channel === channel);
  } else {
    const secret = webhook && (await new SecretStore(dir).get(webhook.base, webhook.id).catch(() => undefined));
    if (!webhook || !secret || channel === undefined)
      return [
        {
          name: 'relay',
          ok: false,
          detail: 'WXHOOKS_RELAY_TOKEN is not set',
          hint: "export WXHOOKS_RELAY_TOKEN=… (the relay's own token), or check a webhook whose channel this machine knows: --webhook ID.",
        },
      ];
    try {
      known = await channelStatus(relay, { secrets: [secret.secret] }, channel, ctx.global.timeoutMs);
    } catch (err) {
      const e = err as WxError;
      if (!(e instanceof AuthError)) return [{ name: 'relay', ok: false, detail: printable(e.message), hint: e.hint }];
    }
    checks.push({ name: 'relay', ok: true, detail: `${relay} answers` });
  }
  if (!webhook) return checks;
  if (channel === undefined || !known) {
    checks.push({
      name: 'relay channel',
      ok: false,
      detail:
        channel === undefined
          ? `no channel of webhook ${webhook.id} is known here`
          : `the relay does not know channel ${channel} for webhook ${webhook.id}${token ? '' : " with this webhook's secret"}`,
      hint: `Start \`wxhooks listen --relay ${relay} --webhook ${webhook.id}\` once${token ? '' : ' with WXHOOKS_RELAY_TOKEN set'}: it gives the relay the webhook's secret.`,
    });
    return checks;
  }
  checks.push({ name: 'relay channel', ok: true, detail: `channel ${channel}: ${known.connected ? 'a listen is connected' : 'no listen connected'}, ${known.queued} queued` });
  if (known.refused)
    checks.push({
      name: 'relay refused',
      ok: false,
      detail: `${known.refused} deliveries of channel ${channel} were refused by a listen that could not verify them, and wait at the relay`,
      hint: `See why with \`wxhooks relay refused ${relay} --webhook ${webhook.id}\`; drop them with \`wxhooks relay drop ${relay} --webhook ${webhook.id} --all-refused\`.`,
    });
  const url = inboundUrl(relay, channel);
  if (webhook.url !== undefined && webhook.url !== url) {
    checks.push({ name: 'relay URL', ok: false, detail: `webhook ${webhook.id} delivers to ${printable(webhook.url)}, not to the relay`, hint: `wxhooks webhook update ${webhook.id} --url ${url}` });
  }
  return checks;
}
