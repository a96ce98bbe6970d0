// Hutch web console: sign in with the API token (kept in sessionStorage), list the sandboxes,
// and open one (sandbox.ts). Routes live in the URL hash: #/ is the list, #/s/<id>/<tab> a
// sandbox, so a reload comes back to the same view.
import '@xterm/xterm/css/xterm.css';
import './app.css';
import { Api, ApiError } from './api';
import { h, replace, status } from './dom';
import { openSandbox } from './sandbox';
import { TOKEN_KEY, errText, handle, onSignedOut } from './session';
const main = document.getElementById('app') as HTMLElement;
const signOut = document.getElementById('signout') as HTMLButtonElement;
let cleanup: (() => void) | undefined;

interface SandboxInfo {
  id: string;
  status: string;
  image: string;
  createdAt: string;
  lastError?: string;
}

function api(): Api | undefined {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? new Api(location.origin, token) : undefined;
}

function showSignIn(message = ''): void {
  signOut.hidden = true;
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', placeholder: 'API token', required: true });
  const msg = h('p', { id: 'signin-status' });
  if (message) status(msg, message, 'error');
  const form = h(
    'form',
    { id: 'signin', class: 'card' },
    h('h2', {}, 'Sign in'),
    h('p', {}, 'Paste the API token of this hutchd (the file hutchd prints at start, usually /var/lib/hutch/token).'),
    input,
    h('button', { type: 'submit' }, 'Sign in'),
    msg,
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    status(msg, 'Checking…');
    const candidate = new Api(location.origin, input.value.trim());
    try {
      await candidate.json('GET', '/v1/sandboxes');
    } catch (e) {
      status(msg, e instanceof ApiError && e.status === 401 ? 'That token is not valid for this hutchd.' : `Cannot reach hutchd: ${errText(e)}`, 'error');
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, candidate.token);
    route();
  });
  replace(main, form);
  input.focus();
}

async function showList(a: Api): Promise<void> {
  const body = h('tbody');
  const msg = h('p', { class: 'status' });
  const load = async () => {
    status(msg, 'Loading…');
    try {
      const { sandboxes } = await a.json<{ sandboxes: SandboxInfo[] }>('GET', '/v1/sandboxes');
      replace(
        body,
        ...sandboxes.map((s) =>
          h(
            'tr',
            {},
            h('td', {}, h('a', { href: `#/s/${encodeURIComponent(s.id)}/terminal`, class: 'sandbox-link', 'data-id': s.id }, s.id)),
            h('td', {}, h('span', { class: `badge ${s.status}` }, s.status)),
            h('td', {}, s.image),
            h('td', {}, new Date(s.createdAt).toLocaleString()),
            h('td', { class: 'error' }, s.lastError ?? ''),
          ),
        ),
      );
      status(msg, sandboxes.length === 0 ? 'No sandboxes yet: create one with the SDK or `hutch create NAME`.' : `${sandboxes.length} sandboxes`);
    } catch (e) {
      handle(e, msg);
    }
  };
  replace(
    main,
    h('section', { class: 'card' }, h('div', { class: 'toolbar' }, h('h2', {}, 'Sandboxes'), h('button', { id: 'refresh', onclick: load }, 'Refresh')),
      h('table', { id: 'sandboxes' }, h('thead', {}, h('tr', {}, h('th', {}, 'ID'), h('th', {}, 'Status'), h('th', {}, 'Image'), h('th', {}, 'Created'), h('th', {}, 'Last error'))), body),
      msg),
  );
  await load();
}

function route(): void {
  cleanup?.();
  cleanup = undefined;
  const a = api();
  if (!a) return showSignIn();
  signOut.hidden = false;
  const m = /^#\/s\/([^/]+)(?:\/(\w+))?$/.exec(location.hash);
  if (m) {
    let sandboxId: string;
    try {
      sandboxId = decodeURIComponent(m[1]);
    } catch {
      location.hash = '#/'; // a malformed hash: back to the list
      return;
    }
    cleanup = openSandbox(main, a, sandboxId, m[2] ?? 'terminal');
    return;
  }
  void showList(a);
}

signOut.addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = '#/';
  route();
});
onSignedOut((message) => {
  cleanup?.();
  cleanup = undefined;
  showSignIn(message);
});
window.addEventListener('hashchange', route);
route();
