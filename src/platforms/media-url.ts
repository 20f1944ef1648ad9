import type { DownloadedMedia, InboundMedia, MediaFetch } from './types.js';

/** Media the delivery names by URL, fetched with the platform's credentials in `headers` (if any). */
export async function mediaFromUrl(media: InboundMedia, fetch: MediaFetch, headers: Record<string, string> = {}): Promise<DownloadedMedia> {
  if (!media.url) throw new Error('media has neither a file id nor a URL');
  const { data, contentType } = await fetch.bytes(media.url, headers);
  return { data, mimeType: media.mimeType ?? contentType };
}

/** A platform whose media URLs need no credentials. */
export const downloadByUrl = (_config: Record<string, unknown>, media: InboundMedia, fetch: MediaFetch) => mediaFromUrl(media, fetch);
