export { ExitCode, WxError, UsageError, AuthError, NotFoundError, RefusedError, UnreachableError, PingFailedError, SecretNotSavedError } from './errors.js';
export { HttpClient, type HttpClientOptions } from './api/http.js';
export { Service } from './api/service.js';
export { resolveCredentials, type Credentials } from './api/credentials.js';
export type { Webhook, Subscription, WebhookPage, AuthStatus } from './api/normalize.js';
