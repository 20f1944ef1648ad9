import multer from 'multer';
import { z } from 'zod';
import { AppError } from '../errors.js';
import { getFileContent, getFileMeta, MAX_FILE_BYTES, storeFile, toRestFile } from '../files/files.js';
import { unstorableError } from '../storable-text.js';
import type { Api } from './api.js';
import type { RouteContext } from './routes.js';

const fileOut = z.object({
  id: z.string(),
  filename: z.string().nullable(),
  mime_type: z.string().nullable(),
  size_bytes: z.number(),
  sha256: z.string().nullable(),
  created_at: z.string(),
});
const idParams = z.object({ id: z.string() });
// Busboy reads a plain `filename="…"` as latin1 by default, turning `résumé.txt` into
// `rÃ©sumÃ©.txt`; clients (browsers, undici, curl) send it as UTF-8.
const upload = multer({
  storage: multer.memoryStorage(),
  limits: { fileSize: MAX_FILE_BYTES, files: 1, fields: 5 },
  defParamCharset: 'utf8',
});

export function registerFileRoutes(api: Api, { web }: RouteContext): void {
  api.route({
    method: 'post',
    path: '/v1/files',
    operationId: 'uploadFile',
    description:
      "Stores a file to attach to messages by its id. Its media type is detected from its bytes, not taken from the upload's headers.",
    summary: 'Upload a file (multipart/form-data, field "file", at most 50 MB); its type is sniffed from the content',
    scope: 'events:write',
    multipart: true,
    requestContent: {
      'multipart/form-data': {
        schema: {
          type: 'object',
          required: ['file'],
          properties: { file: { type: 'string', contentMediaType: 'application/octet-stream', description: 'The file; its name is kept' } },
        },
      },
    },
    responses: { 201: { description: 'The stored file', schema: fileOut } },
    errors: ['VALIDATION_ERROR', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE'],
    async handler({ deps, principal, req, res }) {
      if (!req.is('multipart/form-data'))
        throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Upload files as multipart/form-data with a "file" field');
      await new Promise<void>((resolve, reject) =>
        upload.single('file')(req, res, (err?: unknown) => {
          if (!err) return resolve();
          const code = (err as { code?: string }).code;
          if (code === 'LIMIT_FILE_SIZE')
            return reject(new AppError('PAYLOAD_TOO_LARGE', `Files are limited to ${MAX_FILE_BYTES / 1024 / 1024} MB`));
          if (typeof code === 'string' && code.startsWith('LIMIT_'))
            return reject(new AppError('VALIDATION_ERROR', (err as Error).message, [{ path: ['file'], message: (err as Error).message }]));
          reject(new AppError('VALIDATION_ERROR', 'Malformed multipart body', [{ path: ['file'], message: 'malformed multipart body' }]));
        }),
      );
      const file = req.file;
      const unknown = Object.keys((req.body ?? {}) as object).map((field) => ({ path: [field], message: 'unknown field' }));
      if (!file || unknown.length)
        throw new AppError('VALIDATION_ERROR', file ? 'The upload takes only the "file" field' : 'Missing "file" field', [
          ...(file ? [] : [{ path: ['file'], message: 'required' }]),
          ...unknown,
        ]);
      // Busboy decodes `filename*` (RFC 5987) in any charset, so a name can carry NUL or a lone
      // surrogate that the JSON-body check never saw and the insert would fail on.
      const unstorable = unstorableError(
        { filename: file.originalname, mime_type: file.mimetype, fields: req.body },
        ['file'],
        deps.config.JSON_MAX_DEPTH,
      );
      if (unstorable) throw unstorable;
      const meta = await storeFile(
        deps.sql,
        principal.appId,
        { filename: file.originalname, declaredMime: file.mimetype, data: file.buffer },
        web.files,
      );
      return { status: 201, body: toRestFile(meta) };
    },
  });
  api.route({
    method: 'get',
    path: '/v1/files/:id',
    operationId: 'getFile',
    description: "A file's metadata: name, media type, size and where it came from (uploaded, or received from a platform).",
    summary: 'File metadata',
    scope: 'events:read',
    params: idParams,
    responses: { 200: { description: 'Metadata', schema: fileOut } },
    errors: ['NOT_FOUND'],
    async handler({ deps, principal, params }) {
      const meta = await getFileMeta(deps.sql, principal.appId, params.id);
      if (!meta) throw new AppError('NOT_FOUND', `No file ${params.id}`);
      return { status: 200, body: toRestFile(meta) };
    },
  });
  api.route({
    method: 'get',
    path: '/v1/files/:id/content',
    operationId: 'downloadFile',
    description: "A file's bytes, with its media type, as uploaded or as the platform sent it.",
    summary: 'File bytes',
    scope: 'events:read',
    params: idParams,
    responses: {
      200: {
        description: 'The bytes; Content-Type is the type sniffed from them (application/octet-stream when unknown)',
        mediaType: 'application/octet-stream',
        mediaSchema: { type: 'string', contentMediaType: 'application/octet-stream' },
      },
    },
    errors: ['NOT_FOUND'],
    async handler({ deps, principal, params, res }) {
      const f = await getFileContent(deps.sql, principal.appId, params.id, web.files);
      if (!f) throw new AppError('NOT_FOUND', `No file ${params.id}`);
      // RFC 6266: `filename*` in UTF-8 plus an ASCII `filename` fallback. attachment() also sets
      // a Content-Type from the extension, so the sniffed type is set after it.
      res.attachment(f.filename ?? f.id);
      res.setHeader('Content-Type', f.mime_type ?? 'application/octet-stream');
      res.setHeader('Content-Length', String(f.data.length));
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.status(200).end(f.data);
      return undefined;
    },
  });
}
