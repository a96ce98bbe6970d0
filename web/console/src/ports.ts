// The ports view: the sandbox's exposed ports as links to their preview URLs.
import { Api } from './api';
import { handle } from './session';
import { h, replace, status } from './dom';

interface ExposedPort {
  port: number;
  name?: string;
  url: string;
}

export function mountPorts(panel: HTMLElement, api: Api, id: string): () => void {
  const list = h('ul', { id: 'ports', class: 'plain' });
  const msg = h('p', { class: 'status' });
  const load = async () => {
    status(msg, 'Loading…');
    try {
      const { ports } = await api.json<{ ports: ExposedPort[] }>('GET', Api.sandboxPath(id, '/ports'));
      replace(
        list,
        ...ports.map((p) => {
          // Only http(s) URLs become links: a URL is data from the server, not markup.
          const safe = /^https?:\/\//.test(p.url);
          return h('li', {}, h('strong', {}, `${p.port}${p.name ? ` (${p.name})` : ''} `), safe ? h('a', { href: p.url, target: '_blank', rel: 'noopener noreferrer' }, p.url) : h('code', {}, p.url));
        }),
      );
      status(msg, ports.length === 0 ? 'No exposed ports: expose one with the SDK or `hutch expose`.' : '');
    } catch (e) {
      handle(e, msg);
    }
  };
  const refresh = h('button', { id: 'ports-refresh' }, 'Refresh');
  refresh.addEventListener('click', load);
  replace(panel, h('div', { class: 'toolbar' }, h('h3', {}, 'Exposed ports'), refresh), list, msg);
  void load();
  return () => {};
}
