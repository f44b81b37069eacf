import type { Context, Out } from '../context.js';
import { printable } from '../util/printable.js';
import { styleFor } from './style.js';

export function printJson(out: Out, value: unknown): void {
  out.write(`${JSON.stringify(value, null, 2)}\n`);
}

/**
 * A command's result on stdout: the JSON document with `--json`, else the text (made only then).
 * The one place a command chooses between the two.
 */
export function emit(ctx: Context, json: unknown, text: () => string): void {
  if (ctx.global.json) {
    printJson(ctx.stdout, json);
    return;
  }
  const shown = text();
  ctx.stdout.write(shown.endsWith('\n') ? shown : `${shown}\n`);
}

/** A command's result as "✓ what was done", or the JSON document with `--json`. */
export function succeeded(ctx: Context, json: unknown, message: string): void {
  emit(ctx, json, () => `${styleFor(ctx, ctx.stdout).green('✓')} ${message}`);
}

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;
const visibleLength = (s: string) => s.replace(ANSI, '').length;

/**
 * Rows as aligned columns on a terminal (as gh does), or tab-separated when
 * piped, so that `cut` and `awk` get one field per column. Cells are data from the service: their
 * control characters are shown escaped, tabs and newlines included, so a cell stays one field.
 */
export function table(headers: string[], rows: string[][], tty: boolean): string {
  const safe = rows.map((r) => r.map(printable));
  if (!tty) return [headers, ...safe].map((r) => r.join('\t')).join('\n') + '\n';
  const widths = headers.map((h, i) => Math.max(visibleLength(h), ...safe.map((r) => visibleLength(r[i] ?? ''))));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(widths[i]! - visibleLength(c))))
      .join('  ')
      .trimEnd();
  return [fmt(headers), ...safe.map(fmt)].join('\n') + '\n';
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
