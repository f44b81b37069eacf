import { UsageError } from '../errors.js';

/**
 * Refuses identifiers that could reach another route (`/`, `?`, `#`,
 * whitespace, `..`) and percent-encodes the rest for a path segment.
 */
export function pathId(value: string | number, what: string): string {
  const text = String(value);
  if (text.length === 0) throw new UsageError(`The ${what} is empty.`);
  if (/[/?#\\]|\s|\.\./.test(text) || /[\u0000-\u001f\u007f]/.test(text)) {
    throw new UsageError(`The ${what} "${text.replace(/[\u0000-\u001f\u007f]/g, '?')}" is not a valid identifier.`, {
      hint: 'Identifiers cannot contain "/", "?", "#", "\\", whitespace or "..". Copy the id from `wxhooks webhook list`.',
    });
  }
  return encodeURIComponent(text);
}
