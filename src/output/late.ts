import type { LateNotification } from '../delivery/reconcile.js';
import { formatDuration } from '../util/duration.js';
import { printable } from '../util/printable.js';
import type { Style } from './style.js';

/** A late notification in a line: what, since when, and that it has not arrived. */
export function describeLate(l: LateNotification, style: Style): string {
  const what = [printable(l.model), l.initialization_time.replace(':00:00Z', ':00Z'), l.forecast_hour !== undefined ? `+${l.forecast_hour}h` : undefined].filter(Boolean).join(' ');
  return `${style.yellow('late')}  ${what} (${l.type}, subscription ${printable(l.subscription_id)}): available since ${l.created_at.slice(11, 19)}, ${formatDuration(l.late_ms)} ago, and not delivered`;
}
