import type { LateNotification } from '../delivery/reconcile.js';
import { RunWatch, runOnLate, type RunWatchOptions } from '../receiver/reconcile.js';
import { formatDuration } from '../util/duration.js';
import { printable } from '../util/printable.js';
import type { Style } from './style.js';

/** A late notification in a line: what, since when, and that it has not arrived. */
export function describeLate(l: LateNotification, style: Style): string {
  const what = [printable(l.model), l.initialization_time.replace(':00:00Z', ':00Z'), l.forecast_hour !== undefined ? `+${l.forecast_hour}h` : undefined].filter(Boolean).join(' ');
  return `${style.yellow('late')}  ${what} (${l.type}, subscription ${printable(l.subscription_id)}): available since ${l.created_at.slice(11, 19)}, ${formatDuration(l.late_ms)} ago, and not delivered`;
}

/** Where a run watch says what it finds: a line about the command itself (NDJSON with --json), and stderr. */
export interface LateSay {
  say(event: Record<string, unknown>, text: string): void;
  stderr: { write(text: string): unknown };
  env: Record<string, string | undefined>;
  style: Style;
}

/**
 * The run watch of `listen --watch-runs` and `runs watch`, started: each late notification said once (a
 * line; a `late_hour` event) and run through `--on-late`; a look that failed said, the next trying again.
 */
export function watchLateRuns(o: Omit<RunWatchOptions, 'onLate' | 'onError'> & { onLate?: string; what: string; told?: (late: LateNotification) => void }, out: LateSay): RunWatch {
  const { style } = out;
  const watch = new RunWatch({
    ...o,
    onLate(late) {
      o.told?.(late);
      out.say({ event: 'late_hour', ...late }, describeLate(late, style));
      if (o.onLate !== undefined)
        void runOnLate(o.onLate, late, out.env, out.stderr).then((r) => {
          if (r.code !== 0) out.stderr.write(`${style.yellow(`warning: --on-late ${r.error ? `could not run: ${printable(r.error)}` : `exited ${r.code}`}.`)}\n`);
        });
    },
    onError: (err) =>
      out.say(
        { event: 'watch_failed', reason: (err as Error).message },
        style.yellow(`warning: ${o.what} could not ask the forecast API (${printable((err as Error).message)}); it tries again in ${formatDuration(o.intervalMs)}.`),
      ),
  });
  watch.start();
  return watch;
}
