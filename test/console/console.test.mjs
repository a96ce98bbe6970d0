// Drives the Hutch web console in Debian's headless Chromium (playwright-core, no downloaded
// browser). Run by test/e2e/console_test.go, which starts hutchd, creates the sandbox and the
// file, and reads the file back afterwards. Environment:
//   HUTCH_URL, HUTCH_TOKEN   the daemon and its API token
//   HUTCH_SANDBOX            a running sandbox
//   HUTCH_FILE               a text file in it; HUTCH_FILE_OLD its content, HUTCH_FILE_NEW the new one
//   HUTCH_PROCESS            a background process that printed "console-log-line"
//   HUTCH_PORT_URL           the preview URL of an exposed port
//   CHROMIUM                 the browser (default /usr/bin/chromium)
//   HUTCH_SCREENSHOT         optional: where to save a screenshot of the page at the end
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set (run this through test/e2e/console_test.go)`);
  return v;
};

// Flags for Chromium as root on a closed network (the machine notes): no sandbox, no GPU, and
// none of Chromium's own background connections.
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];

/** rows returns the terminal's visible lines (xterm.js's DOM renderer). */
const rows = (page) =>
  page.$$eval('#terminal .xterm-rows > div', (els) => els.map((e) => (e.textContent ?? '').replace(/\u00a0/g, ' ').trimEnd()));

async function waitForRow(page, want, what) {
  await page.waitForFunction(
    (w) => [...document.querySelectorAll('#terminal .xterm-rows > div')].some((e) => (e.textContent ?? '').replace(/\u00a0/g, ' ').trim() === w),
    want,
    { timeout: 30_000 },
  ).catch(async (e) => {
    throw new Error(`${what}: no terminal row "${want}"; rows: ${JSON.stringify(await rows(page))}; ${e.message}`);
  });
}

async function waitForTerminalOpen(page) {
  await page.waitForFunction(() => document.querySelector('#terminal-status')?.textContent === 'open', null, { timeout: 60_000 })
    .catch(async (e) => {
      throw new Error(`terminal never opened: status "${await page.textContent('#terminal-status')}"; ${e.message}`);
    });
}

test('web console: sign in, files, processes, ports, watch, terminal with replay', { timeout: 240_000 }, async () => {
  const url = env('HUTCH_URL');
  const token = env('HUTCH_TOKEN');
  const sandbox = env('HUTCH_SANDBOX');
  const file = env('HUTCH_FILE');
  const oldContent = env('HUTCH_FILE_OLD');
  const newContent = env('HUTCH_FILE_NEW');
  const processId = env('HUTCH_PROCESS');
  const portURL = env('HUTCH_PORT_URL');
  // playwright-core gives the browser a new, empty profile directory of its own.
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ARGS });
  const problems = [];
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  try {
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) problems.push(`console: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));

    // Sign in: a wrong token is refused with a message, the right one lists the sandboxes.
    const resp = await page.goto(`${url}/console/`);
    assert.equal(resp.status(), 200);
    const csp = resp.headers()['content-security-policy'] ?? '';
    assert.match(csp, /script-src 'self';/, 'scripts only from the console itself');
    await page.fill('#token', 'wrong-token');
    await page.click('#signin button[type=submit]');
    await page.waitForSelector('#signin-status.error');
    assert.match(await page.textContent('#signin-status'), /not valid/);
    await page.fill('#token', token);
    await page.click('#signin button[type=submit]');
    await page.click(`.sandbox-link[data-id="${sandbox}"]`, { timeout: 30_000 });

    // Files: open the file from the tree, edit, save.
    await page.click('a[data-tab="files"]');
    await page.click(`#file-tree button.file[data-path="${file}"]`, { timeout: 30_000 });
    await page.waitForFunction((want) => {
      const e = document.querySelector('#editor');
      return e && !e.disabled && e.value === want;
    }, oldContent, { timeout: 30_000 });
    await page.fill('#editor', newContent);
    await page.click('#save');
    await page.waitForSelector('#save-status.ok', { timeout: 30_000 });
    assert.match(await page.textContent('#save-status'), /^Saved \d+ bytes/);

    // Processes: follow one's log stream.
    await page.click('a[data-tab="processes"]');
    await page.click(`button.process[data-id="${processId}"]`, { timeout: 30_000 });
    await page.waitForFunction(() => document.querySelector('#process-log')?.textContent?.includes('console-log-line'), null, { timeout: 30_000 });

    // Ports: the exposed port is a link to its preview URL.
    await page.click('a[data-tab="ports"]');
    await page.waitForSelector(`#ports a[href="${portURL}"]`, { timeout: 30_000 });

    // Watch: once the watch is in place, a write under /workspace shows up as an event.
    await page.click('a[data-tab="watch"]');
    await page.click('#watch-start');
    await page.waitForSelector('#watch-status.ok', { timeout: 30_000 });
    const wrote = await page.evaluate(async ({ token, sandbox }) => {
      const r = await fetch(`/v1/sandboxes/${sandbox}/write`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ path: '/workspace/watched-by-console.txt', content: 'x' }),
      });
      return r.status;
    }, { token, sandbox });
    assert.equal(wrote, 200);
    await page.waitForFunction(() => document.querySelector('#watch-events')?.textContent?.includes('/workspace/watched-by-console.txt'), null, { timeout: 30_000 });

    // Terminal: type a command and see its output.
    await page.click('a[data-tab="terminal"]');
    await waitForTerminalOpen(page);
    await page.click('#terminal .xterm');
    await page.keyboard.type('echo hello');
    await page.keyboard.press('Enter');
    await waitForRow(page, 'hello', 'after echo');
    // xterm.js's theme applies (its injected styles are allowed): light text on black.
    assert.equal(await page.$eval('#terminal .xterm-rows', (e) => getComputedStyle(e).color), 'rgb(255, 255, 255)');

    // Reload: the session token survives in sessionStorage, the terminal reconnects and the
    // server's replay shows the earlier output once (the addon resets the screen first).
    await page.reload();
    await waitForTerminalOpen(page);
    await waitForRow(page, 'hello', 'after reload');
    const after = await rows(page);
    assert.equal(after.filter((r) => r.trim() === 'hello').length, 1, `replayed once: ${JSON.stringify(after)}`);
    assert.deepEqual(problems, [], 'no CSP violations or page errors');
  } finally {
    if (process.env.HUTCH_SCREENSHOT) await page.screenshot({ path: process.env.HUTCH_SCREENSHOT }).catch(() => {});
    await browser.close();
  }
});
