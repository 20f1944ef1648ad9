import { GRAPH_BASE, GRAPH_VERSION } from '../meta-graph.js';
import { mediaFromUrl } from '../media-url.js';
import type { DownloadedMedia, InboundMedia, MediaFetch } from '../types.js';

/**
 * A media id is looked up for a short-lived URL, fetched at once (it expires in 5 minutes),
 * both with the bearer token.
 */
export async function whatsappMedia(config: Record<string, unknown>, media: InboundMedia, fetch: MediaFetch): Promise<DownloadedMedia> {
  if (!media.platformFileId) return mediaFromUrl(media, fetch);
  const auth = { Authorization: `Bearer ${String(config.access_token)}` };
  const base = String(config.api_base_url ?? GRAPH_BASE).replace(/\/$/, '');
  const version = String(config.api_version ?? GRAPH_VERSION);
  const meta = await fetch.json(`${base}/${version}/${encodeURIComponent(media.platformFileId)}`, auth);
  const info = meta.body as { url?: string; mime_type?: string };
  if (meta.status >= 300 || !info.url) throw new Error(`whatsapp media lookup failed with HTTP ${meta.status}`);
  const { data, contentType } = await fetch.bytes(info.url, auth);
  return { data, mimeType: info.mime_type ?? media.mimeType ?? contentType };
}
