import { randomBytes } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { REPLAY_ID_HEADER, REPLAY_SIGNATURE_HEADER } from '../delivery/replay-mark.js';
import { layoutNamed, type Layout } from '../signing/layouts.js';
import { signDelivery } from '../signing/sign.js';
import { isoMillis, type Clock } from '../util/clock.js';
import { verified, type ReceiverEvent } from './event.js';
import { forwardDelivery, type ForwardResult } from './forward.js';
import type { HistorySource } from './history.js';
import { notRouted, routeFor, type ForwardRoutes } from './routes.js';
import { readProvenBody } from './saved.js';
import type { DeliveryRecord, FullRecord } from '../delivery/report.js';

/** The header a replayed delivery carries, so that an app (and a person reading its logs) can tell. */
export const REPLAY_HEADER = 'x-wxhooks-replay';

/** What a replay writes afresh: the signature's headers and a replay's marks (a replay of a replay is a new one). */
const SIGNED_AGAIN = new Set(['trigger-id', 'webhook-timestamp', 'webhook-signature', REPLAY_HEADER, REPLAY_ID_HEADER, REPLAY_SIGNATURE_HEADER]);

/**
 * The headers a replay is sent with: the delivery's own signed afresh (the same body and Trigger-Id, the
 * current time, the layout it came in, else the service's), `X-Wxhooks-Replay`, and the replay's own
 * identity, signed over the same timestamp and body (src/delivery/replay-mark.ts): a handler built on
 * `Webhooks` runs a replay once, and can tell it is one, and of what.
 */
function replayHeaders(secret: string, body: Buffer, triggerId: string, layoutName: string | undefined, edited: boolean): Record<string, string> {
  const layout: Layout = layoutNamed(layoutName ?? 'standard') ?? STANDARD;
  const signed = signDelivery({ secret, body, triggerId, layout });
  const replayId = `rpl_${randomBytes(12).toString('base64url')}`;
  const mark = signDelivery({ secret, body, triggerId: replayId, timestamp: Number(signed['Webhook-Timestamp']), layout: STANDARD });
  return {
    'trigger-id': signed['Trigger-Id'],
    'webhook-timestamp': signed['Webhook-Timestamp'],
    'webhook-signature': signed['Webhook-Signature'],
    [REPLAY_HEADER]: edited ? 'edited' : '1',
    [REPLAY_ID_HEADER]: replayId,
    [REPLAY_SIGNATURE_HEADER]: mark['Webhook-Signature'],
  };
}

const STANDARD = layoutNamed('standard')!;

/**
 * Re-sends a delivery as the service would send a retry, marked as a replay (`replayHeaders`), with the
 * other headers as they came. The caller gives only bytes that verified: nothing else is ever signed with
 * a webhook's secret.
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
}): Promise<ForwardResult & { trigger_id: string; replay_id: string }> {
  const triggerId = options.headers['trigger-id'] ?? 'trg_replay';
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.headers)) if (!SIGNED_AGAIN.has(name.toLowerCase())) headers[name] = value;
  const replay = replayHeaders(options.secret, options.body, triggerId, options.layout, Boolean(options.edited));
  const result = await forwardDelivery(options.to, headers, options.body, options.timeoutMs, options.dispatcher, replay);
  return { ...result, trigger_id: triggerId, replay_id: replay[REPLAY_ID_HEADER]! };
}

export type HistoryReplay = { ok: true; result: ForwardResult & { trigger_id: string }; event: ReceiverEvent } | ReplayRefused;

/** Which of replay's rules refused it. */
export type ReplayRule = 'gone' | 'notVerified' | 'noBody' | 'partial' | 'notRouted';

/**
 * Why a delivery of the history is not signed again: the rule, and the one wording of it, for every door
 * that replays (the inspector, its commands, MCP, which maps the rule to its typed errors).
 */
export interface ReplayRefused {
  ok: false;
  rule: ReplayRule;
  status: 404 | 409;
  error: string;
}

const refused = (rule: ReplayRule, status: 404 | 409, error: string): ReplayRefused => ({ ok: false, rule, status, error });

/** The rules' words, one for each rule. */
export interface ReplayRefusals {
  readonly gone: () => ReplayRefused;
  readonly notVerified: (r: Pick<DeliveryRecord, 'id' | 'message' | 'outcome'>) => ReplayRefused;
  readonly noBody: () => ReplayRefused;
  readonly partial: (kept: number, why?: string) => ReplayRefused;
  readonly notRouted: (type: string | undefined) => ReplayRefused;
}

/** The rules' words. */
export const REPLAY_REFUSALS: ReplayRefusals = {
  gone: () => refused('gone', 404, 'that delivery is no longer kept (see --history)'),
  // what did not verify is never signed with the webhook's secret: it would make an attacker's bytes authentic
  notVerified: (r: Pick<DeliveryRecord, 'id' | 'message' | 'outcome'>) =>
    refused('notVerified', 409, `request ${r.id} did not verify (${r.message ?? r.outcome}): only verified deliveries are replayed`),
  noBody: () => refused('noBody', 409, 'no body of this delivery is kept any more (see --history-size)'),
  partial: (kept: number, why?: string) =>
    refused(
      'partial',
      409,
      why === undefined
        ? `only the first ${kept} bytes of this body are kept (see --history-size): run listen with --save-dir to replay it whole`
        : `only the first ${kept} bytes of this body are kept, and ${why}`,
    ),
  notRouted: (type: string | undefined) => refused('notRouted', 409, `${notRouted(type)}: nowhere to replay it to`),
} as const satisfies Record<ReplayRule, (...args: never[]) => ReplayRefused>;

/**
 * A delivery of the history that may be signed again, with its whole body, or why not: it is still kept,
 * it verified, and its body is kept whole (or read whole from its saved file, if it was saved and still
 * shows it verified: `saveKey`, the store's key that marks what listen saves, or its signature with one of
 * `secrets`; the file may have been replaced since).
 */
export async function replayable(history: HistorySource, id: number, o: { secrets: readonly string[]; saveKey?: Buffer }): Promise<{ ok: true; record: FullRecord; body: Buffer } | ReplayRefused> {
  const record = await history.get(id);
  if (!record) return REPLAY_REFUSALS.gone();
  if (!verified(record)) return REPLAY_REFUSALS.notVerified(record);
  const kept = await history.bodyOf(id);
  if (!kept) return REPLAY_REFUSALS.noBody();
  if (kept.whole) return { ok: true, record, body: kept.body };
  if (!record.saved_to) return REPLAY_REFUSALS.partial(kept.body.length);
  const whole = await readProvenBody(record.saved_to, o.saveKey, o.secrets);
  return 'error' in whole ? REPLAY_REFUSALS.partial(kept.body.length, whole.error) : { ok: true, record, body: whole.body };
}

/**
 * Re-sends a delivery of the history to the app (`listen --forward-to`: the URL its type routes to), signed afresh with the current
 * time and the same Trigger-Id, marked `X-Wxhooks-Replay: 1`, and keeps the replay in the history as one
 * (never counted as processed). Only what `replayable` allows is replayed (an edited body in place of the one kept).
 */
export async function replayFromHistory(
  history: HistorySource,
  id: number,
  o: { secret: string; to: string | ForwardRoutes; timeoutMs: number; clock: Clock; edited?: Buffer; saveKey?: Buffer },
): Promise<HistoryReplay> {
  const found = o.edited ? await editable(history, id, o.edited) : await replayable(history, id, { secrets: [o.secret], saveKey: o.saveKey });
  if (!found.ok) return found;
  const { record, body } = found;
  // to the URL its type routes to, as the delivery itself was
  const to = typeof o.to === 'string' ? o.to : routeFor(o.to, record.type);
  if (to === undefined) return REPLAY_REFUSALS.notRouted(record.type);
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

/** A delivery replayed with an edited body: it must be kept and have verified; what is kept of its own body does not matter. */
async function editable(history: HistorySource, id: number, body: Buffer): Promise<{ ok: true; record: FullRecord; body: Buffer } | ReplayRefused> {
  const record = await history.get(id);
  if (!record) return REPLAY_REFUSALS.gone();
  if (!verified(record)) return REPLAY_REFUSALS.notVerified(record);
  if (!(await history.bodyOf(id))) return REPLAY_REFUSALS.noBody();
  return { ok: true, record, body };
}

/** A shell word: single-quoted, with any single quote in it closed, escaped and reopened. */
const shellWord = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/**
 * Commands that send a verified delivery again, for a person to copy: curl with the delivery's headers
 * and signature headers made now (valid for the tolerance, 5 minutes by default), and `wxhooks send`,
 * which signs it itself with the webhook's secret (from `--webhook ID`, which the person gives).
 */
export function replayCommands(record: { headers: Record<string, string>; layout?: string }, body: Buffer, secret: string, to: string, webhook?: string): { curl: string; send: string } {
  const triggerId = record.headers['trigger-id'] ?? 'trg_replay';
  const headers = { 'content-type': record.headers['content-type'] ?? 'application/json', ...replayHeaders(secret, body, triggerId, record.layout, false) };
  const text = body.toString('utf8');
  const curl = ['curl', '-sS', '-X', 'POST', shellWord(to), ...Object.entries(headers).flatMap(([k, v]) => ['-H', shellWord(`${k}: ${v}`)]), '--data-binary', shellWord(text)].join(' ');
  const send = `printf '%s' ${shellWord(text)} | wxhooks send --to ${shellWord(to)} --body - ${webhook ? `--webhook ${webhook}` : '--secret-env WX_WEBHOOK_SECRET'} --trigger-id ${shellWord(triggerId)}`;
  return { curl, send };
}
