// The processes view: the sandbox's background processes (process/list); clicking one streams
// its logs (process/{id}/stream, SSE read with fetch so the Authorization header goes along).
import { Api } from './api';
import { errText, handle } from './session';
import { h, replace, status } from './dom';

interface ProcessInfo {
  id: string;
  pid: number;
  command: string;
  status: string;
  exitCode?: number;
  startTime: string;
}

interface LogFrame {
  type: string;
  stream?: string;
  data?: string;
  encoding?: string;
  from?: number;
  to?: number;
  exitCode?: number;
  status?: string;
  code?: string;
  error?: string;
}

const MAX_LOG_CHARS = 2_000_000;

function decode(f: LogFrame): string {
  if (f.encoding !== 'base64') return f.data ?? '';
  return new TextDecoder().decode(Uint8Array.from(atob(f.data ?? ''), (c) => c.charCodeAt(0)));
}

export function mountProcesses(panel: HTMLElement, api: Api, id: string): () => void {
  const body = h('tbody');
  const msg = h('p', { class: 'status' });
  const title = h('code', { id: 'log-title' }, 'no process selected');
  const logStatus = h('span', { class: 'status', id: 'log-status' });
  const log = h('pre', { id: 'process-log', class: 'log' });
  let stream: AbortController | undefined;

  const append = (text: string, cls = '') => {
    log.append(h('span', cls ? { class: cls } : {}, text));
    while ((log.textContent?.length ?? 0) > MAX_LOG_CHARS && log.firstChild) log.firstChild.remove();
    log.scrollTop = log.scrollHeight;
  };

  const follow = async (p: ProcessInfo) => {
    stream?.abort();
    const ctl = new AbortController();
    stream = ctl;
    title.textContent = `${p.id}: ${p.command}`;
    log.replaceChildren();
    status(logStatus, 'streaming', 'ok');
    try {
      await api.sse('GET', Api.sandboxPath(id, `/process/${encodeURIComponent(p.id)}/stream`), undefined, (ev) => {
        let f: LogFrame;
        try {
          f = JSON.parse(ev.data);
        } catch {
          return;
        }
        if (f.type === 'stdout' || f.type === 'stderr') append(decode(f), f.type);
        else if (f.type === 'dropped') append(`[${(f.to ?? 0) - (f.from ?? 0)} bytes of ${f.stream} were dropped]\n`, 'note');
        else if (f.type === 'exit') append(`[${f.data ?? `exit ${f.exitCode}`}]\n`, 'note');
        else if (f.type === 'error') append(`[${f.code}: ${f.error}]\n`, 'stderr');
      }, ctl.signal);
      if (stream === ctl) status(logStatus, 'stream ended');
    } catch (e) {
      if (stream === ctl && !(e instanceof DOMException && e.name === 'AbortError')) status(logStatus, errText(e), 'error');
    }
  };

  const load = async () => {
    status(msg, 'Loading…');
    try {
      const { processes } = await api.json<{ processes: ProcessInfo[] }>('GET', Api.sandboxPath(id, '/process/list'));
      replace(
        body,
        ...processes.map((p) => {
          const link = h('button', { class: 'process', 'data-id': p.id }, p.id);
          link.addEventListener('click', () => void follow(p));
          return h('tr', {}, h('td', {}, link), h('td', {}, String(p.pid)), h('td', {}, h('code', {}, p.command)), h('td', {}, h('span', { class: `badge ${p.status}` }, p.status)), h('td', {}, p.exitCode === undefined ? '' : String(p.exitCode)));
        }),
      );
      status(msg, processes.length === 0 ? 'No background processes.' : '');
    } catch (e) {
      handle(e, msg);
    }
  };
  const refresh = h('button', { id: 'processes-refresh' }, 'Refresh');
  refresh.addEventListener('click', load);
  replace(
    panel,
    h('div', { class: 'toolbar' }, h('h3', {}, 'Processes'), refresh),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'ID'), h('th', {}, 'PID'), h('th', {}, 'Command'), h('th', {}, 'Status'), h('th', {}, 'Exit'))), body),
    msg,
    h('div', { class: 'toolbar' }, title, logStatus),
    log,
  );
  void load();
  return () => stream?.abort();
}
