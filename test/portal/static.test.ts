import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let root: string;
let dist: string;
const INDEX = '<!doctype html><title>portal</title><script type="module" src="/portal/assets/index-abc123.js"></script>';
const SCRIPT = `console.log(${JSON.stringify('x'.repeat(2000))});`;

beforeAll(async () => {
  // A stand-in for the portal's build output (portal/ builds the real one).
  root = mkdtempSync(join(tmpdir(), 'portal-dist-'));
  dist = join(root, 'dist');
  mkdirSync(join(dist, 'assets'), { recursive: true });
  writeFileSync(join(dist, 'index.html'), INDEX);
  writeFileSync(join(dist, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  writeFileSync(join(dist, 'assets', 'index-abc123.js'), SCRIPT);
  writeFileSync(join(dist, 'assets', 'index-abc123.js.br'), brotliCompressSync(SCRIPT));
  writeFileSync(join(dist, 'assets', 'index-abc123.js.gz'), gzipSync(SCRIPT));
  writeFileSync(join(dist, 'assets', 'style-def456.css'), 'body{margin:0}');
  s = await startTestStack({ workers: false, env: { PORTAL_DIST_DIR: dist } });
});
afterAll(async () => {
  await s.close();
  rmSync(root, { recursive: true, force: true });
});

const get = (path: string, headers: Record<string, string> = {}) => fetch(s.base + path, { headers });

describe('serving the portal at /portal', () => {
  it('answers index.html for /portal and every client-side route, revalidated each time, under a strict CSP', async () => {
    for (const path of ['/portal', '/portal/', '/portal/signin', '/portal/webhooks/abc/deliveries']) {
      const r = await get(path);
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/html/);
      expect(r.headers.get('cache-control')).toBe('no-cache');
      expect(await r.text()).toBe(INDEX);
      const csp = r.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("connect-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    }
  });

  it('caches hashed assets for a year as immutable, and sends the precompressed file the client accepts', async () => {
    const br = await get('/portal/assets/index-abc123.js', { 'Accept-Encoding': 'gzip, br' });
    expect(br.status).toBe(200);
    expect(br.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(br.headers.get('content-type')).toMatch(/javascript/);
    expect(br.headers.get('content-encoding')).toBe('br');
    expect(br.headers.get('vary')).toMatch(/Accept-Encoding/);
    expect(await br.text()).toBe(SCRIPT);

    const gz = await get('/portal/assets/index-abc123.js', { 'Accept-Encoding': 'gzip' });
    expect(gz.headers.get('content-encoding')).toBe('gzip');
    expect(await gz.text()).toBe(SCRIPT);

    const plain = await get('/portal/assets/index-abc123.js', { 'Accept-Encoding': 'identity' });
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(await plain.text()).toBe(SCRIPT);

    const css = await get('/portal/assets/style-def456.css');
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
    expect(css.headers.get('content-encoding')).toBeNull();

    const other = await get('/portal/favicon.svg');
    expect(other.headers.get('cache-control')).toBe('no-cache');
    expect(other.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
  });

  it('answers a missing asset or a path outside the build with a JSON 404, never the app', async () => {
    for (const path of ['/portal/assets/missing-000.js', '/portal/%2e%2e/%2e%2e/package.json', '/portal/..%2fpackage.json']) {
      const r = await get(path);
      expect(r.status, path).toBe(404);
      expect((await r.json()).error.code).toBe('NOT_FOUND');
    }
  });

  it('answers malformed percent-encoding with the 400 every route gives it', async () => {
    const r = await get('/portal/%ZZ');
    expect(r.status).toBe(400);
    expect((await r.json()).error.code).toBe('VALIDATION_ERROR');
  });

  it('keeps the session exchange and the API ahead of the app', async () => {
    const r = await get('/portal/session');
    expect(r.status).toBe(401);
    expect((await r.json()).error.code).toBe('UNAUTHORIZED');
  });

  it('the CLI prints a sign-in URL whose page loads and whose token signs in', async () => {
    const { appId } = await s.createApp();
    const r = await runCli(s.env, ['portal', 'open', '--app', appId, '--areas', 'webhooks']);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim());
    expect(out.url.startsWith(`${s.config.PUBLIC_BASE_URL}/portal/signin#token=`)).toBe(true);
    const url = new URL(out.url);
    const page = await get(url.pathname);
    expect(await page.text()).toBe(INDEX);
    const signIn = await s.request('POST', '/portal/session', { body: { token: url.hash.slice('#token='.length) } });
    expect(signIn.status).toBe(200);
    expect(signIn.json).toMatchObject({ application_id: appId, areas: ['webhooks'] });

    const bad = await runCli(s.env, ['portal', 'open', '--app', appId, '--areas', 'everything']);
    expect(bad.code).not.toBe(0);
    expect(bad.stdout).toBe('');
    const revoke = await runCli(s.env, ['portal', 'revoke', '--app', appId]);
    expect(JSON.parse(revoke.stdout.trim())).toEqual({ app_id: appId, revoked: 1 });
    const cookie = (signIn.headers.get('set-cookie') ?? '').split(';')[0];
    expect((await s.request('GET', '/portal/session', { headers: { Cookie: cookie } })).status).toBe(401);
  });

  it('says the portal is not built when its folder is missing', async () => {
    renameSync(dist, `${dist}-away`);
    try {
      const r = await get('/portal/signin');
      expect(r.status).toBe(503);
      expect((await r.json()).error.message).toMatch(/not built/);
    } finally {
      renameSync(`${dist}-away`, dist);
    }
  });
});
