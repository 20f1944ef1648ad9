import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { connect } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { S3Fake } from '../fakes/s3.js';
import { TelegramFake } from '../fakes/telegram.js';
import { apiFetch } from '../helpers/openapi-contract.js';

let s: TestStack;
let a: AppCredentials;
let s3: S3Fake;
let tg: TelegramFake;

beforeAll(async () => {
  s3 = await S3Fake.start('gw-files', 'AKIATESTKEY');
  tg = await TelegramFake.start();
  s = await startTestStack({
    workers: ['ledger', 'send'],
    env: {
      FILE_STORAGE: 's3',
      S3_BUCKET: 'gw-files',
      S3_ENDPOINT: s3.url,
      S3_ACCESS_KEY_ID: 'AKIATESTKEY',
      S3_SECRET_ACCESS_KEY: 'test-secret-key',
    },
  });
  a = await s.createApp();
});
afterAll(async () => {
  await s.close();
  await Promise.all([s3.close(), tg.close()]);
});

async function upload(name: string, type: string, data: Buffer) {
  const form = new FormData();
  form.set('file', new Blob([new Uint8Array(data)], { type }), name);
  const r = await apiFetch(`${s.base}/v1/files`, { method: 'POST', headers: a.headers, body: form });
  return { status: r.status, json: (await r.json()) as any };
}

describe('files in S3-compatible storage (FILE_STORAGE=s3)', () => {
  const pdf = Buffer.concat([Buffer.from('%PDF-1.4\n'), Buffer.alloc(3000, 7)]);

  it('stores the bytes in the bucket, not in Postgres, and serves them back with metadata', async () => {
    const up = await upload('report.pdf', 'application/octet-stream', pdf);
    expect(up.status).toBe(201);
    expect(up.json).toMatchObject({ filename: 'report.pdf', mime_type: 'application/pdf', size_bytes: pdf.length });
    expect(s3.objects.get(`gw-files/${a.appId}/${up.json.id}`)?.data).toEqual(pdf);
    const [row] = await s.deps.sql<
      { data: Buffer | null; storage: string; storage_key: string }[]
    >`SELECT data, storage, storage_key FROM files WHERE id = ${up.json.id}`;
    expect(row).toEqual({ data: null, storage: 's3', storage_key: `${a.appId}/${up.json.id}` });

    const meta = await s.request('GET', `/v1/files/${up.json.id}`, { auth: a });
    expect(meta.json).toMatchObject({ id: up.json.id, mime_type: 'application/pdf' });
    const content = await apiFetch(`${s.base}/v1/files/${up.json.id}/content`, { headers: a.headers });
    expect(content.headers.get('content-type')).toBe('application/pdf');
    expect(Buffer.from(await content.arrayBuffer())).toEqual(pdf);
  });

  it('sends a stored file to the platform from the bucket', async () => {
    const up = await upload('report.pdf', 'application/pdf', pdf);
    const conn = await connect(s, a, 'TELEGRAM', { bot_token: '123:s3-test', api_base_url: tg.url });
    const r = await s.request('POST', '/v1/messages', {
      auth: a,
      body: { platform_connection_id: conn.id, to_external_id: '77', message: 'the report', file_ids: [up.json.id] },
    });
    expect(r.status, r.text).toBe(201);
    const doc = tg.accepted.find((q) => q.path.endsWith('/sendDocument'))!;
    expect(doc.files?.[0]).toMatchObject({ field: 'document', filename: 'report.pdf', data: pdf });
  });

  it('needs S3_BUCKET when FILE_STORAGE=s3', () => {
    expect(() => parseConfig({ FILE_STORAGE: 's3' })).toThrow(/S3_BUCKET/);
    expect(parseConfig({}).FILE_STORAGE).toBe('postgres');
  });
});
