/**
 * The gateway's error codes and the HTTP status each maps to: the one table REST, GraphQL and
 * workers share. Add a code here before using it anywhere.
 */
export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  INVALID_JSON: 400,
  INVALID_CURSOR: 400,
  RESERVED_EVENT_TYPE: 400,
  MESSAGE_TOO_LONG: 400,
  INVALID_RECIPIENT: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  PLATFORM_CONNECTION_NOT_FOUND: 404,
  CONFLICT: 409,
  IDEMPOTENCY_CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  UNPROCESSABLE: 422,
  // Permanent refusals of a send, by the platform or by our knowledge of its rules.
  REPLY_WINDOW_CLOSED: 422,
  RECIPIENT_NOT_STARTED: 422,
  RECIPIENT_BLOCKED: 422,
  PLATFORM_AUTH_FAILED: 422,
  PLATFORM_REJECTED: 422,
  CONNECTION_DISABLED: 422,
  PLATFORM_RATE_LIMITED: 429,
  RATE_LIMITED: 429,
  TOO_MANY_STREAMS: 429,
  INTERNAL: 500,
  PLATFORM_UNAVAILABLE: 502,
  UNAVAILABLE: 503,
  // Identity (users, link codes). A merged-away user answers 410 with `merged_into` in details.
  USER_MERGED: 410,
  LINK_CODE_NOT_FOUND: 404,
  LINK_CODE_EXPIRED: 410,
  LINK_CODE_USED: 409,
  LINK_CODE_ATTEMPTS_EXCEEDED: 429,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  /** Where the problem is, as path segments (`["payload", "amount"]`). */
  path?: (string | number)[];
  message: string;
  [key: string]: unknown;
}

/** An expected failure: carried as a value by domain code, thrown only at the faces. */
export interface Failure {
  code: ErrorCode;
  message: string;
  details?: ErrorDetail[];
}

export type Result<T> = { ok: true; value: T } | { ok: false; error: Failure };

export const ok = <T>(value: T): Result<T> => ({ ok: true, value });
export const fail = (code: ErrorCode, message: string, details?: ErrorDetail[]): { ok: false; error: Failure } => ({
  ok: false,
  error: { code, message, ...(details ? { details } : {}) },
});

/** A Failure in flight through a face (REST handler, GraphQL resolver). */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly details?: ErrorDetail[];
  /** Extra response headers (Retry-After, WWW-Authenticate…). */
  readonly headers?: Record<string, string>;

  constructor(code: ErrorCode, message: string, details?: ErrorDetail[], options: { cause?: unknown; headers?: Record<string, string> } = {}) {
    super(message, { cause: options.cause });
    this.code = code;
    this.details = details;
    this.headers = options.headers;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }

  static from(failure: Failure): AppError {
    return new AppError(failure.code, failure.message, failure.details);
  }

  toBody(): { error: Failure } {
    return { error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
}

/** Unwraps a Result at a face, turning the failure into an AppError. */
export function unwrap<T>(result: Result<T>): T {
  if (!result.ok) throw AppError.from(result.error);
  return result.value;
}

/** Errors raised by Redis or Postgres being unreachable: answered 503, not 500. */
export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; name?: string; message?: string } | undefined;
  if (!e) return false;
  if (e.code && ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', '57P01', '57P03'].includes(e.code)) return true;
  return /Connection is closed|Stream isn't writeable|MaxRetriesPerRequest|enableOfflineQueue/.test(e.message ?? '');
}
