import { FormData } from 'undici';
import type { OutboundFile } from './types.js';

/** A file's bytes as a Blob for a multipart upload, without copying them. */
function blobOf(file: OutboundFile): Blob {
  return new Blob([file.data as unknown as ArrayBuffer], { type: file.mimeType });
}

/** Multipart form data from plain fields and files (`[field, file]`). */
export function multipartOf(fields: Record<string, string>, files: [string, OutboundFile][] = []): FormData {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.set(k, v);
  for (const [field, file] of files) form.append(field, blobOf(file), file.filename);
  return form;
}
