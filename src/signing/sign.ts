import { randomBytes } from 'node:crypto';
import { hmac } from './hmac.js';
import { layoutNamed, type Layout, type LayoutName } from './layouts.js';

export interface SignOptions {
  secret: string;
  /** The exact bytes that will be sent. */
  body: Uint8Array | string;
  triggerId: string;
  /** Seconds since the epoch (default: now). */
  timestamp?: number;
  /** Default `standard`, as the service signs; a row of your own may be given. */
  layout?: LayoutName | Layout;
}

export type SignedHeaders = {
  'Trigger-Id': string;
  'Webhook-Timestamp': string;
  'Webhook-Signature': string;
};

/**
 * Signs a delivery as the service does (Standard Webhooks, with Trigger-Id as
 * the message id), or in another layout, for tests of your own receiver.
 */
export function signDelivery(options: SignOptions): SignedHeaders {
  const row = typeof options.layout === 'object' ? options.layout : layoutNamed(options.layout ?? 'standard');
  if (!row) throw new TypeError(`unknown layout "${String(options.layout)}"`);
  const ts = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const body = typeof options.body === 'string' ? Buffer.from(options.body, 'utf8') : Buffer.from(options.body);
  const [key] = row.keys(options.secret);
  const signature = hmac(key!, row.prefix(options.triggerId, ts), body);
  return { 'Trigger-Id': options.triggerId, 'Webhook-Timestamp': ts, 'Webhook-Signature': row.format(signature, ts) };
}

/** `trg_` + a time-ordered, random identifier, as the service issues them. */
export function newTriggerId(): string {
  return `trg_${Date.now().toString(36).padStart(10, '0')}${randomBytes(8).toString('hex')}`;
}

/** A new secret as the emulator issues them: `whsec_` + base64 of 32 random bytes. */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}
