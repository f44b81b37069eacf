import { describe, expect, it } from 'vitest';
import { exportedNames } from './helpers/exports.js';

// The public surface is a decision: every name each entry exports (values and types), listed here, so
// that adding or dropping one is a change to this list, seen in review. `wxhooks` is the library a
// handler author uses, nothing of the CLI (no HttpClient, Service, credentials, exit codes or CLI errors).

const HANDLER_TYPES = [
  'DataOfType',
  'DegreeDaysResponse',
  'DeliveryType',
  'EventContextResponse',
  'ForecastResponse',
  'GriddedResponse',
  'InterpolatedPointForecastResponse',
  'Payload',
  'PointSeriesEntry',
  'ResponseOfType',
  'ResponseType',
  'TropicalCycloneTrackResponse',
  'VocabularyChecked',
  'WebhookEvent',
  'WebhookEventOf',
];

describe('the public surface', () => {
  it('`wxhooks` (src/index.ts, published as dist/index.d.ts): the handler library, verifyDelivery and signDelivery, the types; nothing of the CLI', () => {
    expect(exportedNames('wxhooks')).toEqual(
      [
        ...HANDLER_TYPES,
        'CatchUpOptions',
        'CaughtUp',
        'Claim',
        'ConnectionListener',
        'ConsumedMessage',
        'ConsumerEvent',
        'ConsumerOutcome',
        'HeaderSource',
        'Layout',
        'LayoutName',
        'MemoryStore',
        'MemoryStoreOptions',
        'MessageRefusedError',
        'NodeMiddlewareOptions',
        'OpenStoreOptions',
        'Outcome',
        'PairStore',
        'RawBody',
        'Receipt',
        'ReceiptOutcome',
        'Scheme',
        'SetupMistake',
        'SignOptions',
        'SignedHeaders',
        'SinkConsumer',
        'Verifier',
        'VerifyFailure',
        'VerifyFailureReason',
        'VerifyOptions',
        'VerifyResult',
        'VerifySuccess',
        'WebhookHandlerError',
        'WebhookSetupError',
        'WebhookTimeoutError',
        'Webhooks',
        'WebhooksConsumeOptions',
        'WebhooksOptions',
        'createNodeMiddleware',
        'openStore',
        'signDelivery',
        'verifyDelivery',
      ].sort(),
    );
  });

  it('`wxhooks/web` (src/handler/web.ts, published as dist/handler/web.d.ts): the same library on Web Crypto, with its own verifyDelivery and signDelivery', () => {
    expect(exportedNames('wxhooks/web')).toEqual(
      [
        ...HANDLER_TYPES,
        'Claim',
        'HeaderSource',
        'MemoryStore',
        'MemoryStoreOptions',
        'PairStore',
        'RawBody',
        'Receipt',
        'ReceiptOutcome',
        'SignedHeaders',
        'VerifyFailure',
        'VerifyFailureReason',
        'VerifyResult',
        'VerifySuccess',
        'WebHandlerOptions',
        'SignOptions',
        'VerifyOptions',
        'WebVerifier',
        'WebVerifierOptions',
        'WebhookHandlerError',
        'WebhookSetupError',
        'WebhookTimeoutError',
        'Webhooks',
        'WebhooksOptions',
        'createWebHandler',
        'signDelivery',
        'verifyDelivery',
      ].sort(),
    );
  });

  it("wxhooks/web's signDelivery and verifyDelivery give the Node entry's headers and results", async () => {
    const node = await import('../src/index.js');
    const web = await import('../src/handler/web.js');
    const secret = 'whsec_' + Buffer.alloc(32, 4).toString('base64');
    const body = JSON.stringify({ type: 'forecast_hour.available', trigger_id: 'trg_web_sign', subscription_id: '1', data: { model: 'wm-6' } });
    for (const layout of ['standard', 'stripe', 'hex-timestamp', 'hex-body'] as const) {
      const headers = await web.signDelivery({ secret, body, triggerId: 'trg_web_sign', timestamp: 1_795_000_000, layout });
      expect(headers).toEqual(node.signDelivery({ secret, body, triggerId: 'trg_web_sign', timestamp: 1_795_000_000, layout }));
      const scheme = layout === 'hex-body' ? 'hex-body' : 'auto';
      expect(await web.verifyDelivery({ secret, headers, body, now: 1_795_000_000_000, scheme })).toEqual(node.verifyDelivery({ secret, headers, body, now: 1_795_000_000_000, scheme }));
    }
    const tampered = await web.signDelivery({ secret, body, triggerId: 'trg_web_sign' });
    expect(await web.verifyDelivery({ secret, headers: tampered, body: body.replace('wm-6', 'wm-7') })).toMatchObject({ ok: false, reason: 'no_match' });
  });

  it("a user's Webhooks offers its own methods, not the doors' hooks (refuseEarly, setupMistake)", async () => {
    const node = await import('../src/index.js');
    const web = await import('../src/handler/web.js');
    /** The public methods of an instance: TypeScript's `private` and `protected` ones are in the type, not here. */
    const methods = (o: object) => {
      const names = new Set<string>();
      for (let p = Object.getPrototypeOf(o); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) for (const n of Object.getOwnPropertyNames(p)) if (n !== 'constructor') names.add(n);
      return names;
    };
    for (const w of [new node.Webhooks({ secret: 'whsec_x' }), new web.Webhooks({ secret: 'whsec_x' })]) {
      const names = methods(w);
      for (const hook of ['refuseEarly', 'setupMistake']) expect(names.has(hook), hook).toBe(false);
      for (const own of ['on', 'onAny', 'onError', 'verify', 'receive', 'verifyAndReceive']) expect(names.has(own), own).toBe(true);
    }
    // and the type says so: a typo of a hook is a compile error in the app
    // @ts-expect-error not a method of Webhooks
    void new node.Webhooks({ secret: 'whsec_x' }).refuseEarly;
  });
});
