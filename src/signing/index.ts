export { LAYOUTS, LAYOUT_NAMES, SCHEMES, layoutNamed, type Layout, type LayoutName, type Scheme } from './layouts.js';
export { parseTimestamp } from './timestamp.js';
export { signDelivery, generateSecret, type SignOptions, type SignedHeaders } from './sign.js';
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
