export { LAYOUTS, LAYOUT_NAMES, type Layout, type LayoutName } from './layouts.js';
export { parseTimestamp } from './timestamp.js';
export { signDelivery, generateSecret, type SignOptions, type SignedHeaders } from './sign.js';
export {
  verifyDelivery,
  Verifier,
  headerValue,
  type VerifyOptions,
  type VerifyResult,
  type VerifySuccess,
  type VerifyFailure,
  type VerifyFailureReason,
  type Scheme,
  type HeaderSource,
} from './verify.js';
