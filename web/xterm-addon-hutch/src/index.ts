// xterm-addon-hutch attaches an xterm.js Terminal to a Hutch sandbox terminal:
// GET /v1/sandboxes/{id}/terminals/{tid} upgraded to a WebSocket (see api/terminal.md in the
// Hutch repository). Binary frames carry raw input and output; text frames carry JSON control
// messages. The addon authenticates with the subprotocols ["hutch.v1", "bearer.<token>"]
// (browsers cannot set an Authorization header on a WebSocket), resets the screen on every
// "ready" frame so the server's replay never doubles it, and reconnects with capped,
// jittered exponential backoff until the shell exits or the addon is disposed.

import type { IDisposable, ITerminalAddon, Terminal } from '@xterm/xterm';

/** The subprotocol hutchd selects; the token rides in a second one, "bearer.<token>". */
export const PROTOCOL = 'hutch.v1';

/** The server's first frame on every connection. */
export interface ReadyInfo {
  type: 'ready';
  id: string;
  cols: number;
  rows: number;
  pid: number;
  /** Bytes of ring-buffer replay that follow as binary frames. */
  replayBytes: number;
}

/** A control error: the connection and the terminal stay usable. */
export interface TerminalError {
  code: string;
  message: string;
}

/** connecting → open → (reconnecting → connecting → open)* → exited | closed. */
export type ConnectionState = 'connecting' | 'open' | 'reconnecting' | 'exited' | 'closed';

/** The subset of the browser WebSocket the addon uses (a fake in tests). */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
}

export type WebSocketFactory = (url: string, protocols: string[]) => WebSocketLike;

export interface HutchAddonOptions {
  /**
   * The terminal's WebSocket URL, ws: or wss: (http: and https: are turned into them), e.g.
   * wss://host/v1/sandboxes/sb1/terminals/console. Use terminalURL() to build it.
   */
  url: string;
  /** The API token. Sent only as the "bearer.<token>" subprotocol, never in the URL. */
  token: string;
  /** Session whose cwd and env a new shell starts with (query "session"). */
  sessionId?: string;
  /** Shell of a new terminal (query "shell"); the server's default is /bin/bash. */
  shell?: string;
  /** First reconnect delay in ms (default 500); doubled per failed attempt. */
  minDelayMs?: number;
  /** Reconnect delay cap in ms (default 15000). */
  maxDelayMs?: number;
  /** Attempts in a row without a "ready" before giving up (default: never give up). */
  maxRetries?: number;
  onReady?: (info: ReadyInfo) => void;
  /** The shell exited with code; the addon does not reconnect after this. */
  onExit?: (code: number) => void;
  onError?: (err: TerminalError) => void;
  onStateChange?: (state: ConnectionState) => void;
  /** Opens WebSockets; default the global WebSocket. */
  webSocket?: WebSocketFactory;
  /** Random numbers in [0, 1) for jitter; default Math.random. */
  random?: () => number;
  /**
   * Makes HTTP requests for the check after a failed handshake (a browser cannot read a refused
   * WebSocket's status); default the global fetch. Absent and no global fetch: no check.
   */
  fetch?: (url: string, init: { headers: Record<string, string> }) => Promise<{ status: number; json(): Promise<unknown> }>;
}

/** TERMINAL_ID is the server's rule for terminal IDs. */
const TERMINAL_ID = /^[a-z0-9_-]{1,64}$/;

const OPEN = 1;

/** terminalURL builds the WebSocket URL of terminal tid of sandbox id from hutchd's base URL. */
export function terminalURL(base: string, sandboxId: string, terminalId: string): string {
  const u = new URL(base);
  u.protocol = u.protocol === 'https:' || u.protocol === 'wss:' ? 'wss:' : 'ws:';
  u.pathname = `${u.pathname.replace(/\/+$/, '')}/v1/sandboxes/${encodeURIComponent(sandboxId)}/terminals/${encodeURIComponent(terminalId)}`;
  u.search = '';
  u.hash = '';
  return u.toString();
}

/**
 * backoffDelay is the wait before reconnect attempt n (0-based): min·2ⁿ capped at max, then
 * scaled into [½, 1] of itself by r ∈ [0, 1) ("equal jitter": never zero, never in lockstep).
 */
export function backoffDelay(n: number, min: number, max: number, r: number): number {
  const base = Math.min(max, min * 2 ** Math.min(n, 30));
  return Math.round(base / 2 + (base / 2) * r);
}

export class HutchAddon implements ITerminalAddon {
  private readonly opts: HutchAddonOptions;
  private term: Terminal | undefined;
  private ws: WebSocketLike | undefined;
  private subs: IDisposable[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private attempt = 0;
  private _state: ConnectionState = 'closed';
  private readonly encoder = new TextEncoder();

  constructor(opts: HutchAddonOptions) {
    if (!opts.url) throw new Error('HutchAddon: url is required');
    if (!opts.token) throw new Error('HutchAddon: token is required');
    this.opts = opts;
  }

  /** The connection's state. */
  get state(): ConnectionState {
    return this._state;
  }

  activate(term: Terminal): void {
    this.term = term;
    this.subs.push(
      term.onData((d) => this.sendInput(this.encoder.encode(d))),
      // Binary data (some mouse reports) is one byte per char code.
      term.onBinary((d) => this.sendInput(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff))),
      term.onResize(({ cols, rows }) => this.sendResize(cols, rows)),
    );
    this.connect();
  }

  /** Closes the connection for good; no reconnects. */
  dispose(): void {
    this.stop('closed');
    for (const s of this.subs) s.dispose();
    this.subs = [];
    this.term = undefined;
  }

  /** Drops the current connection (if any) and connects again now. */
  reconnect(): void {
    if (!this.term) return;
    this.attempt = 0;
    this.drop();
    this.connect();
  }

  private setState(s: ConnectionState): void {
    if (this._state === s) return;
    this._state = s;
    this.opts.onStateChange?.(s);
  }

  private url(): string {
    const u = new URL(this.opts.url);
    if (u.protocol === 'http:') u.protocol = 'ws:';
    if (u.protocol === 'https:') u.protocol = 'wss:';
    if (this.opts.sessionId) u.searchParams.set('session', this.opts.sessionId);
    if (this.opts.shell) u.searchParams.set('shell', this.opts.shell);
    if (this.term) {
      u.searchParams.set('cols', String(this.term.cols));
      u.searchParams.set('rows', String(this.term.rows));
    }
    return u.toString();
  }

  private connect(): void {
    this.timer = undefined;
    const tid = decodeURIComponent(new URL(this.opts.url).pathname.split('/').pop() ?? '');
    if (!TERMINAL_ID.test(tid)) {
      this.fail({ code: 'VALIDATION_FAILED', message: `terminal ID ${JSON.stringify(tid)}: want 1–64 of a-z 0-9 _ -` });
      return;
    }
    this.setState('connecting');
    const open = this.opts.webSocket ?? ((url, protocols) => new WebSocket(url, protocols) as unknown as WebSocketLike);
    let ws: WebSocketLike;
    try {
      ws = open(this.url(), [PROTOCOL, `bearer.${this.opts.token}`]);
    } catch (e) {
      this.opts.onError?.({ code: 'CONNECT_FAILED', message: String(e) });
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.binaryType = 'arraybuffer';
    ws.onmessage = (ev) => {
      if (this.ws === ws) this.onMessage(ev.data);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      if (this._state === 'open') {
        this.scheduleReconnect();
        return;
      }
      // Closed before "ready": the handshake may have been refused for good (a wrong token, an
      // unknown sandbox). The browser hides the status, so ask the API before retrying.
      void this.checkRefusal().then((err) => {
        if (this.ws !== undefined || !this.term) return; // disposed or reconnected meanwhile
        if (err) this.fail(err);
        else this.scheduleReconnect();
      });
    };
    ws.onerror = () => {
      // A close event follows; reconnecting is decided there.
    };
  }

  private onMessage(data: unknown): void {
    const term = this.term;
    if (!term) return;
    if (typeof data !== 'string') {
      term.write(data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array));
      return;
    }
    let msg: { type?: string; [k: string]: unknown };
    try {
      msg = JSON.parse(data);
    } catch {
      this.opts.onError?.({ code: 'PROTOCOL_ERROR', message: `malformed control frame: ${data.slice(0, 100)}` });
      return;
    }
    switch (msg.type) {
      case 'ready': {
        this.attempt = 0;
        // RIS, written in order with the output: whatever an earlier connection left on the
        // screen (or still had queued in xterm's write buffer) is cleared before the replay.
        term.write('\x1bc');
        this.setState('open');
        const info = msg as unknown as ReadyInfo;
        if (info.cols !== term.cols || info.rows !== term.rows) this.sendResize(term.cols, term.rows);
        this.opts.onReady?.(info);
        break;
      }
      case 'exit': {
        const code = typeof msg.code === 'number' ? msg.code : -1;
        this.stop('exited');
        this.opts.onExit?.(code);
        break;
      }
      case 'error':
        this.opts.onError?.({ code: String(msg.code ?? 'UNKNOWN'), message: String(msg.message ?? '') });
        break;
      default:
        // Unknown control frames are ignored: newer servers may add types.
        break;
    }
  }

  /**
   * checkRefusal asks GET /v1/sandboxes/{id} with the token after a failed handshake and
   * returns the error that makes retrying pointless (401: the token; 404: the sandbox), or
   * undefined (retry).
   */
  private async checkRefusal(): Promise<TerminalError | undefined> {
    const doFetch = this.opts.fetch ?? (typeof fetch === 'function' ? (fetch as unknown as HutchAddonOptions['fetch']) : undefined);
    if (!doFetch) return undefined;
    const u = new URL(this.opts.url);
    u.protocol = u.protocol === 'wss:' || u.protocol === 'https:' ? 'https:' : 'http:';
    u.pathname = u.pathname.replace(/\/terminals\/[^/]*$/, '');
    u.search = '';
    try {
      const r = await doFetch(u.toString(), { headers: { Authorization: `Bearer ${this.opts.token}` } });
      if (r.status !== 401 && r.status !== 404) return undefined;
      const body = (await r.json().catch(() => ({}))) as { code?: string; message?: string };
      return { code: String(body.code ?? (r.status === 401 ? 'UNAUTHENTICATED' : 'SANDBOX_NOT_FOUND')), message: String(body.message ?? `HTTP ${r.status}`) };
    } catch {
      return undefined; // the network: retry
    }
  }

  /** fail reports err and stops for good (no reconnects). */
  private fail(err: TerminalError): void {
    this.opts.onError?.(err);
    this.stop('closed');
  }

  private scheduleReconnect(): void {
    if (!this.term || this._state === 'exited') return;
    const max = this.opts.maxRetries ?? Infinity;
    if (this.attempt >= max) {
      this.opts.onError?.({ code: 'RECONNECT_FAILED', message: `gave up after ${this.attempt} attempts` });
      this.setState('closed');
      return;
    }
    const delay = backoffDelay(this.attempt, this.opts.minDelayMs ?? 500, this.opts.maxDelayMs ?? 15000, (this.opts.random ?? Math.random)());
    this.attempt++;
    this.setState('reconnecting');
    this.timer = setTimeout(() => this.connect(), delay);
  }

  private sendInput(bytes: Uint8Array): void {
    if (this.ws?.readyState === OPEN && this._state === 'open') this.ws.send(bytes);
  }

  private sendResize(cols: number, rows: number): void {
    if (this.ws?.readyState === OPEN && this._state === 'open') this.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  /** drop closes the current socket without triggering a reconnect. */
  private drop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const ws = this.ws;
    this.ws = undefined;
    if (ws) {
      ws.onmessage = ws.onclose = ws.onerror = ws.onopen = null;
      ws.close(1000, 'client closed');
    }
  }

  private stop(state: ConnectionState): void {
    this.drop();
    this.setState(state);
  }
}
