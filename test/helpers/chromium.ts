import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium (.ci/run installs it); playwright-core never downloads a browser. */
const CHROMIUM = '/usr/bin/chromium';

/**
 * Headless Chromium for the browser tests. Root in a sandbox-less container, and a closed
 * network: no background connections. Playwright gives each launch a new empty profile.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
