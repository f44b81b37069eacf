import type { Dispatcher } from 'undici';
import { layoutNamed, type Layout } from '../signing/layouts.js';
import { signDelivery } from '../signing/sign.js';
import { isoMillis, type Clock } from '../util/clock.js';
import { verified, type ReceiverEvent } from './event.js';
import { forwardDelivery, type ForwardResult } from './forward.js';
import type { HistorySource } from './history.js';
import { notRouted, routeFor, type ForwardRoutes } from './routes.js';
import { readProvenBody } from './saved.js';

/** The header a replayed delivery carries, so that an app (and a person reading its logs) can tell. */
export const REPLAY_HEADER = 'x-wxhooks-replay';

const SIGNATURE_HEADERS = new Set(['trigger-id', 'webhook-timestamp', 'webhook-signature']);

/**
 * Re-sends a delivery as the service would send a retry: the same body and Trigger-Id, signed afresh
 * with the current time (in the layout it came in, else the service's), the other headers as they
 * came, and `X-Wxhooks-Replay: 1`. The caller gives only bytes that verified: nothing else is ever
 * signed with a webhook's secret.
 */
export async function replayDelivery(options: {
  headers: Record<string, string>;
  body: Buffer;
  secret: string;
  layout?: string;
  to: string;
  timeoutMs: number;
  dispatcher: Dispatcher;
  /** The body is not the one that arrived, but edited by the person replaying it: `X-Wxhooks-Replay: edited`. */
  edited?: boolean;
}): Promise<ForwardResult & { trigger_id: string }> {
  const triggerId = options.headers['trigger-id'] ?? 'trg_replay';
  const layout: Layout = layoutNamed(options.layout ?? 'standard') ?? layoutNamed('standard')!;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.headers)) if (!SIGNATURE_HEADERS.has(name.toLowerCase())) headers[name] = value;
  const signed = signDelivery({ secret: options.secret, body: options.body, triggerId, layout });
  const result = await forwardDelivery(
    options.to,
    { ...headers, 'trigger-id': signed['Trigger-Id'], 'webhook-timestamp': signed['Webhook-Timestamp'], 'webhook-signature': signed['Webhook-Signature'] },
    options.body,
    options.timeoutMs,
    options.dispatcher,
    {
      [REPLAY_HEADER]: options.edited ? 'edited' : '1',
    },
  );
  return { ...result, trigger_id: triggerId };
}

export type HistoryReplay = { ok: true; result: ForwardResult & { trigger_id: string }; event: ReceiverEvent } | { ok: false; status: 404 | 409; error: string };

/**
 * Re-sends a delivery of the history to the app (`listen --forward-to`: the URL its type routes to), signed afresh with the current
 * time and the same Trigger-Id, marked `X-Wxhooks-Replay: 1`, and keeps the replay in the history as one
 * (never counted as processed). Only a verified record is replayed; a body kept only in part is read
 * whole from its saved file, if it was saved and still shows it verified (`saveKey`, the store's key that
 * marks what listen saves, or its signature with `secret`): the file may have been replaced since.
 */
export async function replayFromHistory(
  history: HistorySource,
  id: number,
  o: { secret: string; to: string | ForwardRoutes; timeoutMs: number; clock: Clock; edited?: Buffer; saveKey?: Buffer },
): Promise<HistoryReplay> {
  const record = await history.get(id);
  const kept = await history.bodyOf(id);
  if (!record) return { ok: false, status: 404, error: 'that delivery is no longer kept (see --history)' };
  if (!verified(record)) return { ok: false, status: 409, error: `request ${id} did not verify: only verified deliveries are replayed` };
  if (!kept) return { ok: false, status: 409, error: 'no body of this delivery is kept any more (see --history-size)' };
  // to the URL its type routes to, as the delivery itself was
  const to = typeof o.to === 'string' ? o.to : routeFor(o.to, record.type);
  if (to === undefined) return { ok: false, status: 409, error: `${notRouted(record.type)}: nowhere to replay it to` };
  let body = kept.body;
  if (o.edited) body = o.edited;
  else if (!kept.whole) {
    if (!record.saved_to)
      return { ok: false, status: 409, error: `only the first ${kept.body.length} bytes of this body are kept (see --history-size): run listen with --save-dir to replay it whole` };
    const whole = await readProvenBody(record.saved_to, o.saveKey, [o.secret]);
    if ('error' in whole) return { ok: false, status: 409, error: `only the first ${kept.body.length} bytes of this body are kept, and ${whole.error}` };
    body = whole.body;
  }
  const { Agent } = await import('undici');
  const agent = new Agent();
  try {
    const full = await replayDelivery({ headers: record.headers, body, secret: o.secret, layout: record.layout, to, timeoutMs: o.timeoutMs, dispatcher: agent, edited: Boolean(o.edited) });
    const { answer, ...result } = full;
    const { id: _id, ms: _ms, replay_of: _of, headers: _h, body: _b, body_base64: _b64, body_kept: _k, peer: _p, app_answer: _a, ...rest } = record;
    const event: ReceiverEvent = { ...rest, time: isoMillis(o.clock.now()), outcome: 'replayed', status: result.status ?? 0, size: body.length, forward: result };
    if (o.edited) event.replay_edited = true;
    history.add(event, { headers: record.headers, body, received: o.clock.now(), ms: result.ms, answer }, id);
    return { ok: true, result, event };
  } finally {
    await agent.close();
  }
}

/** A shell word: single-quoted, with any single quote in it closed, escaped and reopened. */
const shellWord = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/**
 * Commands that send a verified delivery again, for a person to copy: curl with the delivery's headers
 * and signature headers made now (valid for the tolerance, 5 minutes by default), and `wxhooks send`,
 * which signs it itself with the webhook's secret (from `--webhook ID`, which the person gives).
 */
export function replayCommands(record: { headers: Record<string, string>; layout?: string }, body: Buffer, secret: string, to: string, webhook?: string): { curl: string; send: string } {
  const layout: Layout = layoutNamed(record.layout ?? 'standard') ?? layoutNamed('standard')!;
  const triggerId = record.headers['trigger-id'] ?? 'trg_replay';
  const signed = signDelivery({ secret, body, triggerId, layout });
  const headers = { 'content-type': record.headers['content-type'] ?? 'application/json', ...signed, [REPLAY_HEADER]: '1' };
  const text = body.toString('utf8');
  const curl = ['curl', '-sS', '-X', 'POST', shellWord(to), ...Object.entries(headers).flatMap(([k, v]) => ['-H', shellWord(`${k}: ${v}`)]), '--data-binary', shellWord(text)].join(' ');
  const send = `printf '%s' ${shellWord(text)} | wxhooks send --to ${shellWord(to)} --body - ${webhook ? `--webhook ${webhook}` : '--secret-env WX_WEBHOOK_SECRET'} --trigger-id ${shellWord(triggerId)}`;
  return { curl, send };
}
