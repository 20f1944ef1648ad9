/**
 * Rows grouped by their application. A statement that writes or locks rows touches one
 * application's rows, never several at once: what a database sharded by application needs
 * (docs/SCALING.md §6). Batches across applications stay one transaction and one round trip:
 * their statements are pipelined. In order of application id, so two transactions that take
 * the same applications' rows take them in the same order.
 */
export function byApp<T extends { app_id: string }>(rows: T[]): [string, T[]][] {
  const groups = new Map<string, T[]>();
  for (const r of rows) {
    const group = groups.get(r.app_id);
    if (group) group.push(r);
    else groups.set(r.app_id, [r]);
  }
  return [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}
