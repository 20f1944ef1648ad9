import type { Job } from 'bullmq';
import { fetch, FormData } from 'undici';
import type { Deps } from '../src/deps.js';
import { getFileContent } from '../src/files/files.js';
import { enqueue, type JobData, type LedgerEvent } from '../src/queues.js';
import type { ProcessorDef } from './host.js';

const TIMEOUT_MS = 120_000;

/**
 * Transcribes a voice/audio message with any OpenAI-compatible endpoint, then records its
 * `message.inbound` event. A provider outage retries with backoff; after the last attempt the
 * event is recorded anyway with `transcription.status: "failed"` — never lost, never stuck.
 */
export const transcriptionProcessor: ProcessorDef<'transcription'> = {
  queue: 'transcription',
  create(deps) {
    return async (job: Job) => {
      const { app_id, event, file_id } = job.data as JobData<'transcription'>;
      const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      const started = Date.now();
      let transcription: Record<string, unknown>;
      let transcript: string | undefined;
      try {
        const r = await transcribe(deps, app_id, file_id);
        transcript = r.text;
        transcription = { status: 'completed', ...(r.language ? { language: r.language } : {}), duration_ms: Date.now() - started };
      } catch (err) {
        if (!finalAttempt) throw err;
        transcription = { status: 'failed', error: (err as Error).message.slice(0, 300) };
      }
      const message = { ...(event.payload.message as Record<string, unknown>), transcription, ...(transcript !== undefined ? { transcript } : {}) };
      const recorded: LedgerEvent = { ...event, payload: { ...event.payload, message } };
      await enqueue(deps.queues, 'ledger', { event: recorded });
      return { status: transcription.status };
    };
  },
  options: () => ({ concurrency: 4 }),
};

async function transcribe(deps: Deps, appId: string, fileId: string): Promise<{ text: string; language?: string }> {
  const file = await getFileContent(deps.sql, appId, fileId);
  if (!file) throw new Error(`file ${fileId} is gone`);
  const form = new FormData();
  form.set('file', new Blob([new Uint8Array(file.data)], { type: file.mime_type ?? 'application/octet-stream' }), file.filename ?? 'audio');
  form.set('model', deps.config.TRANSCRIPTION_MODEL);
  form.set('response_format', 'verbose_json');
  const res = await fetch(`${deps.config.TRANSCRIPTION_API_BASE!.replace(/\/$/, '')}/v1/audio/transcriptions`, {
    method: 'POST',
    body: form,
    headers: deps.config.TRANSCRIPTION_API_KEY ? { Authorization: `Bearer ${deps.config.TRANSCRIPTION_API_KEY}` } : {},
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  if (!res.ok) throw new Error(`transcription provider answered HTTP ${res.status}`);
  const body = (await res.json()) as { text?: string; language?: string };
  if (typeof body.text !== 'string') throw new Error('transcription provider answered without text');
  return { text: body.text, language: body.language };
}
