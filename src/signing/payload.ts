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
      created_at: (f.createdAt ?? new Date()).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      test: f.test ?? false,
      data: f.data,
    }),
  );
}

/** `trg_` + a time-ordered, random identifier. */
export function newTriggerId(): string {
  return `trg_${Date.now().toString(36).padStart(10, '0')}${randomBytes(8).toString('hex')}`;
}
