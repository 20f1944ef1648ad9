import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

let s: TestStack;
let a: AppCredentials;

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  a = await s.createApp();
});
afterAll(() => s?.close());

const BOUNDARY = 'sec-boundary-7f3a';

/** A multipart body written by hand: FormData would refuse or re-encode the hostile names. */
function multipart(disposition: Buffer | string): Buffer {
  return Buffer.concat([
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; `),
    Buffer.isBuffer(disposition) ? disposition : Buffer.from(disposition),
    Buffer.from(`\r\nContent-Type: text/plain\r\n\r\nhello\r\n--${BOUNDARY}--\r\n`),
  ]);
}

async function upload(body: Buffer) {
  const r = await apiFetch(`${s.base}/v1/files`, {
    method: 'POST',
    headers: { ...a.headers, 'Content-Type': `multipart/form-data; boundary=${BOUNDARY}` },
    body: new Uint8Array(body),
  });
  return { status: r.status, json: (await r.json()) as any };
}

const fileCount = async () => (await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM files WHERE app_id = ${a.appId}`)[0].n;

describe('multipart file names PostgreSQL cannot store are a 400, not a 500', () => {
  it.each([
    ['NUL in an RFC 5987 filename*', "filename*=UTF-8''a%00b.txt"],
    ['a raw NUL byte in filename', Buffer.from('filename="a\u0000b.txt"', 'latin1')],
    ['an unpaired surrogate in a UTF-16 filename*', "filename*=utf-16le''%00%D8.%00t%00x%00t%00"],
  ])('refuses %s with VALIDATION_ERROR and stores nothing', async (_name, disposition) => {
    const before = await fileCount();
    const r = await upload(multipart(disposition));
    expect(r.status, JSON.stringify(r.json)).toBe(400);
    expect(r.json.error.code).toBe('VALIDATION_ERROR');
    expect(await fileCount()).toBe(before);
  });

  it('still stores an ordinary RFC 5987 name', async () => {
    const r = await upload(multipart("filename*=UTF-8''r%C3%A9sum%C3%A9.txt"));
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    expect(r.json.filename).toBe('résumé.txt');
  });
});
