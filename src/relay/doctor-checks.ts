import type { Context } from '../context.js';
import type { WxError } from '../errors.js';
import { printable } from '../util/printable.js';
import { webhookChannel } from './channels.js';
import { inboundUrl, relayStatus } from './status-client.js';

/** One line of `doctor`'s report (its Check): what was checked, whether it held, what to do about it. */
export interface RelayCheck {
  name: string;
  ok: boolean;
  detail: string;
  hint?: string;
}

/**
 * `doctor --relay URL` (or WXHOOKS_RELAY_URL): the relay link, as `listen --relay` will use it: the relay
 * answers, accepts the token, and, with --webhook, knows that webhook's lasting channel (a `listen --relay
 * --webhook ID` opened it) and the webhook delivers to it.
 */
export async function relayChecks(ctx: Context, relay: string, webhook: { id: string; url?: string; base: string } | undefined): Promise<RelayCheck[]> {
  const token = ctx.env.WXHOOKS_RELAY_TOKEN;
  if (!token) return [{ name: 'relay', ok: false, detail: 'WXHOOKS_RELAY_TOKEN is not set', hint: "export WXHOOKS_RELAY_TOKEN=… (the relay's own token)." }];
  let status: Awaited<ReturnType<typeof relayStatus>>;
  try {
    status = await relayStatus(relay, token, ctx.global.timeoutMs);
  } catch (err) {
    const e = err as WxError;
    return [{ name: 'relay', ok: false, detail: printable(e.message), hint: e.hint }];
  }
  const checks: RelayCheck[] = [{ name: 'relay', ok: true, detail: `${relay} answers and accepts the token: ${status.channels.length} channel(s), ${status.queued} deliveries queued` }];
  if (!webhook) return checks;
  const channel = webhookChannel(webhook.id, webhook.base);
  const url = inboundUrl(relay, channel);
  const known = status.channels.find((c) => c.channel === channel);
  if (!known) {
    checks.push({
      name: 'relay channel',
      ok: false,
      detail: `the relay has no channel ${channel} for webhook ${webhook.id}`,
      hint: `Start \`wxhooks listen --relay ${relay} --webhook ${webhook.id}\` once: it gives the relay the webhook's secret.`,
    });
  } else {
    checks.push({ name: 'relay channel', ok: true, detail: `channel ${channel}: ${known.connected ? 'a listen is connected' : 'no listen connected'}, ${known.queued} queued` });
  }
  if (webhook.url !== undefined && webhook.url !== url) {
    checks.push({ name: 'relay URL', ok: false, detail: `webhook ${webhook.id} delivers to ${printable(webhook.url)}, not to the relay`, hint: `wxhooks webhook update ${webhook.id} --url ${url}` });
  }
  return checks;
}
