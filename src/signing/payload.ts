import { isoSeconds } from '../vocabulary.js';

/** The fields of a delivery's body (DESIGN.md, "The delivery payload"). */
export interface PayloadFields {
  type: string;
  /** The ids as the API gives them: strings in the documented shape, integers in the live one. */
  webhookId: string | number;
  subscriptionId: string | number;
  triggerId: string;
  test?: boolean;
  /** A catch-up built by wxhooks from the forecast API (`reconcile --catch-up`), not a delivery of the service's: said in the body, which is signed. */
  catchUp?: true;
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
      ...(f.catchUp ? { catch_up: true } : {}),
      data: f.data,
    }),
  );
}
