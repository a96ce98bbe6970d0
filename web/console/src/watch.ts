// The watch view: POST /watch (SSE read with fetch) and a table of the file events, newest
// first. watching, overflow, error and stopped are shown as status lines.
import { Api } from './api';
import { errText } from './session';
import { h, status } from './dom';

const MAX_ROWS = 500;

export function mountWatch(panel: HTMLElement, api: Api, id: string): () => void {
  const path = h('input', { id: 'watch-path', value: '/workspace' });
  const recursive = h('input', { id: 'watch-recursive', type: 'checkbox', checked: true });
  const exclude = h('input', { id: 'watch-exclude', value: '.git,node_modules', title: 'comma-separated globs' });
  const start = h('button', { id: 'watch-start' }, 'Watch');
  const stop = h('button', { id: 'watch-stop', disabled: true }, 'Stop');
  const msg = h('p', { class: 'status', id: 'watch-status' });
  const body = h('tbody', { id: 'watch-events' });
  let ctl: AbortController | undefined;

  const row = (cells: string[], cls = '') => {
    body.prepend(h('tr', cls ? { class: cls } : {}, ...cells.map((c) => h('td', {}, c))));
    while (body.rows.length > MAX_ROWS) body.lastElementChild?.remove();
  };

  const run = async () => {
    ctl?.abort();
    const mine = new AbortController();
    ctl = mine;
    start.disabled = true;
    stop.disabled = false;
    status(msg, 'Starting…');
    const req = { path: path.value, recursive: recursive.checked, exclude: exclude.value.split(',').map((s) => s.trim()).filter(Boolean) };
    try {
      await api.sse('POST', Api.sandboxPath(id, '/watch'), req, (ev) => {
        let d: Record<string, unknown> = {};
        try {
          d = JSON.parse(ev.data);
        } catch {
          return;
        }
        if (ev.event === 'watching') status(msg, `Watching ${d.path} (watch ${d.watchId})`, 'ok');
        else if (ev.event === 'event') row([new Date(String(d.timestamp)).toLocaleTimeString(), String(d.eventType), String(d.path) + (d.isDirectory ? '/' : '')]);
        else if (ev.event === 'overflow') row([new Date().toLocaleTimeString(), 'overflow', `${d.dropped} events were dropped`], 'note');
        else if (ev.event === 'error') status(msg, `${d.code}: ${d.message}`, 'error');
        else if (ev.event === 'stopped') status(msg, `Stopped: ${d.reason}`);
      }, mine.signal);
    } catch (e) {
      if (!(e instanceof DOMException && e.name === 'AbortError')) status(msg, errText(e), 'error');
    } finally {
      if (ctl === mine) {
        start.disabled = false;
        stop.disabled = true;
      }
    }
  };
  start.addEventListener('click', () => void run());
  stop.addEventListener('click', () => {
    ctl?.abort();
    status(msg, 'Stopped.');
  });
  panel.replaceChildren(
    h('div', { class: 'toolbar' }, h('label', {}, 'Path ', path), h('label', {}, recursive, ' recursive'), h('label', {}, 'Exclude ', exclude), start, stop),
    msg,
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Time'), h('th', {}, 'Event'), h('th', {}, 'Path'))), body),
  );
  return () => ctl?.abort();
}
