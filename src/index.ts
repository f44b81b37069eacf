// `import … from 'wxhooks'`: the library a handler author uses, and nothing of the CLI. Each name here is
// a decision: test/exports.test.ts lists them, for this entry and for `wxhooks/web`.
export {
  Webhooks,
  createNodeMiddleware,
  openStore,
  type CatchUpOptions,
  type CaughtUp,
  type NodeMiddlewareOptions,
  type OpenStoreOptions,
  type WebhooksConsumeOptions,
} from './handler/node.js';
export { MessageRefusedError, type ConsumedMessage, type ConsumerEvent, type ConsumerOutcome } from './sinks/consumer.js';
export type { ConnectionListener, SinkConsumer } from './sinks/sink.js';
export {
  WebhookHandlerError,
  WebhookSetupError,
  WebhookTimeoutError,
  type Receipt,
  type ReceiptOutcome,
  type RawBody,
  type SetupMistake,
  type WebhooksOptions,
} from './handler/core.js';
export { MemoryStore, type MemoryStoreOptions } from './delivery/memory-store.js';
export type { Claim, PairStore } from './delivery/store.js';
export type { Outcome } from './delivery/outcomes.js';
export type * from './handler/types.js';
export * from './signing/index.js';
