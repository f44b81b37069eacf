import type { Out } from '../context.js';

export function printJson(out: Out, value: unknown): void {
  out.write(`${JSON.stringify(value, null, 2)}\n`);
}

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;
const visibleLength = (s: string) => s.replace(ANSI, '').length;

/**
 * Rows as aligned columns on a terminal (as gh does), or tab-separated when
 * piped, so that `cut` and `awk` get one field per column.
 */
export function table(headers: string[], rows: string[][], tty: boolean): string {
  if (!tty) return [headers, ...rows].map((r) => r.map((c) => c.replace(/[\t\n]/g, ' ')).join('\t')).join('\n') + '\n';
  const widths = headers.map((h, i) => Math.max(visibleLength(h), ...rows.map((r) => visibleLength(r[i] ?? ''))));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(widths[i]! - visibleLength(c))))
      .join('  ')
      .trimEnd();
  return [fmt(headers), ...rows.map(fmt)].join('\n') + '\n';
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
