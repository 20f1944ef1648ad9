import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  a = await s.createApp();
  b = await s.createApp();
});
afterAll(() => s.close());

async function upload(auth: AppCredentials, parts: [string, Blob | string, string?][]) {
  const form = new FormData();
  for (const [field, value, name] of parts) typeof value === 'string' ? form.set(field, value) : form.set(field, value, name);
  const r = await apiFetch(`${s.base}/v1/files`, { method: 'POST', headers: auth.headers, body: form });
  return { status: r.status, json: (await r.json()) as any };
}
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

describe('files (Postgres storage)', () => {
  it('stores an upload with the type sniffed from its content, and serves metadata and bytes', async () => {
    const up = await upload(a, [['file', new Blob([new Uint8Array(PNG)], { type: 'text/plain' }), 'dot.txt']]);
    expect(up.status).toBe(201);
    expect(up.json).toEqual({
      id: expect.any(String),
      filename: 'dot.txt',
      mime_type: 'image/png',
      size_bytes: PNG.length,
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      created_at: expect.any(String),
    });
    const meta = await s.request('GET', `/v1/files/${up.json.id}`, { auth: a });
    expect(meta.json).toEqual(up.json);
    const content = await apiFetch(`${s.base}/v1/files/${up.json.id}/content`, { headers: a.headers });
    expect(content.status).toBe(200);
    expect(content.headers.get('content-type')).toBe('image/png');
    expect(content.headers.get('x-content-type-options')).toBe('nosniff');
    expect(Buffer.from(await content.arrayBuffer())).toEqual(PNG);
  });

  it('keeps the declared type when the content is not recognisable, and hides files from other applications', async () => {
    const up = await upload(a, [['file', new Blob(['a,b\n1,2\n'], { type: 'text/csv' }), 'x.csv']]);
    expect(up.json.mime_type).toBe('text/csv');
    expect((await s.request('GET', `/v1/files/${up.json.id}`, { auth: b })).status).toBe(404);
    expect((await apiFetch(`${s.base}/v1/files/${up.json.id}/content`, { headers: b.headers })).status).toBe(404);
    expect((await s.request('GET', '/v1/files/not-a-uuid', { auth: a })).status).toBe(404);
  });

  it('refuses a body that is not multipart (415), a missing file field (400), more than 50 MB (413)', async () => {
    const json = await s.request('POST', '/v1/files', { auth: a, body: { file: 'x' } });
    expect(json.status).toBe(415);
    expect(json.json.error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const missing = await upload(a, [['note', 'no file here']]);
    expect(missing.status).toBe(400);
    expect(missing.json.error.details[0].path).toEqual(['file']);
    const big = await upload(a, [['file', new Blob([new Uint8Array(50 * 1024 * 1024 + 1)]), 'big.bin']]);
    expect(big.status).toBe(413);
    expect(big.json.error.code).toBe('PAYLOAD_TOO_LARGE');
    const [{ n }] = await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM files WHERE filename = 'big.bin'`;
    expect(n).toBe(0);
  });

  it('keeps a UTF-8 file name, stored as sent and in the download’s Content-Disposition (RFC 6266)', async () => {
    const up = await upload(a, [['file', new Blob(['bonjour'], { type: 'text/plain' }), 'résumé.txt']]);
    expect(up.status).toBe(201);
    expect(up.json.filename).toBe('résumé.txt');
    const [row] = await s.deps.sql<{ filename: string }[]>`SELECT filename FROM files WHERE id = ${up.json.id}`;
    expect(row.filename).toBe('résumé.txt');
    const content = await apiFetch(`${s.base}/v1/files/${up.json.id}/content`, { headers: a.headers });
    // An ASCII fallback for old clients, then the exact name percent-encoded as UTF-8.
    expect(content.headers.get('content-disposition')).toBe(`attachment; filename="r?sum?.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt`);
    expect(content.headers.get('content-type')).toBe('text/plain');
  });

  it('needs events:write to upload and events:read to read', async () => {
    const reader = await s.createKey(a.appId, ['events:read']);
    expect((await upload(reader, [['file', new Blob(['x']), 'x.txt']])).status).toBe(403);
    const writer = await s.createKey(a.appId, ['events:write']);
    const up = await upload(writer, [['file', new Blob(['x']), 'x.txt']]);
    expect(up.status).toBe(201);
    expect((await s.request('GET', `/v1/files/${up.json.id}`, { auth: writer })).status).toBe(403);
  });
});
