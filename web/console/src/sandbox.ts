// One sandbox: its status and a tab per view. Each view mounts into the panel and returns its
// cleanup (close sockets and streams), called when the view or the route changes.
import { Api } from './api';
import { handle } from './session';
import { h, replace, status } from './dom';
import { mountFiles } from './files';
import { mountPorts } from './ports';
import { mountProcesses } from './processes';
import { mountTerminal } from './terminal';
import { mountWatch } from './watch';

export type View = (panel: HTMLElement, api: Api, id: string) => () => void;

const views: Record<string, [string, View]> = {
  terminal: ['Terminal', mountTerminal],
  files: ['Files', mountFiles],
  processes: ['Processes', mountProcesses],
  ports: ['Ports', mountPorts],
  watch: ['Watch', mountWatch],
};

export function openSandbox(main: HTMLElement, api: Api, id: string, tab: string): () => void {
  const view = views[tab] ?? views.terminal;
  const state = h('span', { class: 'badge', id: 'sandbox-status' }, '…');
  const msg = h('p', { class: 'status' });
  const panel = h('section', { class: 'panel', id: `panel-${tab}` });
  const nav = h(
    'nav',
    { class: 'tabs' },
    ...Object.entries(views).map(([key, [label]]) =>
      h('a', { href: `#/s/${encodeURIComponent(id)}/${key}`, class: key === tab ? 'tab active' : 'tab', 'data-tab': key }, label),
    ),
  );
  replace(main, h('div', { class: 'toolbar' }, h('a', { href: '#/' }, '← Sandboxes'), h('h2', {}, id), state), msg, nav, panel);
  api
    .json<{ status: string }>('GET', Api.sandboxPath(id))
    .then((s) => {
      state.textContent = s.status;
      state.className = `badge ${s.status}`;
    })
    .catch((e) => handle(e, msg));
  status(msg, '');
  return view[1](panel, api, id);
}
