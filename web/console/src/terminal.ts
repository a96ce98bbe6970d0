// The terminal view: xterm.js attached to the sandbox terminal (default ID "console") by the
// Hutch addon, which replays the terminal's recent output on every (re)connect.
import { HutchAddon, terminalURL } from '@hutchdev/xterm-addon-hutch';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import { Api } from './api';
import { h, replace, status } from './dom';

export function mountTerminal(panel: HTMLElement, api: Api, id: string): () => void {
  const tid = h('input', { id: 'terminal-id', value: 'console', pattern: '[a-z0-9_\\-]{1,64}', title: '1–64 of a-z 0-9 _ -' });
  const msg = h('span', { id: 'terminal-status', class: 'status' });
  const restart = h('button', { id: 'terminal-restart', hidden: true }, 'Start a new shell');
  const box = h('div', { id: 'terminal', class: 'terminal' });
  replace(panel, h('div', { class: 'toolbar' }, h('label', {}, 'Terminal ', tid), h('button', { id: 'terminal-open' }, 'Open'), restart, msg), box);

  let term: Terminal | undefined;
  let addon: HutchAddon | undefined;
  let fit: FitAddon | undefined;
  const onResize = () => fit?.fit();

  const open = () => {
    if (!tid.checkValidity()) {
      status(msg, 'A terminal ID is 1–64 of a-z, 0-9, _ and -.', 'error');
      return;
    }
    addon?.dispose();
    term?.dispose();
    term = new Terminal({ cursorBlink: true, fontFamily: 'ui-monospace, Menlo, Consolas, monospace', fontSize: 14, scrollback: 5000 });
    fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box);
    fit.fit();
    restart.hidden = true;
    addon = new HutchAddon({
      url: terminalURL(api.base, id, tid.value),
      token: api.token,
      onStateChange: (s) => {
        if (s !== 'exited') status(msg, s, s === 'open' ? 'ok' : '');
      },
      onExit: (code) => {
        status(msg, `The shell exited with code ${code}.`, code === 0 ? '' : 'error');
        restart.hidden = false;
      },
      onError: (e) => status(msg, `${e.code}: ${e.message}`, 'error'),
    });
    term.loadAddon(addon);
    term.focus();
  };
  panel.querySelector('#terminal-open')?.addEventListener('click', open);
  restart.addEventListener('click', () => {
    restart.hidden = true;
    addon?.reconnect();
  });
  window.addEventListener('resize', onResize);
  open();
  return () => {
    window.removeEventListener('resize', onResize);
    addon?.dispose();
    term?.dispose();
  };
}
