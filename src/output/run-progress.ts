import type { Out } from '../context.js';
import { compressHours, type RunProgress } from '../delivery/runs.js';
import type { Style } from './style.js';

const shortInit = (iso: string) => iso.replace(/:00:00Z$/, 'Z').replace(/:00Z$/, 'Z');

/** `wm-6 2026-11-22T00Z ▕███████░░░▏ 31/41 hours, +0h-+180h/6 in, waiting on +186h…` */
export function progressBar(p: RunProgress, needInit: boolean, style: Style, width = 10): string {
  const total = p.have.length + p.missing.length;
  const filled = total ? Math.round((p.have.length / total) * width) : width;
  const bar = `▕${style.green('█'.repeat(filled))}${style.dim('░'.repeat(width - filled))}▏`;
  const waiting = p.missing.length
    ? `waiting on ${compressHours(p.missing.slice(0, 3))}${p.missing.length > 3 ? '…' : ''}`
    : needInit && !p.init_event
      ? 'waiting on its initialization_time.available'
      : 'complete';
  return `${p.model} ${shortInit(p.initialization_time)} ${bar} ${p.have.length}/${total} hours${p.have.length ? `, ${compressHours(p.have)} in` : ''}, ${waiting}`;
}

/** One plain line per hour that arrives (when the progress is not on a terminal). */
export function progressLine(p: RunProgress, what: string): string {
  const total = p.have.length + p.missing.length;
  return `${p.model} ${shortInit(p.initialization_time)}: ${what} (${p.have.length}/${total} hours${p.complete ? ', complete' : p.missing.length ? `, missing ${compressHours(p.missing)}` : ', waiting on its initialization_time.available'})`;
}

/**
 * One line kept at the bottom of a terminal, that other lines scroll above: before anything else is
 * written the line is cleared, and drawn again after. It is cut to the terminal's width, so that it
 * never wraps (a wrapped line cannot be cleared).
 */
export class StatusLine {
  private text = '';
  constructor(private readonly out: Out & { columns?: number }) {}

  show(text: string): void {
    const width = this.out.columns || 80; // a terminal that reports no width (some pseudo-terminals) gets 80
    this.text = cut(text, width - 1);
    this.out.write(`\r\u001b[2K${this.text}`);
  }

  /** Runs `write` (which writes whole lines) with the status line out of its way. */
  above(write: () => void): void {
    if (this.text) this.out.write('\r\u001b[2K');
    write();
    if (this.text) this.out.write(this.text);
  }

  /** Leaves the line where it is, as a last line of its own. */
  done(): void {
    if (this.text) this.out.write('\n');
    this.text = '';
  }
}

/** Cut to `width` visible characters (colour codes are not counted, and are kept). */
function cut(text: string, width: number): string {
  let visible = 0;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\u001b') {
      const end = text.indexOf('m', i);
      out += text.slice(i, end + 1);
      i = end;
      continue;
    }
    if (visible >= width) continue;
    out += text[i];
    visible++;
  }
  return out;
}
