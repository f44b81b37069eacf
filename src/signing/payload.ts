import { randomBytes } from 'node:crypto';

/** The fields of a delivery's body (DESIGN.md, "The delivery payload"). */
export interface PayloadFields {
  type: string;
  webhookId: string;
  subscriptionId: string;
  triggerId: string;
  test?: boolean;
  data: Record<string, unknown>;
  createdAt?: Date;
}

/** The body of a delivery, as compact JSON bytes: exactly what is signed and sent. */
export function buildPayload(f: PayloadFields): Buffer {
  return Buffer.from(
    JSON.stringify({
      type: f.type,
      webhook_id: f.webhookId,
      subscription_id: f.subscriptionId,
      trigger_id: f.triggerId,
      created_at: isoSeconds(f.createdAt ?? new Date()),
      test: f.test ?? false,
      data: f.data,
    }),
  );
}

/** An ISO 8601 time in whole seconds, as the service writes them: `2026-11-21T06:00:00Z`. */
export function isoSeconds(time: Date | number | string): string {
  return new Date(time).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The latest 6-hourly model cycle (00, 06, 12, 18 UTC) at or before `now`. */
export function latestCycle(now = new Date()): string {
  const d = new Date(now);
  d.setUTCHours(Math.floor(d.getUTCHours() / 6) * 6, 0, 0, 0);
  return isoSeconds(d);
}

/** `trg_` + a time-ordered, random identifier. */
export function newTriggerId(): string {
  return `trg_${Date.now().toString(36).padStart(10, '0')}${randomBytes(8).toString('hex')}`;
}
