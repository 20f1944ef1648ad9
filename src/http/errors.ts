import type { NextFunction, Request, Response } from 'express';
import { ZodError } from 'zod';
import { AppError, isUnavailable, unavailable } from '../errors.js';
import type { Logger } from '../logger.js';
import { zodDetails } from './zod-details.js';

/** Turns anything thrown into a response: the REST face of the one error table. */
export function toAppError(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err;
  if (err instanceof ZodError) return new AppError('VALIDATION_ERROR', 'Invalid request', zodDetails(err));
  const e = err as { type?: string; status?: number; expose?: boolean };
  if (e?.type === 'entity.parse.failed') return new AppError('INVALID_JSON', 'Request body is not valid JSON');
  if (e?.type === 'entity.too.large') return new AppError('PAYLOAD_TOO_LARGE', 'Request body is too large');
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported')
    return new AppError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported body encoding');
  // The router cannot percent-decode a path parameter (`%ED%A0%80`, a lone `%`): the client's URL is bad.
  if (err instanceof URIError)
    return new AppError('VALIDATION_ERROR', 'The URL has malformed percent-encoding', [
      { path: ['params'], message: 'not valid percent-encoded UTF-8' },
    ]);
  if (isUnavailable(err)) return unavailable(undefined, err);
  return undefined;
}

export function errorHandler(logger: Logger) {
  return (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const log = (req as Request & { log?: Logger }).log ?? logger;
    // The client went away before its body arrived (or was cut by HTTP_REQUEST_TIMEOUT_MS):
    // nobody is left to answer, and it is no fault of ours. The request log notes it at info.
    if ((err as { type?: string })?.type === 'request.aborted') {
      log.debug({ err }, 'client aborted the request body');
      return void res.destroy();
    }
    const known = toAppError(err);
    if (!known) log.error({ err }, 'unhandled error');
    else if (known.code === 'UNAVAILABLE') log.warn({ err: (known.cause as Error) ?? err }, 'backing service unavailable');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendError(res, known ?? new AppError('INTERNAL', 'Internal error; the request id identifies it in the logs'));
  };
}

/** Writes `error` as the one error body, `{"error":{"code","message","details"?}}`, with its status and headers. */
export function sendError(res: Response, error: AppError): void {
  for (const [k, v] of Object.entries(error.headers ?? {})) res.setHeader(k, v);
  res.status(error.status).json(error.toBody());
}

export function notFound(req: Request, res: Response): void {
  sendError(res, new AppError('NOT_FOUND', `No route for ${req.method} ${req.path}`));
}
