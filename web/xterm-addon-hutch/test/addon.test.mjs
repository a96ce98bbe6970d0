// Tests of the addon against a real headless xterm.js Terminal and a tiny fake WebSocket that
// plays the server's side of the Hutch terminal protocol.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import headless from '@xterm/headless';
import { HutchAddon, backoffDelay, terminalURL, PROTOCOL } from '../dist/index.js';

const { Terminal } = headless;

class FakeSocket {
  constructor(url, protocols) {
    this.url = url;
    this.protocols = protocols;
    this.binaryType = 'blob';
    this.readyState = 0;
    this.sent = [];
    this.closedWith = undefined;
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
  }
  send(data) {
    if (this.readyState !== 1) throw new Error('send on a socket that is not open');
    this.sent.push(typeof data === 'string' ? data : Uint8Array.from(data));
  }
  close(code, reason) {
    this.closedWith = { code, reason };
    this.readyState = 3;
  }
  // Server side.
  open() {
    this.readyState = 1;
    this.onopen?.({});
  }
  text(obj) {
    this.onmessage?.({ data: typeof obj === 'string' ? obj : JSON.stringify(obj) });
  }
  binary(str) {
    const b = new TextEncoder().encode(str);
    this.onmessage?.({ data: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) });
  }
  serverClose(code = 1006) {
    this.readyState = 3;
    this.onclose?.({ code, reason: '' });
  }
  ready(cols = 80, rows = 24) {
    this.open();
    this.text({ type: 'ready', id: 'console', cols, rows, pid: 42, replayBytes: 0 });
  }
}

function setup(extra = {}) {
  const sockets = [];
  const events = { exit: [], error: [], ready: [], states: [] };
  const term = new Terminal({ cols: 80, rows: 24, allowProposedApi: true });
  const addon = new HutchAddon({
    url: 'http://127.0.0.1:7411/v1/sandboxes/sb1/terminals/console',
    token: 'tok123',
    minDelayMs: 1,
    maxDelayMs: 4,
    webSocket: (url, protocols) => {
      const s = new FakeSocket(url, protocols);
      sockets.push(s);
      return s;
    },
    onExit: (c) => events.exit.push(c),
    onError: (e) => events.error.push(e),
    onReady: (i) => events.ready.push(i),
    onStateChange: (s) => events.states.push(s),
    // The check after a failed handshake: "the sandbox is there" unless a test says otherwise.
    fetch: async () => ({ status: 200, json: async () => ({}) }),
    ...extra,
  });
  term.loadAddon(addon);
  return { term, addon, sockets, events };
}

const flush = (term) => new Promise((r) => term.write('', r));

async function until(cond, what) {
  const deadline = Date.now() + 5000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

function screen(term) {
  const b = term.buffer.active;
  const lines = [];
  for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
  while (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

test('connects with the token as a subprotocol and the size in the query', () => {
  const { sockets, addon } = setup({ sessionId: 'dev', shell: '/bin/sh' });
  assert.equal(sockets.length, 1);
  const s = sockets[0];
  assert.deepEqual(s.protocols, [PROTOCOL, 'bearer.tok123']);
  assert.equal(s.binaryType, 'arraybuffer');
  const u = new URL(s.url);
  assert.equal(u.protocol, 'ws:');
  assert.equal(u.pathname, '/v1/sandboxes/sb1/terminals/console');
  assert.equal(u.searchParams.get('session'), 'dev');
  assert.equal(u.searchParams.get('shell'), '/bin/sh');
  assert.equal(u.searchParams.get('cols'), '80');
  assert.equal(u.searchParams.get('rows'), '24');
  assert.ok(!s.url.includes('tok123'), 'the token must never be in the URL');
  addon.dispose();
});

test('input goes out as UTF-8 binary frames, only once ready', () => {
  const { term, sockets, addon } = setup();
  const s = sockets[0];
  s.open();
  term.input('lost');
  assert.equal(s.sent.length, 0, 'input before ready is dropped');
  s.text({ type: 'ready', id: 'console', cols: 80, rows: 24, pid: 1, replayBytes: 0 });
  term.input('héllo ✓\r');
  assert.equal(s.sent.length, 1);
  assert.ok(s.sent[0] instanceof Uint8Array);
  assert.equal(new TextDecoder().decode(s.sent[0]), 'héllo ✓\r');
  addon.dispose();
});

test('resizes go out as JSON text frames; a ready of another size gets one too', () => {
  const { term, sockets, addon } = setup();
  const s = sockets[0];
  s.ready(100, 30);
  assert.deepEqual(JSON.parse(s.sent.at(-1)), { type: 'resize', cols: 80, rows: 24 });
  term.resize(120, 40);
  assert.deepEqual(JSON.parse(s.sent.at(-1)), { type: 'resize', cols: 120, rows: 40 });
  addon.dispose();
});

test('output is written; a reconnect replay does not double the screen', async () => {
  const { term, sockets, events, addon } = setup();
  sockets[0].ready();
  sockets[0].binary('$ echo hello\r\nhello\r\n$ ');
  await flush(term);
  assert.deepEqual(screen(term), ['$ echo hello', 'hello', '$ ']);
  sockets[0].binary('partial output that the server also keeps');
  sockets[0].serverClose();
  await until(() => sockets.length === 2, 'a reconnect');
  assert.ok(events.states.includes('reconnecting'));
  const s = sockets[1];
  s.ready();
  s.binary('$ echo hello\r\nhello\r\n$ ');
  await flush(term);
  assert.deepEqual(screen(term), ['$ echo hello', 'hello', '$ ']);
  assert.equal(events.ready.length, 2);
  assert.equal(addon.state, 'open');
  addon.dispose();
});

test('exit frame reports the code and stops reconnecting', async () => {
  const { sockets, events, addon } = setup();
  sockets[0].ready();
  sockets[0].text({ type: 'exit', code: 3 });
  sockets[0].serverClose(1000);
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual(events.exit, [3]);
  assert.equal(addon.state, 'exited');
  assert.equal(sockets.length, 1, 'no reconnect after exit');
  addon.reconnect();
  assert.equal(sockets.length, 2, 'reconnect() starts a new connection');
  addon.dispose();
});

test('error frames and malformed control frames are reported; the connection stays', () => {
  const { term, sockets, events, addon } = setup();
  const s = sockets[0];
  s.ready();
  s.text({ type: 'error', code: 'INVALID_ARGUMENT', message: 'cols must be 1-1000' });
  s.text('{not json');
  s.text({ type: 'future-frame' });
  assert.deepEqual(events.error.map((e) => e.code), ['INVALID_ARGUMENT', 'PROTOCOL_ERROR']);
  assert.equal(addon.state, 'open');
  term.input('x');
  assert.equal(new TextDecoder().decode(s.sent.at(-1)), 'x');
  addon.dispose();
});

test('dispose closes cleanly and never reconnects', async () => {
  const { sockets, events, addon } = setup();
  sockets[0].ready();
  addon.dispose();
  assert.equal(sockets[0].closedWith.code, 1000);
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(sockets.length, 1);
  assert.equal(events.states.at(-1), 'closed');
});

test('dispose during a backoff wait cancels the reconnect', async () => {
  const { sockets, addon } = setup({ minDelayMs: 40, maxDelayMs: 40 });
  sockets[0].serverClose();
  await until(() => addon.state === 'reconnecting', 'the backoff wait (after the refusal check)');
  addon.dispose();
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(sockets.length, 1);
});

test('gives up after maxRetries attempts without a ready', async () => {
  const { sockets, events, addon } = setup({ maxRetries: 3 });
  for (let i = 0; i < 4; i++) {
    await until(() => sockets.length === i + 1, `attempt ${i + 1}`);
    sockets[i].serverClose();
  }
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(sockets.length, 4);
  assert.equal(events.error.at(-1).code, 'RECONNECT_FAILED');
  assert.equal(addon.state, 'closed');
  addon.dispose();
});

test('backoffDelay doubles, caps and jitters into [half, full]', () => {
  assert.equal(backoffDelay(0, 500, 15000, 0), 250);
  assert.equal(backoffDelay(0, 500, 15000, 1), 500);
  assert.equal(backoffDelay(3, 500, 15000, 1), 4000);
  for (const n of [5, 10, 100, 10000]) {
    const d = backoffDelay(n, 500, 15000, Math.random());
    assert.ok(d >= 7500 && d <= 15000, `attempt ${n}: ${d}`);
  }
});

test('terminalURL maps http(s) to ws(s) and escapes IDs', () => {
  assert.equal(terminalURL('https://h.example:8443/', 'sb1', 'console'), 'wss://h.example:8443/v1/sandboxes/sb1/terminals/console');
  assert.equal(terminalURL('http://127.0.0.1:7411', 'a b', 'x/y'), 'ws://127.0.0.1:7411/v1/sandboxes/a%20b/terminals/x%2Fy');
});

test('the constructor refuses a missing url or token', () => {
  assert.throws(() => new HutchAddon({ url: '', token: 't' }), /url/);
  assert.throws(() => new HutchAddon({ url: 'ws://h/x', token: '' }), /token/);
});

test('a handshake refused for good (wrong token, unknown sandbox) stops instead of retrying', async () => {
  for (const [status, code] of [[401, 'UNAUTHENTICATED'], [404, 'SANDBOX_NOT_FOUND']]) {
    const asked = [];
    const { sockets, events, addon } = setup({
      fetch: async (url, init) => {
        asked.push([url, init.headers.Authorization]);
        return { status, json: async () => ({ code, message: 'no' }) };
      },
    });
    await until(() => sockets.length === 1, 'first attempt');
    sockets[0].serverClose();
    await until(() => addon.state === 'closed', `stop after ${status}`);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(sockets.length, 1, 'no reconnect after a refusal for good');
    assert.equal(events.error.at(-1).code, code);
    assert.deepEqual(asked[0], ['http://127.0.0.1:7411/v1/sandboxes/sb1', 'Bearer tok123']);
    addon.dispose();
  }
});

test('an invalid terminal ID fails at once, without connecting', () => {
  const { sockets, events, addon } = setup({ url: 'http://127.0.0.1:7411/v1/sandboxes/sb1/terminals/BAD%20ID' });
  assert.equal(sockets.length, 0);
  assert.equal(events.error.at(-1).code, 'VALIDATION_FAILED');
  assert.equal(addon.state, 'closed');
  addon.dispose();
});
