import type { Session } from './types.ts';

/**
 * The embedder's accent colour drives buttons and links; the text on it is black or white,
 * whichever reads better (WCAG relative luminance), so any brand colour stays legible.
 */
export function applyTheme(theme: Session['theme']): void {
  const accent = theme.accent_color;
  if (!accent || !/^#[0-9a-f]{6}$/i.test(accent)) return;
  const root = document.documentElement.style;
  root.setProperty('--accent', accent);
  root.setProperty('--on-accent', luminance(accent) > 0.18 ? '#000' : '#fff');
  // Links use the accent on white only where it is dark enough to read; otherwise the default ink.
  root.setProperty('--link', luminance(accent) < 0.18 ? accent : '#1d4ed8');
}

function luminance(hex: string): number {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const c = Number.parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}
