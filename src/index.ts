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
export { Webhooks, createNodeMiddleware, openStore, type NodeMiddlewareOptions, type OpenStoreOptions } from './handler/node.js';
export { MemoryStore, WebhookHandlerError, type HandlerStore, type MemoryStoreOptions, type Receipt, type RawBody, type WebhooksOptions } from './handler/core.js';
export type * from './handler/types.js';
