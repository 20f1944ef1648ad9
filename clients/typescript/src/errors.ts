/** The error body every REST error answers with (the document's `Error` schema). */
export interface ErrorBody {
  error: { code: string; message: string; details?: Record<string, unknown>[] };
}

/**
 * A refusal by the service: the HTTP status and the body's `code` (VALIDATION_ERROR,
 * RATE_LIMITED, IDEMPOTENCY_CONFLICT…), so callers branch on the code, not on the text.
 */
export class GatewayError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown>[];
  /** Seconds to wait before retrying, from `Retry-After` (429, 503), when the service sent one. */
  readonly retryAfter?: number;

  constructor(status: number, body: unknown, headers?: Headers) {
    const parsed = isErrorBody(body) ? body.error : undefined;
    super(parsed?.message ?? `HTTP ${status}${typeof body === 'string' && body ? `: ${body.slice(0, 200)}` : ''}`);
    this.name = 'GatewayError';
    this.status = status;
    this.code = parsed?.code ?? `HTTP_${status}`;
    this.details = parsed?.details ?? [];
    const retryAfter = Number(headers?.get('retry-after') ?? Number.NaN);
    if (Number.isFinite(retryAfter)) this.retryAfter = retryAfter;
  }
}

function isErrorBody(body: unknown): body is ErrorBody {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return typeof error?.code === 'string' && typeof error.message === 'string';
}

/** The data of an openapi-fetch answer, or the GatewayError its status and body describe. */
export function unwrap<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (!result.response.ok) throw new GatewayError(result.response.status, result.error, result.response.headers);
  return result.data as T;
}
