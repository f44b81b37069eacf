import type { Out } from '../context.js';
import { LineBuffer } from '../util/line-buffer.js';
import type { StatusLine } from './run-progress.js';

/** What a long-running command keeps unwritten for a stdout nobody reads before it drops lines (and counts them). */
export const OUTPUT_LIMIT: number = 8 * 1024 * 1024;

/**
 * A long-running command's report lines, gathered and written at most every 20 ms (a burst costs one
 * write). When the reader does not keep up (`listen | sleep 300`), lines past OUTPUT_LIMIT unwritten are
 * dropped rather than kept, counted, and the count is reported once stdout drains: the command never
 * waits for its reader.
 */
export function reportWriter(out: Out, json: boolean, status?: StatusLine): LineBuffer {
  let dropped = 0;
  const output: LineBuffer = new LineBuffer((chunk, lines) => {
    if ((out.writableLength ?? 0) <= OUTPUT_LIMIT) {
      if (status) status.above(() => out.write(chunk));
      else out.write(chunk);
      return;
    }
    if (dropped === 0) {
      out.once?.('drain', () => {
        const n = dropped;
        dropped = 0;
        output.push(json ? JSON.stringify({ event: 'output_dropped', lines: n }) : `… ${n} line${n === 1 ? '' : 's'} of output dropped: stdout was not being read`);
      });
    }
    dropped += lines;
  });
  return output;
}
