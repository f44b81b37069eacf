import { createHash } from 'node:crypto';
import { forecastKey, TROPICAL_CYCLONES } from '../delivery/forecast.js';
import type { ExpectedNotification } from '../delivery/reconcile.js';
import { buildPayload } from '../signing/payload.js';

/**
 * A missing notification, built from the forecast API as the service would have built it (the payload of
 * DESIGN.md), marked as a catch-up: `"catch_up": true` in the body, and `data.response` where the forecast
 * API has the response the subscription asks for (a run's tropical cyclones), else `data.response_unavailable`
 * saying why. Its trigger is the forecast's own (`catchup_` and a hash of its identity), so two catch-ups of
 * one forecast are one pair too. Everything in it comes from the authenticated webhook and forecast APIs:
 * nothing of what any sender sent (the rule that lets `reconcile` sign it: DECISIONS.md, "Signing a catch-up").
 */
export interface CatchUp {
  notification: ExpectedNotification;
  triggerId: string;
  payload: Record<string, unknown>;
  /** The payload's bytes: what is signed and sent. */
  body: Buffer;
}

/** The response types that are a run's tropical cyclones, which the forecast API gives. */
const CYCLONE_RESPONSES = ['tropical_cyclones', 'tropical_cyclone_track'];

/** The trigger of a forecast's catch-up: the same for every catch-up of it. */
export const catchUpTriggerId = (n: ExpectedNotification): string =>
  `catchup_${createHash('sha256')
    .update(`${n.subscription.id}\u0000${forecastKey(n.forecast)}`)
    .digest('base64url')
    .slice(0, 24)}`;

export function buildCatchUp(n: ExpectedNotification, webhookId: string, now: number): CatchUp {
  const f = n.forecast;
  const data: Record<string, unknown> = { model: f.model, initialization_time: f.initialization_time };
  if (f.forecast_hour !== undefined) data.forecast_hour = f.forecast_hour;
  if (f.event_type !== undefined) data.event_type = f.event_type;
  const options = n.subscription.response_options;
  if (options) {
    const type = String(options.type ?? '');
    if (f.type === TROPICAL_CYCLONES && n.found && CYCLONE_RESPONSES.includes(type)) {
      data.response = { type, model: f.model, initialization_time: f.initialization_time, cyclones: n.found };
    } else {
      data.response_unavailable = `the forecast API gives no "${type}" response for a catch-up: ask the forecast API for it yourself (the subscription's response_options are in the webhook)`;
    }
  }
  const triggerId = catchUpTriggerId(n);
  const createdAt = new Date(n.created_at ?? now);
  const body = buildPayload({ type: f.type, webhookId, subscriptionId: n.subscription.id, triggerId, catchUp: true, data, createdAt });
  return { notification: n, triggerId, payload: JSON.parse(body.toString('utf8')) as Record<string, unknown>, body };
}
