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
  /** ping: the delivery attempt failed */
  PING_FAILED: 7,
  /** the webhook was created but its secret could not be stored */
  SECRET_NOT_SAVED: 8,
  /** a delivery did not verify (`verify`), or `listen --until` saw nothing within `--within` */
  VERIFY_FAILED: 9,
  /** interrupted (Ctrl-C) */
  INTERRUPTED: 130,
} as const;

export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

export interface WxErrorOptions {
  hint?: string;
  cause?: unknown;
  /** The HTTP status the service answered, when there was one. */
  status?: number;
}

export class WxError extends Error {
  readonly exitCode: ExitCodeValue = ExitCode.UNEXPECTED;
  readonly hint?: string;
  readonly status?: number;

  constructor(message: string, options: WxErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.hint = options.hint;
    this.status = options.status;
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

export class PingFailedError extends WxError {
  override readonly exitCode = ExitCode.PING_FAILED;
}

export class VerifyFailedError extends WxError {
  override readonly exitCode = ExitCode.VERIFY_FAILED;
}

export class InterruptedError extends WxError {
  override readonly exitCode = ExitCode.INTERRUPTED;
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
