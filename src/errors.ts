/**
 * The error hierarchy and the exit-code table. Only src/cli.ts turns an error
 * into a message and an exit code; the core throws these and never exits.
 */
export const ExitCode = {
  /** done */
  OK: 0,
  /** an unexpected error: a bug */
  UNEXPECTED: 1,
  /** bad usage or input, found before any request */
  USAGE: 2,
  /** no WX_API_KEY, 401/403, or `authed: false` */
  AUTH: 3,
  /** the service answered 404 */
  NOT_FOUND: 4,
  /** the service refused the request (400, 409, 422, other 4xx) */
  REFUSED: 5,
  /** the service could not be reached, timed out, or answered 5xx after the retries allowed */
  UNREACHABLE: 6,
  /** a delivery attempt failed: `ping` (the service's attempt), `send` (the receiver's answer was not 2xx) */
  DELIVERY_FAILED: 7,
  /** the webhook was created but its secret could not be stored */
  SECRET_NOT_SAVED: 8,
  /** not verified: a delivery did not verify (`verify`), or the verified deliveries `listen` waits for did not come within `--within` */
  NOT_VERIFIED: 9,
  /** interrupted (Ctrl-C); told to stop by SIGTERM is 143 and by SIGHUP 129, as shells count them */
  INTERRUPTED: 130,
} as const;

export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode] | 129 | 143;

export interface WxErrorOptions {
  hint?: string;
  cause?: unknown;
  /** The HTTP status the service (or a receiver) answered, when there was one. */
  status?: number;
  /** What the service said, in its own words (its message, error or detail field, else the start of its body). */
  serviceMessage?: string;
}

export class WxError extends Error {
  readonly exitCode: ExitCodeValue = ExitCode.UNEXPECTED;
  readonly hint?: string;
  readonly status?: number;
  readonly serviceMessage?: string;

  constructor(message: string, options: WxErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.hint = options.hint;
    this.status = options.status;
    this.serviceMessage = options.serviceMessage;
  }
}

export class UsageError extends WxError {
  override readonly exitCode = ExitCode.USAGE;
}

export class AuthError extends WxError {
  override readonly exitCode = ExitCode.AUTH;
}

export class NotFoundError extends WxError {
  override readonly exitCode = ExitCode.NOT_FOUND;
}

export class RefusedError extends WxError {
  override readonly exitCode = ExitCode.REFUSED;
}

export class UnreachableError extends WxError {
  override readonly exitCode = ExitCode.UNREACHABLE;
}

/** A delivery attempt failed (exit 7): the service's test delivery (`ping`), or `send`'s receiver answering other than 2xx. */
export class DeliveryFailedError extends WxError {
  override readonly exitCode = ExitCode.DELIVERY_FAILED;
}

/** Not verified (exit 9): a delivery that does not verify, or verified deliveries that did not come in time. */
export class NotVerifiedError extends WxError {
  override readonly exitCode = ExitCode.NOT_VERIFIED;
}

/** Stopped by a signal: 130 for Ctrl-C (SIGINT), 143 for SIGTERM, 129 for SIGHUP (128 + the signal's number). */
export class InterruptedError extends WxError {
  override readonly exitCode: ExitCodeValue;
  constructor(readonly signal: NodeJS.Signals = 'SIGINT') {
    super(`interrupted (${signal})`);
    this.exitCode = signal === 'SIGTERM' ? 143 : signal === 'SIGHUP' ? 129 : ExitCode.INTERRUPTED;
  }
}

/** The webhook exists but its one-time secret is not in the store. Carries the secret so the CLI can print it on stderr. */
export class SecretNotSavedError extends WxError {
  override readonly exitCode = ExitCode.SECRET_NOT_SAVED;
  constructor(
    message: string,
    readonly webhookId: string,
    readonly secret: string,
    options: WxErrorOptions = {},
  ) {
    super(message, options);
  }
}
