export {
  ExitCode,
  WxError,
  UsageError,
  AuthError,
  NotFoundError,
  RefusedError,
  UnreachableError,
  DeliveryFailedError,
  NotVerifiedError,
  SecretNotSavedError,
} from './errors.js';
export { HttpClient, type HttpClientOptions } from './api/http.js';
export { Service } from './api/service.js';
export { resolveCredentials, type Credentials } from './api/credentials.js';
export type { Webhook, Subscription, WebhookPage, AuthStatus } from './api/normalize.js';
export {
  verifyDelivery,
  signDelivery,
  generateSecret,
  Verifier,
  LAYOUTS,
  LAYOUT_NAMES,
  SCHEMES,
  type Layout,
  type LayoutName,
  type Scheme,
  type VerifyOptions,
  type VerifyResult,
  type VerifySuccess,
  type VerifyFailure,
  type VerifyFailureReason,
  type SignOptions,
  type SignedHeaders,
} from './signing/index.js';
