/**
 * A value that may be a promise, for code that stays synchronous as far as it can (Node's crypto verifies
 * in the same turn; Web Crypto and a store answer later): one home for the test, which every layer imports.
 */

/** Whether `x` is a promise (anything with a `then`). */
export const isPromise = <T>(x: T | PromiseLike<T>): x is PromiseLike<T> => typeof (x as { then?: unknown })?.then === 'function';

/** `f(x)` now if `x` is here, else once it is. */
export const andThen = <T, U>(x: T | PromiseLike<T>, f: (t: T) => U | PromiseLike<U>): U | PromiseLike<U> => (isPromise(x) ? x.then(f) : f(x));
