// What the library exports of signing (src/index.ts re-exports it whole): verify and sign a delivery, a
// session that verifies many, and their types. The layout table and the CLI's helpers are imported from
// their own modules.
export type { Layout, LayoutName, Scheme } from './layouts.js';
export { signDelivery, type SignOptions, type SignedHeaders } from './sign.js';
export {
  verifyDelivery,
  Verifier,
  type VerifyOptions,
  type VerifyResult,
  type VerifySuccess,
  type VerifyFailure,
  type VerifyFailureReason,
  type HeaderSource,
} from './verify.js';
