import { createHash, randomUUID } from 'node:crypto';
import { fileTypeFromBuffer } from 'file-type';
import type { Sql } from '../db.js';
import { deleteInBatches } from '../retention/batched-delete.js';
import type { BlobStore } from './storage.js';

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
 * Stores a file's bytes (in Postgres, or in `store` when one is configured) with its sniffed
 * type: the content decides the mime type when it is recognisable, the client's declared
 * type only when it is not. With a store, the object is written before its row, so a row
 * never names an object that is not there.
 */
export async function storeFile(
  sql: Sql,
  appId: string,
  f: { filename?: string | null; declaredMime?: string | null; data: Buffer; source?: Record<string, unknown> },
  store?: BlobStore,
): Promise<FileMeta> {
  const sniffed = await fileTypeFromBuffer(f.data).catch(() => undefined);
  const mime =
    sniffed?.mime ?? (f.declaredMime && /^[\w.+-]+\/[\w.+-]+$/.test(f.declaredMime) ? f.declaredMime : 'application/octet-stream');
  const sha256 = createHash('sha256').update(f.data).digest('hex');
  const id = randomUUID();
  const key = store ? `${appId}/${id}` : null;
  if (store) await store.put(key!, f.data, mime);
  const [row] = await sql<FileMeta[]>`
    INSERT INTO files (id, app_id, filename, mime_type, size_bytes, sha256, storage, storage_key, data, source)
    VALUES (${id}, ${appId}, ${f.filename ?? null}, ${mime}, ${f.data.length}, ${sha256}, ${store ? store.kind : 'postgres'}, ${key},
            ${store ? null : f.data}, ${f.source ? sql.json(f.source as never) : null})
    RETURNING id, filename, mime_type, size_bytes, sha256, created_at`;
  return row;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function getFileMeta(sql: Sql, appId: string, id: string): Promise<FileMeta | undefined> {
  if (!UUID.test(id)) return undefined;
  const [row] = await sql<
    FileMeta[]
  >`SELECT id, filename, mime_type, size_bytes, sha256, created_at FROM files WHERE app_id = ${appId} AND id = ${id}`;
  return row;
}

export async function getFileContent(
  sql: Sql,
  appId: string,
  id: string,
  store?: BlobStore,
): Promise<(FileMeta & { data: Buffer }) | undefined> {
  if (!UUID.test(id)) return undefined;
  return (await readFiles(sql, appId, [id], store))[0];
}

/**
 * Several files with their bytes, in the order asked, from wherever each was stored (a file
 * kept in S3 needs the store; one that cannot be read is left out).
 */
export async function readFiles(sql: Sql, appId: string, ids: string[], store?: BlobStore): Promise<(FileMeta & { data: Buffer })[]> {
  const valid = ids.filter((id) => UUID.test(id));
  if (valid.length === 0) return [];
  const rows = await sql<(FileMeta & { data: Buffer | null; storage: string; storage_key: string | null })[]>`
    SELECT id, filename, mime_type, size_bytes, sha256, created_at, data, storage, storage_key FROM files WHERE app_id = ${appId} AND id = ANY(${valid}::uuid[])`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  const out: (FileMeta & { data: Buffer })[] = [];
  for (const id of valid) {
    const row = byId.get(id);
    if (!row) continue;
    const { storage, storage_key: key, data, ...meta } = row;
    if (data) out.push({ ...meta, data });
    else if (storage === 's3' && key) {
      if (!store) throw new Error(`file ${id} is stored in S3 but FILE_STORAGE is not s3`);
      out.push({ ...meta, data: await store.get(key) });
    }
  }
  return out;
}

export const toRestFile = (f: FileMeta) => ({
  id: f.id,
  filename: f.filename,
  mime_type: f.mime_type,
  size_bytes: Number(f.size_bytes),
  sha256: f.sha256,
  created_at: f.created_at.toISOString(),
});

/** Files one pruning round handles: each may cost an object-store call. */
const FILE_PRUNE_BATCH = 500;

/**
 * Deletes files older than `days` (FILE_RETENTION_DAYS, 0 = never) with their bytes, in
 * bounded chunks. A file a queued or sending message still carries is kept until that message
 * settles. Objects in S3 are removed before their rows: a crash in between leaves a row whose
 * object is gone (read as missing, deleted again next round), never an object no row names.
 * Without the store (FILE_STORAGE no longer s3) S3-kept files are left for a run that has it.
 */
export async function pruneFiles(sql: Sql, days: number, store?: BlobStore): Promise<number> {
  if (days === 0) return 0;
  return deleteInBatches(async (limit) => {
    const rows = await sql<{ app_id: string; id: string; storage: string; storage_key: string | null }[]>`
      SELECT f.app_id, f.id, f.storage, f.storage_key FROM files f
       WHERE f.created_at < now() - ${days} * interval '1 day'
         AND (f.storage <> 's3' OR ${store !== undefined})
         AND NOT EXISTS (SELECT 1 FROM outbound_messages m WHERE m.app_id = f.app_id AND m.finished_at IS NULL AND f.id = ANY(m.file_ids))
       LIMIT ${limit}`;
    for (const r of rows) if (r.storage === 's3' && r.storage_key) await store!.delete(r.storage_key);
    if (rows.length === 0) return 0;
    return (
      await sql`DELETE FROM files WHERE (app_id, id) IN (SELECT * FROM unnest(${rows.map((r) => r.app_id)}::uuid[], ${rows.map((r) => r.id)}::uuid[]))`
    ).count;
  }, FILE_PRUNE_BATCH);
}
