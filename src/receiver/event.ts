// listen's report of a request is the delivery core's (src/delivery/report.ts): its outcome names are the
// one vocabulary (src/delivery/outcomes.ts).
export { verified, type DedupeSource, type ForwardResult, type Outcome, type ReceiverEvent } from '../delivery/report.js';
