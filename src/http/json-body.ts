import express, { type Request, type RequestHandler } from 'express';
import { AppError } from '../errors.js';

/** The media types a JSON endpoint takes (type-is patterns, as `req.is` and the parser match them). */
export const JSON_TYPES = ['application/json', 'application/*+json'];

const kindOf = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'an array' : `a ${typeof v}`);

/**
 * The JSON body parser of the API and GraphQL endpoints. It takes any JSON value (`strict:
 * false`) so that `null`, `"x"` or `[]` are answered as what they are — valid JSON that is not
 * an object, a VALIDATION_ERROR — rather than as "not valid JSON". Every body these endpoints
 * take is an object.
 */
export function jsonBody(limit: number): RequestHandler[] {
  return [
    express.json({
      limit,
      type: JSON_TYPES,
      strict: false,
      // Raw bytes kept beside the parsed body: signatures and idempotency hashes are over them.
      verify: (req, _res, buf) => {
        (req as Request & { rawBody?: Buffer }).rawBody = buf;
      },
    }),
    (req, _res, next) => {
      const parsed = (req as Request & { rawBody?: Buffer }).rawBody !== undefined;
      const body: unknown = req.body;
      if (!parsed || (typeof body === 'object' && body !== null && !Array.isArray(body))) return next();
      next(
        new AppError('VALIDATION_ERROR', `The request body must be a JSON object, not ${kindOf(body)}`, [
          { path: [], message: 'must be a JSON object' },
        ]),
      );
    },
  ];
}
