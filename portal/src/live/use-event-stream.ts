import { useEffect, useRef, useState } from 'react';
import { api, qs } from '../api.ts';
import type { EventFilter } from '../components/filter-form.tsx';
import type { StreamEvent } from '../types.ts';

/** Rows kept on screen; older ones scroll off (Explore pages back through everything). */
const MAX_ROWS = 10_000;

export type StreamState = 'connecting' | 'live' | 'reconnecting' | 'ended';

/**
 * The ledger as it happens, from GET /events/stream. Whenever the stream drops (the service ends
 * each one after a while, restarts, or the network fails) the hook reopens it from the last
 * cursor it saw (`lastEventId`, the query form of Last-Event-ID): the service then sends every
 * matching event after it, so nothing is missed or shown twice. It retries at once, then backs
 * off up to 10 s while the service stays unreachable.
 */
export function useEventStream(filter: EventFilter, paused: boolean) {
  const [rows, setRows] = useState<StreamEvent[]>([]);
  /** Events that arrived while paused: shown when the list resumes. */
  const heldRef = useRef<StreamEvent[]>([]);
  const [held, setHeld] = useState(0);
  const pausedRef = useRef(paused);
  pausedRef.current = paused;
  const [state, setState] = useState<StreamState>('connecting');
  const [ended, setEnded] = useState<string>();
  const [reconnects, setReconnects] = useState(0);

  useEffect(() => {
    let source: EventSource | undefined;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let frame = 0;
    let lastCursor: string | undefined;
    let pending: StreamEvent[] = [];
    let stopped = false;
    let delay = 0;
    setRows([]);
    heldRef.current = [];
    setHeld(0);
    setEnded(undefined);
    setReconnects(0);

    // Many events can arrive between two frames: render them once per frame, newest first.
    const flush = () => {
      frame = 0;
      const batch = pending.reverse();
      pending = [];
      if (pausedRef.current) {
        heldRef.current = prepend(batch, heldRef.current);
        setHeld(heldRef.current.length);
      } else setRows((old) => prepend(batch, old));
    };
    const open = () => {
      const url = `/events/stream${qs({ eventTypes: filter.eventTypes, conversationId: filter.conversationId, userId: filter.userId, lastEventId: lastCursor })}`;
      const es = new EventSource(url, { withCredentials: true });
      source = es;
      es.onopen = () => {
        delay = 0;
        setState('live');
      };
      es.onmessage = (m: MessageEvent<string>) => {
        lastCursor = m.lastEventId || lastCursor;
        pending.push(JSON.parse(m.data) as StreamEvent);
        frame ||= requestAnimationFrame(flush);
      };
      es.addEventListener('error', (e) => {
        es.close();
        if (stopped) return;
        // A stream that ended because the session did shows the signed-out page (api() sees the 401).
        api('GET', '/portal/session').catch(() => undefined);
        // The service's own `event: error` frame (the session or key was revoked): do not reconnect.
        if (e instanceof MessageEvent && e.data) {
          setState('ended');
          setEnded((JSON.parse(e.data) as { error?: { message?: string } }).error?.message ?? 'The stream was ended');
          return;
        }
        setState('reconnecting');
        setReconnects((n) => n + 1);
        retry = setTimeout(open, delay);
        delay = Math.min(10_000, Math.max(250, delay * 2));
      });
    };
    setState('connecting');
    open();
    return () => {
      stopped = true;
      source?.close();
      clearTimeout(retry);
      if (frame) cancelAnimationFrame(frame);
    };
  }, [filter]);

  // Resuming shows what was held back, above what was on screen.
  useEffect(() => {
    const h = heldRef.current;
    if (paused || h.length === 0) return;
    heldRef.current = [];
    setHeld(0);
    setRows((old) => prepend(h, old));
  }, [paused]);

  return { rows, held, state, ended, reconnects };
}

const prepend = (batch: StreamEvent[], old: StreamEvent[]) =>
  batch.length + old.length > MAX_ROWS ? [...batch, ...old].slice(0, MAX_ROWS) : [...batch, ...old];
