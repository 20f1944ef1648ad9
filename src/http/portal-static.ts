import { statSync } from 'node:fs';
import { extname, join, resolve, sep } from 'node:path';
import express, { type Request, type Response, type Router } from 'express';
import type { Deps } from '../deps.js';
import { AppError } from '../errors.js';
import { projectRoot } from '../project-root.js';
import { pageSecurityHeaders } from './page-security.js';

/**
 * Same origin only, and nothing inline: the portal loads no third-party host (it must work
 * offline) and a script injected into it could act with the session. Images may also come
 * from HTTPS hosts, for the logo an embedding application names in its theme.
 */
const SECURITY_HEADERS = pageSecurityHeaders(["style-src 'self'", "img-src 'self' data: https:", "font-src 'self'", "form-action 'self'"]);

/** Vite names the files under assets/ by their content hash: a changed file is a new name. */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/** Precompressed siblings the build may write beside a file, best first. */
const ENCODINGS = [
  { encoding: 'br', suffix: '.br' },
  { encoding: 'gzip', suffix: '.gz' },
] as const;

const isFile = (path: string) => statSync(path, { throwIfNoEntry: false })?.isFile() ?? false;

/**
 * The developer portal's single-page app, built into portal/dist (PORTAL_DIST_DIR), served at
 * /portal: hashed assets cached for good, every other path under /portal answered with
 * index.html (revalidated each time) so client-side routes load. A `.br` or `.gz` beside a
 * file is sent instead when the client accepts it. The API it talks to is mounted before this.
 */
export function portalStatic(deps: Deps): Router {
  const dir = resolve(deps.config.PORTAL_DIST_DIR ?? join(projectRoot(), 'portal', 'dist'));
  const router = express.Router();

  const send = (req: Request, res: Response, file: string, cacheControl: string) => {
    res.set(SECURITY_HEADERS);
    res.set('Cache-Control', cacheControl);
    res.vary('Accept-Encoding');
    res.type(extname(file));
    const pre = ENCODINGS.find((e) => req.acceptsEncodings(e.encoding) === e.encoding && isFile(file + e.suffix));
    if (pre) res.set('Content-Encoding', pre.encoding);
    res.sendFile(pre ? file + pre.suffix : file);
  };

  router.get(/^\/portal(\/.*)?$/, (req, res) => {
    const index = join(dir, 'index.html');
    if (!isFile(index)) {
      const err = new AppError('UNAVAILABLE', 'The developer portal is not built: portal/dist is missing; run npm run build');
      res.status(err.status).json(err.toBody());
      return;
    }
    // The router decoded the path already to match it (malformed percent-encoding is its 400), so this cannot throw.
    const rel = decodeURIComponent(req.path.slice('/portal'.length));
    const file = resolve(dir, `.${rel}`);
    const inside = file.startsWith(dir + sep);
    if (inside && isFile(file)) return send(req, res, file, rel.startsWith('/assets/') ? IMMUTABLE : 'no-cache');
    // A missing asset is a 404, not the app: a script tag must not receive HTML. So is a path out of the build.
    if (rel.startsWith('/assets/') || (!inside && rel !== '' && rel !== '/')) {
      res.status(404).json(new AppError('NOT_FOUND', `No portal file ${req.path}`).toBody());
      return;
    }
    send(req, res, index, 'no-cache');
  });
  return router;
}
