import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import express, { type Request, type Response, type Router } from 'express';
import { getStaticFile } from 'ruru/static';
import { AppError } from '../errors.js';
import { pageSecurityHeaders } from './page-security.js';

/**
 * The two pages a person reads the API with, served by the service itself from packages
 * installed with it: `/docs` (Redoc over the live `/v1/openapi.json`) and `/graphql` opened in a
 * browser (Ruru, a bundled GraphiQL). Nothing is fetched from another host at run time.
 */

/**
 * Scripts from this origin only, as for the portal: our own start-up code is a file, never inline.
 * Styles may be inline because both viewers write their styles at run time (styled-components,
 * the Monaco editor), and a style cannot run code. Redoc runs its search index in a worker it
 * creates from a blob.
 */
const SECURITY_HEADERS = pageSecurityHeaders([
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "worker-src 'self' blob:",
  "form-action 'none'",
]);

/** Package files change only with an install: a day's caching, revalidated after. */
const ASSET_CACHE = 'public, max-age=86400';

const require = createRequire(import.meta.url);
const REDOC_BUNDLE = require.resolve('redoc/bundles/redoc.standalone.js');

/**
 * Redoc's menu footer always shows its maker's logo from their CDN (no option turns it off), which
 * the page's policy would block with a console error: the bundle is served with that one address
 * replaced by an empty image. test/portal/explorers.test.ts fails if a new version adds another.
 */
const REDOC_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';
const EMPTY_IMAGE = 'data:image/svg+xml,%3Csvg xmlns=%22http://www.w3.org/2000/svg%22/%3E';
let redocBundle: string | undefined;
const redocSource = () => {
  redocBundle ??= readFileSync(REDOC_BUNDLE, 'utf8').replaceAll(REDOC_LOGO, EMPTY_IMAGE);
  return redocBundle;
};

const page = (title: string, head: string, body: string) =>
  [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<title>${title}</title>`,
    head,
    '</head>',
    `<body>${body}</body>`,
    '</html>',
  ].join('\n');

const DOCS_HTML = page(
  'Messaging gateway — API reference',
  '<link rel="stylesheet" href="/docs/assets/docs.css">',
  '<div id="reference" data-spec-url="/v1/openapi.json">Loading the API reference…</div>\n' +
    '<script src="/docs/assets/redoc.standalone.js"></script>\n<script src="/docs/assets/docs.js"></script>',
);

const DOCS_CSS = 'body { margin: 0; }\n';

/** Redoc over the document the service serves, so the page always matches the running code. */
const DOCS_JS = `'use strict';
(function () {
  var root = document.getElementById('reference');
  window.Redoc.init(root.dataset.specUrl, {
    expandResponses: '200,201,202',
    pathInMiddlePanel: true,
    sortTagsAlphabetically: true,
    hideHostname: false,
    jsonSampleExpandLevel: 3
  }, root);
})();
`;

const GRAPHQL_HTML = page(
  'Messaging gateway — GraphQL explorer',
  '<link rel="stylesheet" href="/graphql/explorer/ruru.css">\n<link rel="stylesheet" href="/graphql/explorer-start.css">',
  '<div id="ruru-root"></div>\n<script type="module" src="/graphql/explorer-start.js"></script>',
);

const GRAPHQL_CSS = 'body { margin: 0; }\n#ruru-root { height: 100vh; }\n';

/**
 * Ruru with the key the person types: its Headers tab starts with the two headers every
 * request needs, and nothing is sent until a key is there (an unauthenticated request would
 * only answer 401). Monaco's workers are the bundled ones, from this origin.
 */
const GRAPHQL_JS = `const base = new URL('/graphql/explorer/', location.href);
globalThis.MonacoEnvironment = {
  getWorker(_, label) {
    const file = label === 'json' ? 'jsonWorker.js' : label === 'graphql' ? 'graphqlWorker.js' : 'editorWorker.js';
    return new Worker(new URL(file, base), { type: 'module' });
  },
};
const HINT = 'Type your API key in the Headers tab below ("Authorization": "Bearer <key>") and your application id ("X-Service-App-ID"), then run the query again.';
const keyOf = (headers) => {
  const entry = Object.entries(headers || {}).find(([name]) => name.toLowerCase() === 'authorization');
  return entry ? String(entry[1]).replace(/^Bearer\\s*/i, '').trim() : '';
};
async function fetcher(params, options) {
  const headers = (options && options.headers) || {};
  if (!keyOf(headers)) return { errors: [{ message: HINT }] };
  const res = await fetch('/graphql', {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json', Accept: 'application/graphql-response+json, application/json' },
    body: JSON.stringify(params),
  });
  return res.json();
}
const { React, createRoot, Ruru } = await import(new URL('ruru.js', base).href);
createRoot(document.getElementById('ruru-root')).render(
  React.createElement(Ruru, {
    endpoint: '/graphql',
    fetcher,
    initialHeaders: JSON.stringify({ Authorization: 'Bearer ', 'X-Service-App-ID': '' }, null, 2),
    defaultEditorToolsVisibility: 'headers',
    initialQuery: '# The latest events of your application\\n{\\n  events(first: 5) {\\n    edges { node { id eventType createdAt } }\\n  }\\n}\\n',
  }),
);
`;

function sendText(res: Response, type: string, body: string, cacheControl = 'no-cache') {
  res.set(SECURITY_HEADERS);
  res.set('Cache-Control', cacheControl);
  res.type(type).send(body);
}

/** `/docs`: the API reference. */
export function apiReference(): Router {
  const router = express.Router();
  router.get('/docs', (_req, res) => sendText(res, 'html', DOCS_HTML));
  router.get('/docs/assets/docs.js', (_req, res) => sendText(res, 'text/javascript', DOCS_JS));
  router.get('/docs/assets/docs.css', (_req, res) => sendText(res, 'text/css', DOCS_CSS));
  router.get('/docs/assets/redoc.standalone.js', (_req, res) => sendText(res, 'text/javascript', redocSource(), ASSET_CACHE));
  return router;
}

/**
 * A browser's GET of /graphql (it prefers text/html) gets the explorer; every other request
 * goes on to GraphQL over HTTP untouched, so API clients keep graphql-http's GET and POST.
 */
const wantsPage = (req: Request) => req.accepts(['application/graphql-response+json', 'application/json', 'text/html']) === 'text/html';

/** `/graphql` in a browser: the GraphQL explorer and its bundled files under /graphql/explorer/. */
export function graphqlExplorer(): Router {
  const router = express.Router();
  router.get('/graphql', (req, res, next) => (wantsPage(req) ? sendText(res, 'html', GRAPHQL_HTML) : next()));
  router.get('/graphql/explorer-start.js', (_req, res) => sendText(res, 'text/javascript', GRAPHQL_JS));
  router.get('/graphql/explorer-start.css', (_req, res) => sendText(res, 'text/css', GRAPHQL_CSS));
  router.get(/^\/graphql\/explorer\/[^/]+$/, async (req, res, next) => {
    try {
      const file = await getStaticFile({
        staticPath: '/graphql/explorer/',
        urlPath: req.path,
        acceptEncoding: req.get('accept-encoding'),
        // Source maps would hold tens of megabytes in memory for nobody.
        disallowDevAssets: true,
      });
      if (!file) {
        res.status(404).json(new AppError('NOT_FOUND', `No explorer file ${req.path}`).toBody());
        return;
      }
      res.set(SECURITY_HEADERS);
      res.set(file.headers);
      res.set('Cache-Control', ASSET_CACHE);
      res.vary('Accept-Encoding');
      res.send(file.content);
    } catch (err) {
      next(err);
    }
  });
  return router;
}
