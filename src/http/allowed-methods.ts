import type { Express, NextFunction, Request, Response } from 'express';
import { AppError } from '../errors.js';
import { sendError } from './errors.js';

/** The parts of express's router this reads: its layers, their routes and mounted routers. */
interface Layer {
  route?: { methods: Record<string, boolean> };
  handle?: { stack?: Layer[]; router?: { stack?: Layer[] } };
  match(path: string): { path: string } | false;
}

/**
 * The methods the routes at `path` take, read from the router itself: every route that
 * matches, in the app and in the routers mounted in it (REST, GraphQL, probes, portal, Bull
 * Board), so no list is kept by hand. HEAD goes with GET (express answers it from the GET
 * route), OPTIONS with any known path. Empty when no route matches; `undefined` when a route
 * takes every method (`router.all`) and so answers the others itself.
 */
function allowedMethods(stack: Layer[], path: string): Set<string> | undefined {
  const methods = new Set<string>();
  for (const layer of stack) {
    let matched: { path: string } | false;
    try {
      matched = layer.match(path);
    } catch {
      // A parameter that cannot be percent-decoded: the router refuses it before any route.
      continue;
    }
    if (!matched) continue;
    if (layer.route) {
      if (layer.route.methods._all) return undefined;
      for (const [m, on] of Object.entries(layer.route.methods)) if (on) methods.add(m.toUpperCase());
      continue;
    }
    const inner = layer.handle?.stack ?? layer.handle?.router?.stack;
    if (!inner) continue;
    const nested = allowedMethods(inner, path.slice(matched.path.length) || '/');
    if (nested === undefined) return undefined;
    for (const m of nested) methods.add(m);
  }
  if (methods.has('GET')) methods.add('HEAD');
  if (methods.size) methods.add('OPTIONS');
  return methods;
}

const allowHeader = (methods: Set<string>) => [...methods].sort().join(', ');
const stackOf = (app: Express) => (app as unknown as { router: { stack: Layer[] } }).router.stack;

/**
 * OPTIONS on a known path: 204 with `Allow`, the same list a 405 names. Mounted before the
 * routers, which would otherwise each answer with only their own routes' methods as text.
 * No CORS headers: the API is called by servers and by pages of its own origin.
 */
export function answerOptions(app: Express) {
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'OPTIONS') return next();
    const methods = allowedMethods(stackOf(app), req.path);
    if (!methods?.size) return next();
    res.setHeader('Allow', allowHeader(methods));
    res.status(204).end();
  };
}

/** After every route: a path some route takes, asked with a method none takes, is 405 with `Allow`. */
export function methodNotAllowed(app: Express) {
  return (req: Request, res: Response, next: NextFunction) => {
    const methods = allowedMethods(stackOf(app), req.path);
    if (!methods?.size) return next();
    const allow = allowHeader(methods);
    sendError(
      res,
      new AppError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${req.path}; allowed: ${allow}`, undefined, {
        headers: { Allow: allow },
      }),
    );
  };
}
