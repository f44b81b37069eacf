const UNIX_TIME = /^[0-9]{10,13}$/;

/**
 * Strict timestamp rules: only ASCII digits, 10 to 13 of them (seconds, or
 * milliseconds above 10^12); no sign, no spaces, no exponent, no fraction.
 */
export function parseTimestamp(text: string): number | undefined {
  if (!UNIX_TIME.test(text)) return undefined;
  const n = Number(text);
  return n > 1e12 ? Math.floor(n / 1000) : n;
}
