/** A runner error with a stable code, answered to the control plane as `{ code, message }`. */
export class Failure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
