// Hutch API client for the browser: every call carries "Authorization: Bearer <token>", and
// Server-Sent Events are read with fetch + ReadableStream (EventSource cannot send headers).

/** An API error: the JSON envelope's code and message, and the HTTP status. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** One Server-Sent Event. */
export interface SSEvent {
  event: string;
  data: string;
  id: string;
}

export class Api {
  constructor(
    readonly base: string,
    readonly token: string,
  ) {}

  /** sandboxPath is /v1/sandboxes/{id}{rest}, the ID escaped. */
  static sandboxPath(id: string, rest = ''): string {
    return `/v1/sandboxes/${encodeURIComponent(id)}${rest}`;
  }

  private async request(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const resp = await fetch(this.base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    if (!resp.ok) {
      let code = 'HTTP_' + resp.status;
      let message = resp.statusText;
      try {
        const env = await resp.json();
        code = env.code ?? code;
        message = env.message ?? message;
      } catch {
        // Not a JSON envelope: keep the status text.
      }
      throw new ApiError(resp.status, code, message);
    }
    return resp;
  }

  /** json sends a request and returns the decoded JSON reply. Errors: ApiError. */
  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const resp = await this.request(method, path, body);
    return (await resp.json()) as T;
  }

  /**
   * sse sends a request whose reply is text/event-stream and calls onEvent for each event
   * until the stream ends or signal aborts. Errors before the stream: ApiError.
   */
  async sse(method: string, path: string, body: unknown, onEvent: (ev: SSEvent) => void, signal: AbortSignal): Promise<void> {
    const resp = await this.request(method, path, body, signal);
    if (!resp.body) return;
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SSEParser(onEvent);
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(value);
    }
  }
}

/** SSEParser turns text chunks into events (the WHATWG event-stream format). */
export class SSEParser {
  private buf = '';
  private event = '';
  private data: string[] = [];
  private id = '';

  constructor(private readonly onEvent: (ev: SSEvent) => void) {}

  push(chunk: string): void {
    this.buf += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (!m || (m[0] === '\r' && m.index === this.buf.length - 1)) return;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) this.onEvent({ event: this.event || 'message', data: this.data.join('\n'), id: this.id });
      this.event = '';
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id') this.id = value;
  }
}
