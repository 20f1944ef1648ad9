/** What the ledger's fan-out may hand first attempts to when the webhook worker runs in its process. */
export interface LocalFirstAttempts {
  /**
   * Starts the first attempts of these events now, in this process, up to its in-flight
   * bound; returns the events it took (the rest go through the queue as usual) and `done`,
   * which resolves once they are over: true when every outcome is written (or its run
   * queued), false when one of them failed. Never throws, never rejects.
   */
  take(events: { event_id: string; app_id: string; trace?: string }[]): {
    taken: { event_id: string; app_id: string }[];
    done: Promise<boolean>;
  };
}
