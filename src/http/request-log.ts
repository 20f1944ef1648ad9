import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Deps } from '../deps.js';
import type { Logger } from '../logger.js';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,100}$/;

/**
 * A request URL fit for the log: no query string, and no path segment that is a credential —
 * an inbound webhook URL's secret, a link code being activated (still valid when the attempt
 * was throttled).
 */
export function loggableUrl(url: string): string {
  return url
    .split('?')[0]
    .replace(/^(\/webhooks\/[^/]+\/)[^/]+/, '$1[redacted]')
    .replace(/^(\/v1\/link-codes\/)[^/]+/, '$1[redacted]');
}

/**
 * Gives every request an id (the client's X-Request-Id when well-formed), answers it in
 * X-Request-Id, binds it to every line logged through `req.log`, logs the outcome (errors at
 * `error`, refusals and clients that disconnected at `info`, the rest at `debug`) and records the request duration metric.
 * The request's logger is only built when something logs through it, and the outcome line only
 * when its level is enabled: most requests log nothing, and cost nothing for it.
 * Bodies can carry secrets or personal data and are never logged; nor are the query string
 * and credential path segments (loggableUrl).
 */
export function requestLog(deps: Deps) {
  const { logger, metrics } = deps;
  return (req: Request, res: Response, next: NextFunction) => {
    const started = performance.now();
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    res.setHeader('X-Request-Id', id);
    let log: Logger | undefined;
    const reqLog = () => (log ??= logger.child({ req: { id, method: req.method, url: loggableUrl(String(req.originalUrl ?? req.url)) } }));
    Object.defineProperty(req, 'id', { value: id, configurable: true, writable: true });
    Object.defineProperty(req, 'log', { get: reqLog, configurable: true });
    const end = metrics.httpDuration.startTimer();
    const done = (aborted: boolean) => {
      const route = req.route ? `${req.baseUrl}${(req.route as { path: string }).path}` : 'unmatched';
      end({ method: req.method, route, status: String(res.statusCode) });
      // A client going away (closing a stream, giving up on a slow answer) is its choice, not a
      // fault of ours: info, like a refusal. A fault that cut a response was logged where it happened.
      const level = res.statusCode >= 500 ? 'error' : aborted || res.statusCode >= 400 ? 'info' : 'debug';
      if (!logger.isLevelEnabled(level)) return;
      const responseTime = Math.round(performance.now() - started);
      reqLog()[level]({ res: { statusCode: res.statusCode }, responseTime }, aborted ? 'request aborted' : 'request completed');
    };
    res.once('finish', () => done(false));
    res.once('close', () => {
      if (!res.writableFinished) done(true);
    });
    next();
  };
}
