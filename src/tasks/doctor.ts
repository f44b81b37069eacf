/** One line of `doctor`'s report: what was checked, whether it held, and what to do about it. */
export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  /** What to do about it. */
  hint?: string;
  /** Said, but not a failure (an emulator's local URL). */
  note?: string;
}
