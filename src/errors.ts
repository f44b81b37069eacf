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
  /** no WX_API_KEY, 401/403, or `authed: false`; a relay that refuses its token or a channel's key (`listen --relay`, `relay status`) */
  AUTH: 3,
  /** the service answered 404 */
  NOT_FOUND: 4,
  /** the service refused the request (400, 409, 422, other 4xx); a relay that refuses `listen --relay` for good (another listen holds the channel, it creates no more channels) */
  REFUSED: 5,
  /** the service could not be reached, timed out, or answered 5xx after the retries allowed (`listen --relay` never gives up on a relay away: it says so at every try) */
  UNREACHABLE: 6,
  /** a delivery attempt failed: `ping` (the service's attempt), `send` (the receiver's answer was not 2xx) */
  DELIVERY_FAILED: 7,
  /** the webhook was created but its secret could not be stored */
  SECRET_NOT_SAVED: 8,
  /** not verified: a delivery did not verify (`verify`), or the verified deliveries `listen` waits for did not come within `--within`; a replay with nothing verified to replay */
  NOT_VERIFIED: 9,
  /** local storage failed while running: the processed-pairs file or the shared store could not be written for too long (`listen`) */
  STORAGE_FAILED: 10,
  /** something is missing: `reconcile` found notifications the forecast API says exist that were not processed here (and, with --catch-up, could not be handed over) */
  MISSING: 11,
  /** told to stop by SIGHUP (128 + 1, as shells count it) */
  HANGUP: 129,
  /** interrupted (Ctrl-C: SIGINT) */
  INTERRUPTED: 130,
  /** stdout was closed by its reader (a closed pipe: 128 + SIGPIPE's 13, as a shell reports it); `listen` finished what was in flight first */
  OUTPUT_CLOSED: 141,
  /** told to stop by SIGTERM (128 + 15) */
  TERMINATED: 143,
} as const;

export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

/** The exit codes in a line or two, for the help: from the table above, so that the two cannot differ. */
export const EXIT_CODE_WORDS: Record<ExitCodeValue, string> = {
  0: 'done',
  1: 'bug',
  2: 'usage',
  3: 'credentials',
  4: 'not found',
  5: 'refused',
  6: 'unreachable',
  7: 'delivery failed',
  8: 'secret not saved',
  9: 'not verified',
  10: 'storage failed',
  11: 'missing',
  129: 'SIGHUP',
  130: 'interrupted',
  141: 'output closed',
  143: 'SIGTERM',
};

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
  override readonly exitCode: typeof ExitCode.USAGE = ExitCode.USAGE;
}

export class AuthError extends WxError {
  override readonly exitCode: typeof ExitCode.AUTH = ExitCode.AUTH;
}

export class NotFoundError extends WxError {
  override readonly exitCode: typeof ExitCode.NOT_FOUND = ExitCode.NOT_FOUND;
}

export class RefusedError extends WxError {
  override readonly exitCode: typeof ExitCode.REFUSED = ExitCode.REFUSED;
}

export class UnreachableError extends WxError {
  override readonly exitCode: typeof ExitCode.UNREACHABLE = ExitCode.UNREACHABLE;
}

/** A delivery attempt failed (exit 7): the service's test delivery (`ping`), or `send`'s receiver answering other than 2xx. */
export class DeliveryFailedError extends WxError {
  override readonly exitCode: typeof ExitCode.DELIVERY_FAILED = ExitCode.DELIVERY_FAILED;
}

/** Not verified (exit 9): a delivery that does not verify, or verified deliveries that did not come in time. */
export class NotVerifiedError extends WxError {
  override readonly exitCode: typeof ExitCode.NOT_VERIFIED = ExitCode.NOT_VERIFIED;
}

/** Local storage failed while running (exit 10): what was acknowledged is stored; what was not, the service retries. */
export class StorageError extends WxError {
  override readonly exitCode: typeof ExitCode.STORAGE_FAILED = ExitCode.STORAGE_FAILED;
}

/** Something is missing (exit 11): `reconcile` found notifications that were not processed here, a CI gate's failure. */
export class MissingError extends WxError {
  override readonly exitCode: typeof ExitCode.MISSING = ExitCode.MISSING;
}

/** Why a long-running command was told to stop: a signal, or its stdout closed by the reader (`listen | head`). */
export type StopReason = NodeJS.Signals | 'EPIPE';

/**
 * Stopped by a signal: 130 for Ctrl-C (SIGINT), 143 for SIGTERM, 129 for SIGHUP (128 + the signal's
 * number); or by a closed stdout, 141 (as a shell reports SIGPIPE).
 */
export class InterruptedError extends WxError {
  override readonly exitCode: ExitCodeValue;
  constructor(readonly signal: StopReason = 'SIGINT') {
    super(signal === 'EPIPE' ? 'stdout was closed' : `interrupted (${signal})`);
    this.exitCode = signal === 'SIGTERM' ? ExitCode.TERMINATED : signal === 'SIGHUP' ? ExitCode.HANGUP : signal === 'EPIPE' ? ExitCode.OUTPUT_CLOSED : ExitCode.INTERRUPTED;
  }
}

/** The webhook exists but its one-time secret is not in the store. Carries the secret so the CLI can print it on stderr. */
export class SecretNotSavedError extends WxError {
  override readonly exitCode: typeof ExitCode.SECRET_NOT_SAVED = ExitCode.SECRET_NOT_SAVED;
  constructor(
    message: string,
    readonly webhookId: string,
    readonly secret: string,
    options: WxErrorOptions = {},
  ) {
    super(message, options);
  }
}
