// The page menu (loaded on first use; anchored.js makes its button): copy the page as
// Markdown, view it, open it in an assistant, use the docs in an editor through MCP.
// A disclosure: the button says whether it is open (aria-expanded), the entries are
// ordinary buttons and links reached with Tab or the arrow keys, Esc closes it.
// Nothing is fetched until an entry is used, and then only the page's own Markdown.
import { copyText } from './clipboard.js';
import { el, icon } from './dom.js';
import { MENU_ENTRIES, assistantLink, mcpSnippets, serverName, twinPath } from './pagelinks.js';

// The menu's own icons (copy is dom.js's).
const PATHS = {
  doc: 'M14 2H6a2 2 0 0 0-2 2v16a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V8l-6-6m4 18H6V4h7v5h5v11M8 12h8v2H8v-2m0 4h8v2H8v-2z',
  external: 'M14 3v2h3.6l-9.8 9.8 1.4 1.4L19 6.4V10h2V3h-7m5 16H5V5h7V3H5a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h14a2 2 0 0 0 2-2v-7h-2v7z',
  code: 'M8 3a2 2 0 0 0-2 2v4a2 2 0 0 1-2 2H3v2h1a2 2 0 0 1 2 2v4a2 2 0 0 0 2 2h2v-2H8v-5a2 2 0 0 0-2-2 2 2 0 0 0 2-2V5h2V3H8m8 0a2 2 0 0 1 2 2v4a2 2 0 0 0 2 2h1v2h-1a2 2 0 0 0-2 2v4a2 2 0 0 1-2 2h-2v-2h2v-5a2 2 0 0 1 2-2 2 2 0 0 1-2-2V5h-2V3h2z',
};
// entry -> [label, what it does, icon]
const ENTRIES = {
  copy: ['Copy page as Markdown', 'For pasting into a chat or a prompt', 'copy'],
  view: ['View as Markdown', 'This page as plain text', 'doc'],
  chatgpt: ['Open in ChatGPT', 'Ask questions about this page', 'external'],
  claude: ['Open in Claude', 'Ask questions about this page', 'external'],
  mcp: ['Use these docs in your editor', 'Connect a coding agent (MCP)', 'code'],
};
const NO_TWIN = 'This page has no Markdown version';
const missing = new Set(); // twins that answered 404 here
let uid = 0;

/**
 * The menu of `wrap`, opened by `button` (both made by anchored.js). `env`: {cfg, root:
 * URL of the site root, page(): this page's URL relative to it}. Returns {open(at), close(refocus), toggle()}.
 */
export function createMenu(wrap, button, env) {
  const id = 'anchored-menu-' + ++uid;
  const status = el('p', { class: 'anchored-menu__status', role: 'status' });
  const list = el('ul', { class: 'anchored-menu__list', 'aria-label': 'Page menu' });
  const panel = el('div', { class: 'anchored-menu__panel', id, hidden: true }, list, status);
  button.setAttribute('aria-controls', id);
  wrap.append(panel);
  let editor = null;

  const entries = () => (Array.isArray(env.cfg.page_menu) ? env.cfg.page_menu : MENU_ENTRIES).filter((e) => MENU_ENTRIES.includes(e));
  const items = () => [...list.querySelectorAll('.anchored-menu__item')];
  const say = (text) => (status.textContent = text);

  function item(entry, twin) {
    const [label, note, name] = ENTRIES[entry];
    const off = (entry === 'copy' || entry === 'view') && missing.has(twin);
    const kids = [
      icon(name, PATHS[name]),
      el(
        'span',
        { class: 'anchored-menu__text' },
        el('span', { class: 'anchored-menu__label', text: label }),
        el('span', { class: 'anchored-menu__note', text: off ? NO_TWIN : note }),
      ),
    ];
    const props = { class: 'anchored-menu__item', 'data-entry': entry, 'aria-disabled': off ? 'true' : null };
    if (entry === 'copy') return el('button', { ...props, type: 'button', onclick: () => copyPage(twin) }, kids);
    if (entry === 'mcp') return el('button', { ...props, type: 'button', onclick: showEditor }, kids);
    // Plain links: the assistant's site is not contacted before the reader follows one.
    const href = entry === 'view' ? twin : assistantLink(entry, twin);
    const follow = (e) => (entry === 'view' && missing.has(twin) ? (e.preventDefault(), say(NO_TWIN)) : close(false));
    return el('a', { ...props, href, target: '_blank', rel: 'noopener noreferrer', onclick: follow }, kids, el('span', { class: 'anchored-sr', text: ' (opens in a new tab)' }));
  }

  function markMissing(twin) {
    missing.add(twin);
    for (const i of items()) {
      if (i.dataset.entry !== 'copy' && i.dataset.entry !== 'view') continue;
      i.setAttribute('aria-disabled', 'true');
      i.querySelector('.anchored-menu__note').textContent = NO_TWIN;
    }
  }

  async function copyPage(twin) {
    if (missing.has(twin)) return say(NO_TWIN);
    say('Copying…');
    const text = fetch(twin, { credentials: 'same-origin', headers: { Accept: 'text/markdown, text/plain;q=0.9' } }).then((r) => {
      // A server that answers every path with an HTML page has no twin either.
      if (r.status === 404 || (r.ok && /html/i.test(r.headers.get('Content-Type') || ''))) throw new Error('missing');
      if (!r.ok) throw new Error('failed');
      return r.text();
    });
    try {
      say((await copyText(text, wrap)) ? 'Copied the page as Markdown' : 'The browser did not allow copying');
    } catch (e) {
      if (e.message === 'missing') {
        markMissing(twin);
        say(NO_TWIN);
      } else {
        say('Copy failed: the Markdown version could not be loaded');
      }
    }
  }

  function copyBtn(text, what) {
    const span = el('span', { text: 'Copy' });
    return el(
      'button',
      {
        type: 'button',
        class: 'anchored-code__copy',
        'aria-label': 'Copy ' + what,
        onclick: async () => {
          span.textContent = (await copyText(text, editor)) ? 'Copied' : 'Copy failed';
          setTimeout(() => (span.textContent = 'Copy'), 2000);
        },
      },
      icon('copy'),
      span,
    );
  }

  function block(label, lang, text) {
    return el(
      'div',
      { class: 'anchored-code' },
      el('div', { class: 'anchored-code__bar' }, el('span', { class: 'anchored-code__label', text: label }), copyBtn(text, label)),
      el('pre', { class: 'anchored-pre' }, el('code', { class: lang ? 'language-' + lang : null, text })),
    );
  }

  function makeEditor(url) {
    const name = serverName(env.cfg.site_name, location.hostname);
    const titleId = id + '-mcp';
    const d = el(
      'dialog',
      { class: 'anchored-ui anchored-dialog anchored-editor', 'aria-labelledby': titleId },
      el(
        'div',
        { class: 'anchored-frame' },
        el(
          'div',
          { class: 'anchored-head' },
          el('h2', { class: 'anchored-title', id: titleId, text: 'Use these docs in your editor' }),
          el('button', { type: 'button', class: 'anchored-icon-btn', title: 'Close (Esc)', 'aria-label': 'Close', onclick: () => d.close() }, icon('close')),
        ),
        el(
          'div',
          { class: 'anchored-body' },
          el('p', {
            text: 'Coding agents (Claude Code, Cursor, VS Code and others) can search these docs, ask them and read their sections through MCP, the Model Context Protocol. The server:',
          }),
          block('MCP server URL', '', url),
          mcpSnippets(url, name).map((s) => block(s.label, s.lang, s.text)),
        ),
      ),
    );
    d.addEventListener('keydown', (e) => e.stopPropagation()); // not the page's shortcuts
    d.addEventListener('click', (e) => e.target === d && d.close()); // the backdrop
    d.addEventListener('close', () => button.isConnected && button.focus());
    return d;
  }

  async function showEditor() {
    close(false);
    // The function's address as the ask box makes it (widget_endpoint, else the site's origin).
    const { apiUrl } = await import('./api.js');
    editor ||= makeEditor(apiUrl(env.cfg.endpoint, 'mcp'));
    if (!editor.isConnected) document.body.append(editor);
    if (!editor.open) editor.showModal();
    editor.querySelector('.anchored-code__copy').focus();
  }

  function onOutside(e) {
    if (!wrap.contains(e.target)) close(false);
  }

  function open(at = 0) {
    if (panel.hidden) {
      const twin = new URL(twinPath(env.page()), env.root).href;
      list.replaceChildren(...entries().map((e) => el('li', {}, item(e, twin))));
      say('');
      panel.hidden = false;
      panel.style.right = '';
      button.setAttribute('aria-expanded', 'true');
      // Keep it on screen: it opens under the button, aligned to its right edge.
      const left = panel.getBoundingClientRect().left;
      if (left < 8) panel.style.right = left - 8 + 'px';
      document.addEventListener('pointerdown', onOutside, true);
    }
    const all = items();
    if (all.length) all[(at + all.length) % all.length].focus();
  }

  function close(refocus = true) {
    if (panel.hidden) return;
    panel.hidden = true;
    button.setAttribute('aria-expanded', 'false');
    document.removeEventListener('pointerdown', onOutside, true);
    if (refocus) button.focus();
  }

  wrap.addEventListener('keydown', (e) => {
    if (panel.hidden) return;
    if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation(); // the page's own Esc (a highlight's clear) is not this one
      return close(true);
    }
    if (e.target === button) return; // its own arrow keys open the menu (anchored.js)
    const all = items();
    const at = all.indexOf(document.activeElement);
    const to = { ArrowDown: at + 1, ArrowUp: at < 0 ? -1 : at - 1, Home: 0, End: -1 }[e.key];
    if (to === undefined || !all.length) return;
    e.preventDefault();
    all[(to + all.length) % all.length].focus();
  });
  // Tab past the last entry (or back past the button) closes it.
  wrap.addEventListener('focusout', (e) => {
    if (e.relatedTarget && !wrap.contains(e.relatedTarget)) close(false);
  });

  return { open, close, toggle: () => (panel.hidden ? open(0) : close(true)) };
}
