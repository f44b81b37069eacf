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

export function webhooksTable(hooks: Webhook[], tty: boolean, width?: number): string {
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
    width,
  );
}

/** A webhook's subscriptions; the first column is the subscription's id (SUBSCRIPTION, so that it is not taken for the webhook's). */
export function subscriptionsTable(subs: Subscription[], tty: boolean, width?: number): string {
  return table(
    ['SUBSCRIPTION', 'TYPE', 'FILTERS', 'RESPONSE', 'NOTE'],
    subs.map((s) => [s.id, s.type, describeFilters(s), describeResponse(s), s.note ?? '']),
    tty,
    width,
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

/** Text broken into lines of at most `width` columns, at spaces, and inside a word (a long path) only when it is longer than a line. */
function breakLines(text: string, width: number): string[] {
  const lines: string[] = [];
  let current = '';
  for (let word of text.split(' ')) {
    while (word.length > width) {
      if (current) lines.push(current);
      lines.push(word.slice(0, width));
      word = word.slice(width);
      current = '';
    }
    if (current && current.length + 1 + word.length > width) {
      lines.push(current);
      current = word;
    } else current = current ? `${current} ${word}` : word;
  }
  lines.push(current);
  return lines;
}

/**
 * The once-only display of a new secret, in a box as wide as its longest line, or, on a terminal of
 * `columns`, no wider than it: the words are broken into shorter lines, never the secret itself.
 */
export function secretBox(secret: string, webhookId: string, stored: string | undefined, style: ChalkInstance, columns?: number): string {
  const prose = [
    `Signing secret for webhook ${webhookId}: shown only this once by the service.`,
    stored ? `Stored in ${stored}; see it again with \`wxhooks secret show ${webhookId}\`.` : 'NOT stored (--no-save): copy it now, it cannot be shown again.',
  ];
  const fit = columns && columns >= 40 ? Math.max(columns - 4, secret.length + 2) : Infinity;
  const [head, tail] = prose.map((p) => (fit === Infinity ? [p] : breakLines(p, fit)));
  const lines = [...head!, '', `  ${secret}`, '', ...tail!];
  const width = Math.max(...lines.map((l) => l.length));
  const top = `┌${'─'.repeat(width + 2)}┐`;
  const bottom = `└${'─'.repeat(width + 2)}┘`;
  const body = lines.map((l) => `│ ${l.padEnd(width)} │`);
  return `${style.yellow([top, ...body, bottom].join('\n'))}\n`;
}
