// The files view: a lazily expanded tree (list-files, one level at a time) and a text editor
// (read, then write on Save). Binary files are listed but not opened.
import { Api } from './api';
import { errText, handle } from './session';
import { h, replace, status } from './dom';

interface FileInfo {
  name: string;
  absolutePath: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
}

interface ReadReply {
  content: string;
  encoding: string;
  isBinary: boolean;
  size: number;
}

export function mountFiles(panel: HTMLElement, api: Api, id: string): () => void {
  const root = h('input', { id: 'files-root', value: '/workspace' });
  const tree = h('ul', { id: 'file-tree', class: 'tree' });
  const msg = h('p', { class: 'status', id: 'files-status' });
  const editPath = h('code', { id: 'editor-path' }, 'no file open');
  const editor = h('textarea', { id: 'editor', spellcheck: 'false', disabled: true });
  const save = h('button', { id: 'save', disabled: true }, 'Save');
  const saveMsg = h('span', { id: 'save-status', class: 'status' });
  let openPath = '';

  const list = async (path: string, into: HTMLElement) => {
    const { files } = await api.json<{ files: FileInfo[] }>('POST', Api.sandboxPath(id, '/list-files'), { path, options: { includeHidden: true } });
    files.sort((a, b) => Number(b.type === 'directory') - Number(a.type === 'directory') || a.name.localeCompare(b.name));
    replace(into, ...files.map(entry));
    if (files.length === 0) replace(into, h('li', { class: 'empty' }, '(empty)'));
  };

  const entry = (f: FileInfo): HTMLElement => {
    if (f.type === 'directory') {
      const children = h('ul', { class: 'tree', hidden: true });
      const label = h('button', { class: 'dir', 'data-path': f.absolutePath }, `${f.name}/`);
      label.addEventListener('click', async () => {
        if (!children.hidden) {
          children.hidden = true;
          return;
        }
        try {
          await list(f.absolutePath, children);
          children.hidden = false;
        } catch (e) {
          handle(e, msg);
        }
      });
      return h('li', {}, label, children);
    }
    const label = h('button', { class: 'file', 'data-path': f.absolutePath }, f.name);
    label.addEventListener('click', () => void openFile(f.absolutePath));
    return h('li', {}, label, h('span', { class: 'size' }, ` ${f.size} B`));
  };

  const openFile = async (path: string) => {
    status(saveMsg, 'Opening…');
    try {
      const r = await api.json<ReadReply>('POST', Api.sandboxPath(id, '/read'), { path });
      openPath = path;
      editPath.textContent = path;
      if (r.isBinary || r.encoding === 'base64') {
        editor.value = '';
        editor.disabled = save.disabled = true;
        status(saveMsg, `Binary file (${r.size} bytes): not editable here.`);
        return;
      }
      if (r.content.includes('\r')) {
        // A textarea turns CR and CRLF into LF: saving would rewrite every line ending.
        editor.value = r.content;
        editor.disabled = save.disabled = true;
        status(saveMsg, `${r.size} bytes, CR or CRLF line endings: read-only here (saving would change them).`);
        return;
      }
      editor.value = r.content;
      editor.disabled = save.disabled = false;
      status(saveMsg, `${r.size} bytes`);
    } catch (e) {
      status(saveMsg, errText(e), 'error');
    }
  };

  save.addEventListener('click', async () => {
    if (!openPath) return;
    status(saveMsg, 'Saving…');
    try {
      const r = await api.json<{ size: number }>('POST', Api.sandboxPath(id, '/write'), { path: openPath, content: editor.value, encoding: 'utf-8' });
      status(saveMsg, `Saved ${r.size} bytes.`, 'ok');
    } catch (e) {
      status(saveMsg, errText(e), 'error');
    }
  });

  const load = async () => {
    status(msg, 'Loading…');
    try {
      await list(root.value, tree);
      status(msg, '');
    } catch (e) {
      handle(e, msg);
    }
  };
  const go = h('button', { id: 'files-go' }, 'List');
  go.addEventListener('click', load);
  replace(
    panel,
    h('div', { class: 'toolbar' }, h('label', {}, 'Directory ', root), go),
    msg,
    h('div', { class: 'split' }, h('div', { class: 'tree-pane' }, tree), h('div', { class: 'editor-pane' }, h('div', { class: 'toolbar' }, editPath, save, saveMsg), editor)),
  );
  void load();
  return () => {};
}
