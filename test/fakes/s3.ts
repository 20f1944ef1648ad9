import { FakeServer, type FakeReply, type RecordedRequest } from './fake-server.js';

/**
 * An S3-compatible object store on loopback (path-style `/{bucket}/{key}`): PUT, GET, HEAD
 * and DELETE of objects, S3's XML errors, and the aws-chunked body encoding the AWS SDK may use.
 * Requests must be SigV4-signed with `accessKeyId` (the signature itself is not checked).
 */
export class S3Fake {
  readonly server: FakeServer;
  /** `${bucket}/${key}` → object. */
  readonly objects = new Map<string, { data: Buffer; contentType?: string }>();

  private constructor(
    readonly bucket: string,
    readonly accessKeyId: string,
  ) {
    this.server = new FakeServer((r) => this.handle(r));
  }

  static async start(bucket = 'gateway-files', accessKeyId = 'AKIAFAKEFAKEFAKE'): Promise<S3Fake> {
    const fake = new S3Fake(bucket, accessKeyId);
    await fake.server.listen();
    return fake;
  }

  get url(): string {
    return this.server.url;
  }

  close(): Promise<void> {
    return this.server.close();
  }

  private handle(r: RecordedRequest): FakeReply {
    const auth = r.headers.authorization ?? '';
    if (!auth.startsWith('AWS4-HMAC-SHA256 ') || !auth.includes(`Credential=${this.accessKeyId}/`))
      return s3Error(403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
    const [, bucket, ...rest] = r.path.split('/');
    const key = decodeURIComponent(rest.join('/'));
    if (bucket !== this.bucket) return s3Error(404, 'NoSuchBucket', 'The specified bucket does not exist');
    if (!key) return s3Error(400, 'InvalidRequest', 'Bucket operations are not supported by this fake');
    const id = `${bucket}/${key}`;
    if (r.method === 'PUT') {
      const chunked =
        /aws-chunked/.test(r.headers['content-encoding'] ?? '') || /^STREAMING-/.test(r.headers['x-amz-content-sha256'] ?? '');
      this.objects.set(id, { data: chunked ? decodeAwsChunked(r.rawBody) : r.rawBody, contentType: r.headers['content-type'] });
      return { status: 200, body: '', headers: { etag: '"fake"' } };
    }
    if (r.method === 'DELETE') {
      this.objects.delete(id);
      return { status: 204, body: '' };
    }
    const obj = this.objects.get(id);
    if (!obj) return s3Error(404, 'NoSuchKey', 'The specified key does not exist.');
    if (r.method === 'HEAD') return { status: 200, headers: { 'content-length': String(obj.data.length) } };
    if (r.method === 'GET')
      return { status: 200, body: obj.data, headers: { 'content-type': obj.contentType ?? 'application/octet-stream', etag: '"fake"' } };
    return s3Error(405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.');
  }
}

function s3Error(status: number, code: string, message: string): FakeReply {
  return {
    status,
    body: `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message><RequestId>fake</RequestId></Error>`,
    headers: { 'content-type': 'application/xml' },
  };
}

/** `<hex size>[;ext]\r\n<data>\r\n … 0\r\n[trailers]\r\n` → the data. */
function decodeAwsChunked(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let pos = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', pos);
    if (eol < 0) break;
    const size = parseInt(body.subarray(pos, eol).toString().split(';')[0], 16);
    if (!size) break;
    parts.push(body.subarray(eol + 2, eol + 2 + size));
    pos = eol + 2 + size + 2;
  }
  return Buffer.concat(parts);
}
