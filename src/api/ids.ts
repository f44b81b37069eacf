import { identifier } from '../util/parse.js';

/**
 * An identifier as a path segment: refused if it could reach another route (`/`, `?`, `#`,
 * whitespace, `..`; see idProblem), percent-encoded otherwise. Commands check their identifiers when
 * they parse them; the service client checks again, since the library can be called directly.
 */
export function pathId(value: string | number, what: string): string {
  return encodeURIComponent(identifier(String(value), `The ${what}`));
}
