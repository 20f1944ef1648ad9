import { mediaFromUrl } from '../media-url.js';
import type { DownloadedMedia, InboundMedia, MediaFetch } from '../types.js';

const REAL_BASE = 'https://api.telegram.org';

/** getFile turns the update's file_id into a path, then the file is fetched from under the token. */
export async function telegramMedia(config: Record<string, unknown>, media: InboundMedia, fetch: MediaFetch): Promise<DownloadedMedia> {
  if (!media.platformFileId) return mediaFromUrl(media, fetch);
  const base = String(config.api_base_url ?? REAL_BASE).replace(/\/$/, '');
  const token = String(config.bot_token);
  const meta = await fetch.json(`${base}/bot${token}/getFile?file_id=${encodeURIComponent(media.platformFileId)}`);
  const body = meta.body as { ok?: boolean; result?: { file_path?: string } };
  if (!body.ok || !body.result?.file_path) throw new Error('telegram getFile failed');
  const { data, contentType } = await fetch.bytes(`${base}/file/bot${token}/${body.result.file_path}`);
  return { data, mimeType: media.mimeType ?? contentType, filename: body.result.file_path.split('/').pop() };
}
