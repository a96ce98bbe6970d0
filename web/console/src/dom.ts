// Tiny DOM helpers. Text always goes in as text nodes (never innerHTML): file names, logs and
// API messages cannot inject markup.

type Attrs = Record<string, string | boolean | ((ev: Event) => void) | undefined>;
type Child = Node | string | null | undefined | false;

/** h creates an element: attributes (on* keys become listeners), then children. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  append(el, ...children);
  return el;
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
}

/** replace empties el and appends children. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, ...children);
}

/** status sets a status line's text and kind (ok, error, or neutral). */
export function status(el: HTMLElement, text: string, kind: 'ok' | 'error' | '' = ''): void {
  el.textContent = text;
  el.className = `status ${kind}`.trim();
}
