// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * Text from the service or from a delivery, made safe to show on a terminal: C0 and C1 control
 * characters and DEL are shown escaped (`\x1b`, `\n`, `\u009b`), so that a name, a note, an id or an
 * error message cannot move the cursor, clear the screen, retitle the window, hide a link or forge a
 * line of output. Every text output that carries such data passes it through here; `--json` needs
 * nothing (JSON escapes them already).
 */
export function printable(text: string): string {
  if (!CONTROL.test(text)) return text;
  return text.replace(CONTROLS, (c) => {
    const code = c.charCodeAt(0);
    return NAMED[c] ?? (code < 0x80 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`);
  });
}
