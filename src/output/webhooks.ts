import type { ChalkInstance } from 'chalk';
import type { Subscription, Webhook } from '../api/normalize.js';
import { temporaryOf } from '../api/temporary.js';
import { printable } from '../util/printable.js';
import { table, truncate } from './render.js';

export function describeFilters(s: Subscription): string {
  const f = s.filters ?? {};
  const parts: string[] = [];
  for (const [k, v] of Object.entries(f)) {
    const name = k === 'initialization_time_hours' ? 'hours' : k;
    parts.push(`${name}=${Array.isArray(v) ? v.join(',') : String(v)}`);
  }
  return parts.join(' ') || '-';
}

export function describeResponse(s: Subscription): string {
  const r = s.response_options;
  if (!r) return '-';
  const opts = r.options && typeof r.options === 'object' ? Object.entries(r.options as Record<string, unknown>).map(([k, v]) => `${k}=${String(v)}`) : [];
  return [String(r.type ?? '?'), ...opts].join(' ');
}

export function webhooksTable(hooks: Webhook[], tty: boolean): string {
  return table(
    ['ID', 'URL', 'NAME', 'ACTIVE', 'SUBSCRIPTIONS'],
    hooks.map((h) => [
      h.id,
      tty ? truncate(h.url, 60) : h.url,
      temporaryOf(h) ? `${h.name} (temporary, listen pid ${temporaryOf(h)!.pid})` : (h.name ?? ''),
      h.active === undefined ? '' : h.active ? 'yes' : 'no',
      h.subscriptions.map((s) => s.type).join(',') || '-',
    ]),
    tty,
  );
}

export function subscriptionsTable(subs: Subscription[], tty: boolean): string {
  return table(
    ['ID', 'TYPE', 'FILTERS', 'RESPONSE', 'NOTE'],
    subs.map((s) => [s.id, s.type, describeFilters(s), describeResponse(s), s.note ?? '']),
    tty,
  );
}

export function webhookDetails(h: Webhook, style: ChalkInstance, tty: boolean): string {
  const rows = [
    `${style.bold('Webhook')} ${printable(h.id)}`,
    `  URL:      ${printable(h.url)}`,
    h.name ? `  Name:     ${printable(String(h.name))}` : undefined,
    h.note ? `  Note:     ${printable(String(h.note))}` : undefined,
    h.active === undefined ? undefined : `  Active:   ${h.active ? 'yes' : style.yellow('no')}`,
    h.created_at ? `  Created:  ${printable(String(h.created_at))}` : undefined,
    '',
    h.subscriptions.length ? subscriptionsTable(h.subscriptions, tty).trimEnd() : '  (no subscriptions)',
  ];
  return `${rows.filter((r) => r !== undefined).join('\n')}\n`;
}

/** The once-only display of a new secret. */
export function secretBox(secret: string, webhookId: string, stored: string | undefined, style: ChalkInstance): string {
  const lines = [
    `Signing secret for webhook ${webhookId}: shown only this once by the service.`,
    '',
    `  ${secret}`,
    '',
    stored ? `Stored in ${stored}; see it again with \`wxhooks secret show ${webhookId}\`.` : 'NOT stored (--no-save): copy it now, it cannot be shown again.',
  ];
  const width = Math.max(...lines.map((l) => l.length));
  const top = `┌${'─'.repeat(width + 2)}┐`;
  const bottom = `└${'─'.repeat(width + 2)}┘`;
  const body = lines.map((l) => `│ ${l.padEnd(width)} │`);
  return `${style.yellow([top, ...body, bottom].join('\n'))}\n`;
}
