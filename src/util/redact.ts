/**
 * The one place secrets are taken out of text: every logger and the error
 * printer pass what they write through `redact`.
 */
const sensitive = new Set<string>();

/** Registers a value (an API key, a webhook secret) that must never be printed. */
export function addSensitive(value: string | undefined): void {
  if (value && value.length >= 4) sensitive.add(value);
}

export function redact(text: string, extra: readonly (string | undefined)[] = []): string {
  let out = text;
  for (const value of [...sensitive, ...extra]) {
    if (value && value.length >= 4) out = out.split(value).join('***');
  }
  // Authorization values, whatever they hold.
  return out.replace(/(authorization:\s*)(bearer|basic)\s+\S+/gi, '$1$2 ***');
}
