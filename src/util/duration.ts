/** `1500` -> `1.5s`, `120000` -> `2m`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(1)}s`;
  if (ms < 3_600_000) return `${+(ms / 60_000).toFixed(1)}m`;
  return `${+(ms / 3_600_000).toFixed(1)}h`;
}
