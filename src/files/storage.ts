import type { Config } from '../config.js';

/** Where file bytes go when they do not live in Postgres. */
export interface BlobStore {
  readonly kind: 's3';
  put(key: string, data: Buffer, contentType: string): Promise<void>;
  get(key: string): Promise<Buffer>;
  /** Removes an object; removing one that is not there succeeds (S3 semantics), so a retried prune is safe. */
  delete(key: string): Promise<void>;
}

/** An S3-compatible bucket through the official AWS SDK. */
export function createS3Store(
  config: Pick<Config, 'S3_BUCKET' | 'S3_REGION' | 'S3_ENDPOINT' | 'S3_ACCESS_KEY_ID' | 'S3_SECRET_ACCESS_KEY' | 'S3_FORCE_PATH_STYLE'>,
): BlobStore {
  // The SDK is large (0.3–0.7 s of start-up to import): only a process that stores in S3 loads it.
  const sdk = import('@aws-sdk/client-s3');
  const client = sdk.then(
    ({ S3Client }) =>
      new S3Client({
        region: config.S3_REGION,
        ...(config.S3_ENDPOINT ? { endpoint: config.S3_ENDPOINT } : {}),
        forcePathStyle: config.S3_FORCE_PATH_STYLE ?? Boolean(config.S3_ENDPOINT),
        ...(config.S3_ACCESS_KEY_ID && config.S3_SECRET_ACCESS_KEY
          ? { credentials: { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY } }
          : {}),
      }),
  );
  // A failed import surfaces at the first use, through `sdk`; not as an unhandled rejection here.
  client.catch(() => {});
  const Bucket = config.S3_BUCKET!;
  return {
    kind: 's3',
    async put(key, data, contentType) {
      const { PutObjectCommand } = await sdk;
      await (await client).send(
        new PutObjectCommand({ Bucket, Key: key, Body: data, ContentType: contentType, ContentLength: data.length }),
      );
    },
    async get(key) {
      const { GetObjectCommand } = await sdk;
      const out = await (await client).send(new GetObjectCommand({ Bucket, Key: key }));
      return Buffer.from(await out.Body!.transformToByteArray());
    },
    async delete(key) {
      const { DeleteObjectCommand } = await sdk;
      await (await client).send(new DeleteObjectCommand({ Bucket, Key: key }));
    },
  };
}

/** The configured store for file bytes (undefined means Postgres); built once per process. */
export function createFileStore(config: Config): BlobStore | undefined {
  return config.FILE_STORAGE === 's3' ? createS3Store(config) : undefined;
}
