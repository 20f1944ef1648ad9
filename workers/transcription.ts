import { fetch, FormData } from 'undici';
import type { Deps } from '../src/deps.js';
import { getFileContent } from '../src/files/files.js';
import type { BlobStore } from '../src/files/storage.js';
import { systemEvent, type SystemEventPayload, type Transcription } from '../src/ledger/event-types.js';
import { enqueue, type LedgerEvent } from '../src/queues.js';
import type { ProcessorDef } from './host.js';

const TIMEOUT_MS = 120_000;

/** The provider refused this audio (4xx other than 408/429): trying again cannot help. */
class PermanentTranscriptionError extends Error {}

/**
 * Transcribes a voice/audio message with any OpenAI-compatible endpoint, then records its
 * `message.inbound` event. A provider outage retries with backoff; after the last attempt the
 * event is recorded anyway with `transcription.status: "failed"` — never lost, never stuck.
 */
export const transcriptionProcessor: ProcessorDef<'transcription'> = {
  queue: 'transcription',
  create(deps, services) {
    return async (job) => {
      const { app_id, event, file_id } = job.data;
      const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      const started = Date.now();
      let transcription: Transcription;
      let transcript: string | undefined;
      try {
        const r = await transcribe(deps, services.files, app_id, file_id);
        transcript = r.text;
        transcription = {
          status: 'completed',
          ...(r.language ? { language: r.language } : {}),
          duration_ms: Date.now() - started,
          ...(r.durationSec !== undefined ? { audio_duration_ms: Math.round(r.durationSec * 1000) } : {}),
        };
      } catch (err) {
        if (!finalAttempt && !(err instanceof PermanentTranscriptionError)) throw err;
        transcription = {
          status: 'failed',
          duration_ms: Date.now() - started,
          attempts: job.attemptsMade + 1,
          error: (err as Error).message.slice(0, 300),
        };
      }
      // The job carries the event as src/inbound/records.ts built it (with systemEvent), less the transcript.
      const inbound = event.payload as SystemEventPayload<'message.inbound'>;
      const message = { ...inbound.message, transcription, ...(transcript !== undefined ? { transcript } : {}) };
      const recorded: LedgerEvent = { ...event, ...systemEvent('message.inbound', { ...inbound, message }) };
      await enqueue(deps.queues, 'ledger', { event: recorded });
      return { status: transcription.status };
    };
  },
  options: () => ({ concurrency: 4 }),
};

async function transcribe(
  deps: Deps,
  files: BlobStore | undefined,
  appId: string,
  fileId: string,
): Promise<{ text: string; language?: string; durationSec?: number }> {
  const file = await getFileContent(deps.sql, appId, fileId, files);
  if (!file) throw new PermanentTranscriptionError(`file ${fileId} is gone`);
  const form = new FormData();
  form.set(
    'file',
    new Blob([new Uint8Array(file.data)], { type: file.mime_type ?? 'application/octet-stream' }),
    audioFilename(file.filename, file.mime_type),
  );
  form.set('model', deps.config.TRANSCRIPTION_MODEL);
  form.set('response_format', 'verbose_json');
  const res = await fetch(`${deps.config.TRANSCRIPTION_API_BASE!.replace(/\/$/, '')}/v1/audio/transcriptions`, {
    method: 'POST',
    body: form,
    headers: deps.config.TRANSCRIPTION_API_KEY ? { Authorization: `Bearer ${deps.config.TRANSCRIPTION_API_KEY}` } : {},
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    const permanent = res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429;
    throw new (permanent ? PermanentTranscriptionError : Error)(`transcription provider answered HTTP ${res.status}`);
  }
  const body = (await res.json()) as { text?: string; language?: string; duration?: number };
  if (typeof body.text !== 'string') throw new Error('transcription provider answered without text');
  return {
    text: body.text,
    language: typeof body.language === 'string' ? body.language : undefined,
    durationSec: typeof body.duration === 'number' ? body.duration : undefined,
  };
}

/** Extensions OpenAI-compatible servers recognise; the hosted API picks the decoder by extension. */
const AUDIO_EXTENSIONS = ['flac', 'm4a', 'mp3', 'mp4', 'mpeg', 'mpga', 'oga', 'ogg', 'opus', 'wav', 'webm'];
const EXTENSION_OF_MIME: Record<string, string> = {
  'audio/ogg': 'ogg',
  'application/ogg': 'ogg',
  'audio/opus': 'ogg',
  'audio/mpeg': 'mp3',
  'audio/mp4': 'm4a',
  'audio/x-m4a': 'm4a',
  'audio/aac': 'm4a',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/webm': 'webm',
  'audio/flac': 'flac',
  'video/mp4': 'mp4',
};

/** The stored name when it ends in an audio extension, else one derived from the media type. */
function audioFilename(filename: string | null, mime: string | null): string {
  const ext = filename?.split('.').pop()?.toLowerCase();
  if (filename && ext && AUDIO_EXTENSIONS.includes(ext)) return filename;
  return `audio.${EXTENSION_OF_MIME[mime ?? ''] ?? 'ogg'}`;
}
