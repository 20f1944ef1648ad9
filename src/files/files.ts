import { createHash } from 'node:crypto';
import { fileTypeFromBuffer } from 'file-type';
import type { Sql } from '../db.js';

export const MAX_FILE_BYTES = 50 * 1024 * 1024;

export interface FileMeta {
  id: string;
  filename: string | null;
  mime_type: string | null;
  size_bytes: number;
  sha256: string | null;
  created_at: Date;
}

/**
 * Stores a file's bytes (in Postgres) with its sniffed type: the content decides the mime
 * type when it is recognisable, the client's declared type only when it is not.
 */
export async function storeFile(
  sql: Sql,
  appId: string,
  f: { filename?: string | null; declaredMime?: string | null; data: Buffer; source?: Record<string, unknown> },
): Promise<FileMeta> {
  const sniffed = await fileTypeFromBuffer(f.data).catch(() => undefined);
  const mime = sniffed?.mime ?? (f.declaredMime && /^[\w.+-]+\/[\w.+-]+$/.test(f.declaredMime) ? f.declaredMime : 'application/octet-stream');
  const sha256 = createHash('sha256').update(f.data).digest('hex');
  const [row] = await sql<FileMeta[]>`
    INSERT INTO files (app_id, filename, mime_type, size_bytes, sha256, storage, data, source)
    VALUES (${appId}, ${f.filename ?? null}, ${mime}, ${f.data.length}, ${sha256}, 'postgres', ${f.data}, ${f.source ? sql.json(f.source as never) : null})
    RETURNING id, filename, mime_type, size_bytes, sha256, created_at`;
  return row;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function getFileMeta(sql: Sql, appId: string, id: string): Promise<FileMeta | undefined> {
  if (!UUID.test(id)) return undefined;
  const [row] = await sql<FileMeta[]>`SELECT id, filename, mime_type, size_bytes, sha256, created_at FROM files WHERE app_id = ${appId} AND id = ${id}`;
  return row;
}

export async function getFileContent(sql: Sql, appId: string, id: string): Promise<(FileMeta & { data: Buffer }) | undefined> {
  if (!UUID.test(id)) return undefined;
  const [row] = await sql<(FileMeta & { data: Buffer | null })[]>`
    SELECT id, filename, mime_type, size_bytes, sha256, created_at, data FROM files WHERE app_id = ${appId} AND id = ${id}`;
  return row?.data ? { ...row, data: row.data } : undefined;
}

export const toRestFile = (f: FileMeta) => ({
  id: f.id,
  filename: f.filename,
  mime_type: f.mime_type,
  size_bytes: Number(f.size_bytes),
  sha256: f.sha256,
  created_at: f.created_at.toISOString(),
});
