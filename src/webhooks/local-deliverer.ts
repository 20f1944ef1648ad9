/** What the ledger's fan-out may hand first attempts to when the webhook worker runs in its process. */
export interface LocalFirstAttempts {
  /**
   * Starts the first attempts of these events now, in this process, up to its in-flight
   * bound; returns the events it took (the rest go through the queue as usual). Never throws.
   */
  take(events: { event_id: string; app_id: string; trace?: string }[]): { event_id: string; app_id: string }[];
}
