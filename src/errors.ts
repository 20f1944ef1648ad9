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
  /** A GraphQL document past a limit (depth, aliases, directives, tokens, estimated cost): refused before it runs. */
  QUERY_TOO_COMPLEX: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  PLATFORM_CONNECTION_NOT_FOUND: 404,
  CONFLICT: 409,
  IDEMPOTENCY_CONFLICT: 409,
  /** The platform account (routing id) is already connected, by any application. */
  PLATFORM_CONNECTION_CONFLICT: 409,
  /** A known path asked with a method it does not take (the answer's `Allow` lists those it does), or a GraphQL mutation over GET. */
  METHOD_NOT_ALLOWED: 405,
  /** GraphQL over HTTP asked for a response type it cannot give (`Accept`). */
  NOT_ACCEPTABLE: 406,
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
  // A disabled connection's inbound URL: the platform should stop posting there.
  INBOUND_DISABLED: 410,
  PLATFORM_RATE_LIMITED: 429,
  RATE_LIMITED: 429,
  TOO_MANY_STREAMS: 429,
  INTERNAL: 500,
  PLATFORM_UNAVAILABLE: 502,
  /** A send interrupted while the platform call was in flight: whether it arrived is unknown, and it is not resent. */
  DELIVERY_UNCERTAIN: 502,
  UNAVAILABLE: 503,
  INVALID_WEBHOOK_TARGET: 400,
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

  constructor(
    code: ErrorCode,
    message: string,
    details?: ErrorDetail[],
    options: { cause?: unknown; headers?: Record<string, string> } = {},
  ) {
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

/**
 * A platform delivery that is not the platform's shape (not JSON, a required id missing):
 * the only error a normaliser may throw. The inbound worker drops such a delivery for good;
 * anything else a normaliser throws is a bug and is retried and logged like one.
 */
export class MalformedPayloadError extends Error {
  constructor(
    readonly platform: string,
    message: string,
  ) {
    super(message);
    this.name = 'MalformedPayloadError';
  }
}

/** Connection-level failure codes of Node sockets, postgres.js and PostgreSQL (SQLSTATE class 08, 57P0x, 53300). */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'CONNECTION_QUEUE_TIMEOUT',
  'NO_SUITABLE_SERVER', // a multi-host DATABASE_URL with no primary among its servers now (patches/)
  '57014', // statement_timeout: the database is too slow for this request now
  '25P03', // idle_in_transaction_session_timeout ended the session
  '08000',
  '08001',
  '08003',
  '08004',
  '08006', // connection exceptions
  '57P01',
  '57P02',
  '57P03', // admin shutdown (pg_terminate_backend), crash shutdown, cannot connect now
  '53300', // too many connections
  // A write on a read-only server: a standby, or an old primary fenced or back as one. Its
  // session is closed (src/db.ts) and the next one finds the primary (src/db-primary.ts).
  '25006',
]);

/**
 * Errors raised by Redis or Postgres being unreachable: answered 503 `UNAVAILABLE`, never 500.
 * The one place that knows what such failures look like; REST and GraphQL both ask it.
 */
export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: string; name?: string; message?: string } | undefined;
  if (!e) return false;
  if (err instanceof AppError) return err.code === 'UNAVAILABLE';
  if (e.code && UNAVAILABLE_CODES.has(e.code)) return true;
  if (e.name === 'MaxRetriesPerRequestError') return true;
  // Whatever a Redis server answers with an error on a request's command — a cluster
  // redirection or CROSSSLOT that reached us, CLUSTERDOWN, TRYAGAIN, OOM under noeviction —
  // is the store refusing for now; the client retries. And ioredis's own Cluster failures.
  if (e.name === 'ReplyError' || e.name === 'ClusterAllFailedError') return true;
  // ioredis (offline queue off, retries spent, command bound hit), BullMQ on a closed
  // connection, and a database closed to new connections (ALTER DATABASE … ALLOW_CONNECTIONS false).
  return /Connection is closed|Stream isn't writeable|max retries per request|enableOfflineQueue|Command timed out|not currently accepting connections|Too many Cluster redirections|Failed to refresh slots cache|None of startup nodes is available|should belong to the same slot/.test(
    e.message ?? '',
  );
}

/**
 * SQLSTATE classes of errors caused by the data of a statement, not by the session: 22 data
 * exception (U+0000 in text, a value out of range, malformed JSON), 23 integrity constraint
 * violation, 54 program limit exceeded (stack depth: JSON nested too deep). Run again with the
 * same data they fail again; run without that data the rest succeeds.
 */
const DATA_ERROR_CLASSES = new Set(['22', '23', '54']);

/**
 * Whether `err` is one item's fault rather than the batch's: PostgreSQL refused its data, or
 * serialising it overflowed the stack or the longest string (RangeError). A batch failing with
 * one is split to find the item (src/tick-batch.ts); its job fails for good (no retry can
 * help). Outages and lost sessions (`isUnavailable`), deadlocks and anything unknown are not:
 * they fail the batch and are retried whole.
 */
export function isItemFault(err: unknown): boolean {
  // Only serialisation's overflows: a RangeError from a buffer (a corrupted protocol stream) is the session's.
  if (err instanceof RangeError) return /Maximum call stack size exceeded|Invalid string length/.test(err.message);
  if (isUnavailable(err)) return false;
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && DATA_ERROR_CLASSES.has(code.slice(0, 2));
}

/**
 * An item's fault that no retry can cure: its data is malformed for PostgreSQL (class 22), past
 * one of its limits (class 54) or cannot be serialised. An integrity violation (class 23) is
 * the item's too, but can be a race another attempt wins (a row not yet committed, two
 * inserts of one key), so it is retried.
 */
export function isPermanentItemFault(err: unknown): boolean {
  return isItemFault(err) && !String((err as { code?: unknown }).code).startsWith('23');
}

/** Why an item was refused (see `isItemFault`), in words safe to show whoever sent it. */
export function describeItemFault(err: unknown): string {
  if (err instanceof RangeError) return 'it is nested too deeply or too large to serialise';
  const e = err as { code?: string; message?: string };
  return `the database refused its data: ${e.message ?? 'unknown error'} (SQLSTATE ${e.code})`;
}

/** The UNAVAILABLE error: 503 with `Retry-After: 1`, so clients back off briefly and retry. */
export function unavailable(service = 'A backing service', cause?: unknown): AppError {
  return new AppError('UNAVAILABLE', `${service} is unavailable; retry shortly`, undefined, { cause, headers: { 'Retry-After': '1' } });
}
