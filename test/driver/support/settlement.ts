/** How `p` settled within `ms`: a hang shows as 'pending' instead of stalling the test. */
export function settlement(p: Promise<unknown>, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(
      () => 'resolved',
      (e: { code?: string }) => `rejected ${e.code}`,
    ),
    new Promise<string>((r) => (timer = setTimeout(() => r('pending'), ms))),
  ]).finally(() => clearTimeout(timer));
}
