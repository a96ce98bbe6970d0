// hutch JavaScript kernel driver. Evaluated by `node -e` (see kernel_javascript.go) as a
// function expression and called with node's require. It speaks the driver protocol described
// in kernel_proc.go: commands arrive as JSON lines on fd 3, events leave as JSON lines on fd 4
// (both reopened at once through /proc/self/fd as close-on-exec descriptors, and fds 3 and 4
// closed, so child processes inherit neither); every event carries the nonce "n" of its
// command. fd 1 and 2 carry only what child processes write directly.
//
// Code runs in the main realm with vm.runInThisContext (no cross-realm instanceof surprises,
// every Node global and require available; each context is its own node process). Top-level
// declarations persist: before a run, a small tokenizer finds the top-level statements and
// rewrites `let`/`const` to `var` and `class X {}` to `var X = class X {};` (so re-running a
// cell that declares the same name works). Code with top-level await (detected because it does
// not compile as a script) is wrapped in an async arrow function; its top-level declarations
// become assignments to globals and its last expression statement is returned.
(function (require) {
  'use strict';
  const vm = require('vm');
  const fs = require('fs');
  const util = require('util');
  const readline = require('readline');
  const { Console } = require('console');
  const Module = require('module');
  const path = require('path');
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const SYNC = (nonce) => '\x00\x1bhutch-sync:' + nonce + '\x00';
  let nonce = ''; // the command in progress
  // Bounds of one event, well below the agent's 64 MiB line limit (sizes of the JSON text).
  const MAX_VALUE = 16 << 20, MAX_ERROR = 1 << 20, MAX_CHUNK = 65536;
  function reopen(fd, flags) {
    const nfd = fs.openSync('/proc/self/fd/' + fd, flags); // node opens with O_CLOEXEC
    fs.closeSync(fd);
    return nfd;
  }
  const CMD_FD = reopen(3, fs.constants.O_RDONLY);
  const EVT_FD = reopen(4, fs.constants.O_WRONLY);
  // Copies of fds 1 and 2 (the pipes the agent reads): the end-of-run markers go there, and
  // fds 1 and 2 are reopened from them when the code closed them.
  const OUT_COPIES = [1, 2].map((fd) => { try { return fs.openSync('/proc/self/fd/' + fd, fs.constants.O_WRONLY); } catch (_) { return fd; } });
  const DRIVER = 'hutch-js-driver.js';

  function writeAll(fd, s) {
    const b = Buffer.from(s, 'utf8');
    let off = 0;
    while (off < b.length) {
      try {
        off += fs.writeSync(fd, b, off, b.length - off);
      } catch (e) {
        if (e.code === 'EAGAIN') continue;
        throw e;
      }
    }
  }
  function send(ev) { writeAll(EVT_FD, stringify({ n: nonce, ...ev }) + '\n'); }
  function clip(s, limit) {
    return s.length <= limit ? s : s.slice(0, limit) + '... [hutch: too large: ' + (s.length - limit) + ' more characters left out]';
  }

  // Console output becomes events as it is written.
  const EventEmitter = require('events');
  function sendText(type, s) {
    const text = typeof s === 'string' ? s : Buffer.from(s).toString('utf8');
    for (let i = 0; i < text.length; i += MAX_CHUNK) send({ type, text: text.slice(i, i + MAX_CHUNK) });
  }
  const outStream = Object.assign(new EventEmitter(), { write(s) { sendText('stdout', s); return true; } });
  const errStream = Object.assign(new EventEmitter(), { write(s) { sendText('stderr', s); return true; } });
  const con = new Console({ stdout: outStream, stderr: errStream, colorMode: false });
  // process.stdout and process.stderr are replaced without being touched: node's own streams
  // would switch fds 1 and 2 to non-blocking mode, which child processes inherit (their
  // writes then fail with EAGAIN).
  for (const [name, stream] of [['stdout', outStream], ['stderr', errStream]]) {
    const w = stream.write;
    Object.assign(stream, {
      write(chunk, enc, cb) { w(chunk); if (typeof enc === 'function') enc(); else if (typeof cb === 'function') cb(); return true; },
      end() {}, isTTY: false, writable: true,
    });
    Object.defineProperty(process, name, { configurable: true, enumerable: true, get: () => stream });
  }
  globalThis.console = con;

  function setModuleGlobals() {
    const file = path.join(process.cwd(), '[hutch]');
    globalThis.require = Module.createRequire(file);
    globalThis.__filename = file;
    globalThis.__dirname = process.cwd();
  }
  setModuleGlobals();

  // ---- tokenizer -------------------------------------------------------------------------
  const REGEX_AFTER_WORD = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new', 'delete', 'void', 'throw', 'case', 'do', 'else', 'yield', 'await', 'extends']);
  const PUNCT = ['>>>=', '...', '===', '!==', '**=', '<<=', '>>=', '>>>', '&&=', '||=', '??=', '=>', '==', '!=', '<=', '>=', '&&', '||', '??', '?.', '++', '--', '+=', '-=', '*=', '/=', '%=', '&=', '|=', '^=', '**', '<<', '>>'];
  const isIdStart = (c) => /[A-Za-z_$#\u0080-\uffff\\]/.test(c);
  const isIdPart = (c) => /[A-Za-z0-9_$\u0080-\uffff\\]/.test(c);

  // tokenize returns tokens {t, v, s, e, nl}: t is 'id', 'num', 'str', 're', 'tpl', 'p'
  // (punctuator), 'open' (a template's `${`) or 'close' (the `}` ending it); nl tells that a
  // line break precedes the token.
  function tokenize(src) {
    const toks = [];
    const tplDepth = []; // brace depth at each open `${`
    let depth = 0, i = 0, nl = false;
    const n = src.length;
    const push = (t, s) => { toks.push({ t, v: src.slice(s, i), s, e: i, nl }); nl = false; };
    const regexOK = () => {
      const p = toks[toks.length - 1];
      if (!p) return true;
      if (p.t === 'id') return REGEX_AFTER_WORD.has(p.v);
      if (p.t === 'p') return !(p.v === ')' || p.v === ']' || p.v === '}' || p.v === '++' || p.v === '--');
      return p.t === 'open' || p.t === 'closeopen';
    };
    const scanTemplate = (kind, s) => { // i is after ` or after the } resuming a template
      while (i < n) {
        const c = src[i];
        if (c === '\\') { i += 2; continue; }
        if (c === '`') { i++; push(kind === 'close' ? 'close' : 'tpl', s); return; }
        if (c === '$' && src[i + 1] === '{') { i += 2; push(kind === 'close' ? 'close' : 'open', s); if (kind === 'close') { toks[toks.length - 1].t = 'closeopen'; } tplDepth.push(depth); return; }
        i++;
      }
      push(kind === 'close' ? 'close' : 'tpl', s);
    };
    while (i < n) {
      const c = src[i];
      if (c === '\n' || c === '\r' || c === '\u2028' || c === '\u2029') { nl = true; i++; continue; }
      if (c === ' ' || c === '\t' || c === '\v' || c === '\f' || /\s/.test(c)) { i++; continue; }
      if (c === '/' && src[i + 1] === '/') { while (i < n && src[i] !== '\n') i++; continue; }
      if (c === '/' && src[i + 1] === '*') {
        const j = src.indexOf('*/', i + 2);
        const end = j < 0 ? n : j + 2;
        if (/[\n\r\u2028\u2029]/.test(src.slice(i, end))) nl = true;
        i = end;
        continue;
      }
      if (c === '#' && i === 0 && src[1] === '!') { while (i < n && src[i] !== '\n') i++; continue; }
      const s = i;
      if (c === '"' || c === "'") {
        i++;
        while (i < n && src[i] !== c && src[i] !== '\n') { if (src[i] === '\\') i++; i++; }
        i++;
        push('str', s);
      } else if (c === '`') {
        i++;
        scanTemplate('tpl', s);
      } else if (c === '}' && tplDepth.length && tplDepth[tplDepth.length - 1] === depth) {
        tplDepth.pop();
        i++;
        scanTemplate('close', s);
      } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(src[i + 1] || ''))) {
        i++;
        while (i < n && (/[0-9A-Za-z_.]/.test(src[i]) || ((src[i] === '+' || src[i] === '-') && /[eE]/.test(src[i - 1]) && !/^0[xX]/.test(src.slice(s, i))))) i++;
        push('num', s);
      } else if (isIdStart(c)) {
        i++;
        while (i < n && isIdPart(src[i])) i++;
        push('id', s);
      } else if (c === '/' && regexOK()) {
        i++;
        let cls = false;
        while (i < n && src[i] !== '\n') {
          const d = src[i];
          if (d === '\\') { i += 2; continue; }
          if (d === '[') cls = true; else if (d === ']') cls = false; else if (d === '/' && !cls) break;
          i++;
        }
        i++;
        while (i < n && isIdPart(src[i])) i++;
        push('re', s);
      } else {
        let p = PUNCT.find((q) => src.startsWith(q, i));
        if (p === '?.' && /[0-9]/.test(src[i + 2] || '')) p = undefined;
        i += p ? p.length : 1;
        push('p', s);
        const v = toks[toks.length - 1].v;
        if (v === '{' || v === '(' || v === '[') depth++;
        else if (v === '}' || v === ')' || v === ']') depth--;
      }
    }
    return toks;
  }

  const OPENERS = new Set(['(', '[', '{']);
  const CLOSERS = new Set([')', ']', '}']);
  const delta = (tk) => {
    if (tk.t === 'open') return 1;
    if (tk.t === 'close') return -1;
    if (tk.t === 'p') return OPENERS.has(tk.v) ? 1 : CLOSERS.has(tk.v) ? -1 : 0;
    return 0;
  };
  // Words after which an expression goes on on the next line; words that go on a statement.
  const CONT_BEFORE = new Set(['else', 'do', 'typeof', 'new', 'in', 'instanceof', 'of', 'void', 'delete', 'await', 'yield', 'extends', 'case', 'return', 'throw', 'var', 'let', 'const', 'async', 'function', 'class']);
  const CONT_AFTER = new Set(['else', 'catch', 'finally', 'in', 'instanceof', 'of', 'extends']);
  const ENDS_ON_BRACE = new Set(['function', 'class', '{']);

  // statements splits the top level into [start, end) token ranges (end excludes a final ';').
  function statements(toks) {
    const out = [];
    let depth = 0, start = 0, kind = null;
    const close = (end, next) => { if (end > start) out.push({ a: start, b: end }); start = next; kind = null; };
    for (let k = 0; k < toks.length; k++) {
      const tk = toks[k];
      if (depth === 0 && k > start && tk.nl) {
        const prev = toks[k - 1];
        const prevEnds = prev.t === 'num' || prev.t === 'str' || prev.t === 're' || prev.t === 'tpl' || prev.t === 'close' ||
          (prev.t === 'id' && !CONT_BEFORE.has(prev.v)) || (prev.t === 'p' && (prev.v === ')' || prev.v === ']' || prev.v === '}' || prev.v === '++' || prev.v === '--'));
        const nextStarts = (tk.t === 'id' && !CONT_AFTER.has(tk.v) && !(tk.v === 'while' && kind === 'do')) || tk.t === 'num' || tk.t === 'str' || tk.t === 're' ||
          (tk.t === 'p' && (tk.v === '{' || tk.v === '!' || tk.v === '~' || tk.v === '++' || tk.v === '--' || tk.v === ';'));
        if (prevEnds && nextStarts) close(k, k);
      }
      if (depth === 0 && k === start) {
        kind = tk.v;
        if (tk.v === 'async' && toks[k + 1] && toks[k + 1].v === 'function' && !toks[k + 1].nl) kind = 'function';
      }
      depth += delta(tk);
      if (depth === 0 && tk.t === 'p' && tk.v === ';') { close(k, k + 1); continue; }
      if (depth === 0 && tk.t === 'p' && tk.v === '}' && ENDS_ON_BRACE.has(kind) && !(kind === '{' && k === start)) {
        // A declaration ends at the `}` of its body, unless an expression goes on: class
        // bodies and function bodies are the first `{...}` at depth 0.
        const nx = toks[k + 1];
        if (!nx || !(nx.t === 'p' && !OPENERS.has(nx.v) && nx.v !== ';' && nx.v !== '!' && nx.v !== '~')) close(k + 1, k + 1);
      }
    }
    close(toks.length, toks.length);
    return out;
  }

  const STMT_WORDS = new Set(['var', 'let', 'const', 'function', 'class', 'if', 'for', 'while', 'do', 'try', 'switch', 'return', 'throw', 'break', 'continue', 'import', 'export', 'debugger', 'with', '{', ';']);

  function declInfo(toks, st) {
    const first = toks[st.a];
    const second = toks[st.a + 1];
    if ((first.v === 'let' || first.v === 'const' || first.v === 'var') && first.t === 'id' && second && (second.t === 'id' || second.v === '[' || second.v === '{')) return { kind: 'decl' };
    if (first.v === 'class' && second && second.t === 'id' && second.v !== 'extends') {
      // The body's `{`: the first `{` at depth 0 after the name.
      return { kind: 'class', name: second.v };
    }
    let f = st.a;
    if (first.v === 'async' && second && second.v === 'function') f++;
    if (toks[f].v === 'function') {
      let g = f + 1;
      if (toks[g] && toks[g].v === '*') g++;
      if (toks[g] && toks[g].t === 'id') return { kind: 'function', name: toks[g].v };
    }
    if (first.t === 'p' && first.v === '{') return { kind: 'stmt' };
    if (first.t === 'id' && STMT_WORDS.has(first.v)) return { kind: 'stmt' };
    if (first.t === 'id' && second && second.v === ':' ) return { kind: 'stmt' }; // a label
    return { kind: 'expr' };
  }

  // splitDeclarators returns the token ranges of a declaration's declarators.
  function splitDeclarators(toks, a, b) {
    const out = [];
    let depth = 0, s = a;
    for (let k = a; k < b; k++) {
      depth += delta(toks[k]);
      if (depth === 0 && toks[k].t === 'p' && toks[k].v === ',') { out.push([s, k]); s = k + 1; }
    }
    out.push([s, b]);
    return out;
  }
  function hasTopAssign(toks, a, b) {
    let depth = 0;
    for (let k = a; k < b; k++) {
      depth += delta(toks[k]);
      if (depth === 0 && toks[k].t === 'p' && toks[k].v === '=') return true;
    }
    return false;
  }

  // rewrite returns {sync, async}: the code as a script with persistent declarations, and the
  // code wrapped for top-level await (or null when it has no await token).
  function rewrite(src) {
    const toks = tokenize(src);
    const sts = statements(toks);
    const edits = []; // {s, e, text} on source offsets, for the script form
    const aedits = [];
    const hoist = [];
    let hasAwait = false;
    for (const tk of toks) if (tk.t === 'id' && tk.v === 'await') { hasAwait = true; break; }
    sts.forEach((st, idx) => {
      const info = declInfo(toks, st);
      const first = toks[st.a], last = toks[st.b - 1];
      if (info.kind === 'decl') {
        if (first.v !== 'var') edits.push({ s: first.s, e: first.e, text: 'var' });
        // async form: `let a = 1, {b} = o` -> `void (a = 1, {b} = o)`; declarators without an
        // initializer get `= undefined`.
        const parts = splitDeclarators(toks, st.a + 1, st.b).map(([x, y]) => {
          const text = src.slice(toks[x].s, toks[y - 1].e);
          return hasTopAssign(toks, x, y) ? text : text + ' = undefined';
        });
        aedits.push({ s: first.s, e: last.e, text: 'void (' + parts.join(', ') + ');' });
      } else if (info.kind === 'class') {
        // Find the `}` that closes the body: the statement's last token when the statement
        // ended on it.
        if (last.t === 'p' && last.v === '}') {
          edits.push({ s: first.s, e: first.s, text: 'var ' + info.name + ' = ' });
          edits.push({ s: last.e, e: last.e, text: ';' });
          aedits.push({ s: first.s, e: first.s, text: info.name + ' = ' });
          aedits.push({ s: last.e, e: last.e, text: ';' });
        }
      } else if (info.kind === 'function') {
        hoist.push('globalThis[' + stringify(info.name) + '] = ' + info.name + ';');
      } else if (info.kind === 'expr' && idx === sts.length - 1) {
        aedits.push({ s: first.s, e: first.s, text: 'return (' });
        aedits.push({ s: last.e, e: last.e, text: '\n);' });
      }
    });
    const apply = (list) => {
      list.sort((x, y) => x.s - y.s || x.e - y.e);
      let out = '', pos = 0;
      for (const ed of list) { out += src.slice(pos, ed.s) + ed.text; pos = ed.e; }
      return out + src.slice(pos);
    };
    return {
      sync: apply(edits),
      async: hasAwait ? '(async () => { ' + hoist.join(' ') + apply(aedits) + '\n})()' : null,
    };
  }

  // ---- running ---------------------------------------------------------------------------
  let pendingInterrupt = null; // rejects the await of a run in its async phase

  process.on('SIGINT', () => {
    if (pendingInterrupt) pendingInterrupt();
  });
  process.on('uncaughtException', (e) => {
    try { errStream.write('Uncaught ' + describe(e) + '\n'); } catch (_) { /* fd 4 gone */ }
  });
  process.on('unhandledRejection', (e) => {
    try { errStream.write('Unhandled promise rejection: ' + describe(e) + '\n'); } catch (_) { /* fd 4 gone */ }
  });

  // ---- describing values that may throw on every access -----------------------------------
  function attempt(f, fallback) {
    try { return f(); } catch (_) { return fallback; }
  }
  function safeString(v, fallback) {
    try {
      const s = String(v);
      if (typeof s === 'string') return s;
    } catch (_) { /* a throwing toString, a Proxy, a Symbol.toPrimitive */ }
    return fallback;
  }
  function safeInspect(v, opts) {
    try {
      const s = util.inspect(v, opts);
      if (typeof s === 'string') return s;
    } catch (_) { /* a throwing getter of an Error, a throwing custom inspect */ }
    return attempt(() => Object.prototype.toString.call(v), '<unprintable value>');
  }
  function describe(e) {
    const stack = attempt(() => (e && e.stack), undefined);
    return typeof stack === 'string' ? stack : safeInspect(e);
  }

  function cleanStack(stack) {
    // Frames of the driver and of node's own modules are not the user's.
    return String(stack).split('\n').filter((l) => !(l.includes(DRIVER) || l.includes('(node:') || /^\s*at node:/.test(l))).map((l) => l.replace(/\s+$/, ''));
  }
  // errorEvent describes a thrown value as an error event. It never throws: a value whose
  // properties, proxy traps or toString throw gets the best description that works (at worst
  // name "Error", value "<unprintable thrown value>").
  function errorEvent(e, interrupted) {
    try {
      return errorEventOf(e, interrupted);
    } catch (_) {
      return { type: 'error', name: interrupted ? 'InterruptError' : 'Error', value: '<unprintable thrown value>', traceback: [] };
    }
  }
  function errorEventOf(e, interrupted) {
    const obj = e !== null && (typeof e === 'object' || typeof e === 'function');
    const stack = obj ? attempt(() => e.stack, undefined) : undefined;
    const isError = obj && (attempt(() => e instanceof Error, false) || (typeof stack === 'string' && attempt(() => 'message' in e, false)));
    if (isError) {
      let name = safeString(attempt(() => e.name, undefined) || 'Error', 'Error');
      let value = safeString(attempt(() => e.message, ''), '<unprintable message>');
      if (interrupted || attempt(() => e.code, undefined) === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
        name = 'InterruptError';
        value = 'execution interrupted; the context keeps its state';
      }
      let tb = cleanStack(typeof stack === 'string' ? stack : name + ': ' + value).map((l) => clip(l, MAX_CHUNK));
      if (tb.reduce((n, l) => n + l.length, 0) > MAX_ERROR) tb = tb.slice(0, 1).concat(['[hutch: traceback too large: left out]']);
      return { type: 'error', name: clip(name, MAX_CHUNK), value: clip(value, MAX_ERROR), traceback: tb };
    }
    const shown = safeInspect(e);
    const text = clip('Uncaught ' + (shown === '<unprintable value>' ? '<unprintable thrown value>' : shown), MAX_ERROR);
    return { type: 'error', name: 'Error', value: text, traceback: [text] };
  }

  function resultEvent(v) {
    if (v === undefined) return null;
    const data = { 'text/plain': util.inspect(v, { colors: false, depth: 4, maxArrayLength: 200 }) };
    // A Proxy's traps may throw: such a value is shown as text only.
    const proto = v !== null && typeof v === 'object' ? attempt(() => Object.getPrototypeOf(v), undefined) : undefined;
    if (attempt(() => Array.isArray(v), false) || proto === Object.prototype || proto === null) {
      // Plain objects and arrays only: JSON.stringify of a Map, a Set or a class instance with
      // private state says too little.
      try {
        const j = stringify(v);
        if (j !== undefined && j.length > MAX_VALUE) {
          sendText('stderr', '[hutch: result too large: application/json (' + j.length + ' bytes) left out; one value may be at most ' + (MAX_VALUE >> 20) + ' MiB]\n');
        } else if (j !== undefined) {
          data['application/json'] = parse(j);
        }
      } catch (_) { /* circular or BigInt: text only */ }
    }
    data['text/plain'] = clip(data['text/plain'], MAX_VALUE >> 1); // UTF-16 units; escapes may double it
    return { type: 'result', data };
  }

  let cell = 0;
  async function run(code) {
    cell++;
    const filename = '<cell ' + cell + '>';
    let script, isAsync = false;
    try {
      // Like node's REPL, `{ a: 1 }` alone is an object literal, not a block.
      const t = code.trim();
      if (t.startsWith('{') && t.endsWith('}')) {
        try {
          new vm.Script('(' + t + '\n)');
          code = '(' + t + '\n)';
        } catch (_) { /* a block after all */ }
      }
      let rw;
      try {
        rw = rewrite(code);
      } catch (_) {
        rw = { sync: code, async: null }; // the tokenizer gave up: let V8 report on the code
      }
      try {
        script = new vm.Script(rw.sync, { filename });
      } catch (e) {
        if (!(e instanceof SyntaxError) || rw.async === null) throw e;
        try {
          script = new vm.Script(rw.async, { filename });
          isAsync = true;
        } catch (_) {
          throw e;
        }
      }
    } catch (e) {
      send(errorEvent(e, false));
      return;
    }
    try {
      let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
      if (isAsync) {
        value = await new Promise((resolve, reject) => {
          pendingInterrupt = () => { const err = new Error('interrupted'); err.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED'; reject(err); };
          value.then(resolve, reject);
        });
      }
      const ev = resultEvent(value);
      if (ev) send(ev);
    } catch (e) {
      send(errorEvent(e, false));
    } finally {
      pendingInterrupt = null;
    }
  }

  function configure(cmd) {
    if (cmd.cwd) process.chdir(cmd.cwd);
    for (const [k, v] of Object.entries(cmd.env || {})) process.env[k] = v;
    setModuleGlobals();
  }

  // restoreStdio reopens fds 0, 1 and 2 when the code closed them (in this order: an open takes
  // the lowest free number), so that later child processes find them. They are close-on-exec
  // (node opens so); libuv clears that when a child inherits them.
  function restoreStdio() {
    const sources = ['/dev/null', '/proc/self/fd/' + OUT_COPIES[0], '/proc/self/fd/' + OUT_COPIES[1]];
    for (let fd = 0; fd < 3; fd++) {
      try {
        fs.fstatSync(fd);
        continue;
      } catch (e) {
        if (e.code !== 'EBADF') continue;
      }
      try {
        const got = fs.openSync(sources[fd], fd === 0 ? fs.constants.O_RDONLY : fs.constants.O_WRONLY);
        if (got !== fd) fs.closeSync(got); // a lower one is free after all
      } catch (_) { /* nothing to do */ }
    }
  }

  const rl = readline.createInterface({ input: fs.createReadStream(null, { fd: CMD_FD }), crlfDelay: Infinity });
  const queue = [];
  let busy = false;
  async function pump() {
    if (busy) return;
    busy = true;
    while (queue.length) {
      const cmd = queue.shift();
      if (cmd.op === 'run') {
        nonce = cmd.n;
        try {
          await run(cmd.code);
        } catch (e) {
          // A driver bug must not lose "done": the agent waits for it.
          send({ type: 'error', name: 'InternalError', value: 'hutch: the driver failed to finish the run: ' + safeString(e, '<unprintable>'), traceback: [] });
        }
        restoreStdio();
        for (const fd of OUT_COPIES) {
          try { writeAll(fd, SYNC(nonce)); } catch (_) { /* the pipe is gone */ }
        }
        send({ type: 'done' });
      } else if (cmd.op === 'configure') {
        nonce = cmd.n;
        try {
          configure(cmd);
          send({ type: 'configured' });
        } catch (e) {
          send({ type: 'fatal', value: String(e && e.message) });
        }
      }
    }
    busy = false;
  }
  rl.on('line', (line) => {
    if (!line.trim()) return;
    queue.push(parse(line));
    pump();
  });
  rl.on('close', () => process.exit(0));
  send({ type: 'ready', pid: process.pid });
})
