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
export const visibleLength = (s: string): number => s.replace(ANSI, '').length;

/**
 * A line cut to `width` columns, its colours kept (and closed), with `…` where it was cut: so that a
 * terminal never wraps it in the middle of a field. Under 20 columns (or none: not a terminal), as it is.
 */
export function fitLine(text: string, width: number | undefined): string {
  if (!width || width < 20 || visibleLength(text) <= width) return text;
  let out = '';
  let shown = 0;
  for (let i = 0; i < text.length; ) {
    const code = text[i] === '\u001b' ? /^\u001b\[[0-9;]*m/.exec(text.slice(i)) : null;
    if (code) {
      out += code[0];
      i += code[0].length;
      continue;
    }
    if (shown === width - 1) break;
    const ch = String.fromCodePoint(text.codePointAt(i)!);
    out += ch;
    shown++;
    i += ch.length;
  }
  return `${out}…${/\u001b/.test(out) ? '\u001b[0m' : ''}`;
}

/** Prose wrapped at spaces to `width` columns, each line after the first indented by `indent` (undefined width: one line). */
export function wrapWords(text: string, width: number | undefined, indent = ''): string {
  if (!width || width < 20 || visibleLength(text) <= width) return text;
  const lines: string[] = [];
  let current = '';
  for (const word of text.split(' ')) {
    const next = current ? `${current} ${word}` : word;
    if (current && visibleLength(next) > width) {
      lines.push(current);
      current = `${indent}${word}`;
    } else current = next;
  }
  lines.push(current);
  return lines.map((l) => fitLine(l, width)).join('\n');
}

/**
 * Rows as aligned columns on a terminal (as gh does), or tab-separated when
 * piped, so that `cut` and `awk` get one field per column. Cells are data from the service: their
 * control characters are shown escaped, tabs and newlines included, so a cell stays one field.
 */
export function table(headers: string[], rows: string[][], tty: boolean, width?: number): string {
  const safe = rows.map((r) => r.map(printable));
  if (!tty) return [headers, ...safe].map((r) => r.join('\t')).join('\n') + '\n';
  const widths = headers.map((h, i) => Math.max(visibleLength(h), ...safe.map((r) => visibleLength(r[i] ?? ''))));
  const fmt = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c + ' '.repeat(widths[i]! - visibleLength(c))))
      .join('  ')
      .trimEnd();
  return [fmt(headers), ...safe.map(fmt)].map((l) => fitLine(l, width)).join('\n') + '\n';
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * The start of `text` within `max` characters, cut after a whole word (at a space, else after a
 * punctuation mark), with `…` where it was cut; a single word longer than `max` is cut inside.
 */
export function truncateWords(text: string, max: number): string {
  if (text.length <= max) return text;
  const room = text.slice(0, max - 1);
  const space = room.lastIndexOf(' ');
  const mark = Math.max(...[',', ';', ':', '.', ')', ']', '}', '"'].map((c) => room.lastIndexOf(c)));
  const end = space > max / 2 ? space : mark > max / 2 ? mark + 1 : room.length;
  return `${text.slice(0, end).trimEnd()}…`;
}
