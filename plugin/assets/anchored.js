// Anchored widget entry point (loaded as <script type="module">): reads the config the
// plugin injected, highlights a cited passage named in the URL, and adds the Ask button.
// The dialog module is loaded on first use.
import { icon } from './dom.js';
// highlight.js loads only when a passage is to be marked: most page views mark none.
let marker = null;
const loadMarker = () => (marker ||= import('./highlight.js'));
import { decodeSpec, pagePath, readParam, specFor, stripParam } from './text.js';

const DEFAULTS = {
  endpoint: '',
  root: './',
  page: '',
  placeholder: 'Ask the docs…',
  starters: [],
  attach: '',
  shortcut: 'a',
  title: 'Ask the docs',
  scopes: true,
  timeout: 30000,
  page_menu: ['copy', 'view', 'chatgpt', 'claude', 'mcp'],
  ask_links: true,
  site_name: '',
};

function readConfig() {
  const node = document.getElementById('anchored-config');
  let given = {};
  try {
    given = node ? JSON.parse(node.textContent) : {};
  } catch {
    console.warn('anchored: #anchored-config is not valid JSON; using defaults');
  }
  return { ...DEFAULTS, ...(given && typeof given === 'object' ? given : {}) };
}

const cfg = readConfig();
// Absolute site root, fixed now: with Material's instant navigation this module runs once
// while the page (and so the meaning of the relative `root`) changes.
const root = new URL(cfg.root || './', location.href);

/** This page's URL relative to the site root (e.g. "user-guide/config/"). */
function currentPage() {
  const here = decodeURIComponent(location.pathname);
  const base = decodeURIComponent(root.pathname);
  return here.startsWith(base) ? here.slice(base.length).replace(/(^|\/)index\.html$/, '$1') : String(cfg.page || '');
}

// ---- the highlighted passage and its small "clear" control
let pill = null;

function hidePill() {
  if (pill) pill.remove();
  pill = null;
}

function clear() {
  if (marker) marker.then((m) => m.clearHighlight(), () => {});
  hidePill();
}

function showPill(found) {
  hidePill();
  const btn = (label, onclick, cls = '') => {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'anchored-pill__btn ' + cls;
    b.textContent = label;
    b.addEventListener('click', onclick);
    return b;
  };
  pill = document.createElement('div');
  pill.className = 'anchored-ui anchored-pill';
  pill.setAttribute('role', 'status');
  pill.dataset.path = location.pathname;
  const text = document.createElement('span');
  text.className = 'anchored-pill__text';
  text.textContent = found ? 'Cited passage highlighted' : 'The cited passage was not found on this page; showing its section.';
  let back = 'Ask a question';
  try {
    if (JSON.parse(sessionStorage.getItem('anchored:conversation') || '[]').length) back = 'Back to answer';
  } catch {
    /* no storage: keep the neutral label */
  }
  pill.append(text, btn(back, () => openDialog()), btn(found ? 'Clear highlight' : 'Dismiss', clear, 'anchored-pill__clear'));
  pill.lastChild.setAttribute('aria-keyshortcuts', 'Escape');
  document.body.append(pill);
}

async function showPassage(spec, anchor, smooth) {
  const { highlight, reveal } = await loadMarker();
  const marks = highlight(spec, anchor);
  showPill(marks.length > 0); // first, so the passage can be placed clear of it
  if (marks.length) {
    reveal(marks, smooth, pill);
  } else if (anchor && document.getElementById(anchor)) {
    document.getElementById(anchor).scrollIntoView({ block: 'start' });
  }
  return marks;
}

function anchorOf(hash) {
  try {
    return decodeURIComponent(String(hash || '').replace(/^#/, ''));
  } catch {
    return '';
  }
}

/** Highlight what `?anchored-hl=` names, then drop the parameter from the address bar. */
async function highlightFromLocation() {
  const raw = readParam(location.search);
  if (raw == null) return;
  history.replaceState(history.state, '', location.pathname + stripParam(location.search) + location.hash);
  const spec = decodeSpec(raw);
  if (!spec) return;
  const marks = await showPassage(spec, anchorOf(location.hash), false);
  // Images and fonts still loading can move the passage: re-centre once when the page settles.
  if (marks.length && document.readyState !== 'complete') {
    const { reveal } = await loadMarker();
    addEventListener('load', () => marks[0].isConnected && reveal(marks, false, pill), { once: true });
  }
}

// History entries the reader left from the open dialog carry this flag: Back to one of
// them opens the dialog again, with the conversation (kept in sessionStorage).
const BACK = 'anchoredDialog';

function markEntry(on) {
  const state = history.state && typeof history.state === 'object' ? { ...history.state } : {};
  if (!!state[BACK] === on) return;
  if (on) state[BACK] = 1;
  else delete state[BACK];
  history.replaceState(state, '');
}

// Material's instant navigation overwrites history.state (scroll offsets), so a citation to
// another page also notes the page it leaves; coming back to it through history reopens too.
const LEFT = 'anchored:left';
let traversed = (performance.getEntriesByType?.('navigation')[0] || {}).type === 'back_forward';

function leaving() {
  try {
    sessionStorage.setItem(LEFT, location.pathname);
  } catch {
    /* no storage: only history.state remembers */
  }
}

function reopenIfMarked() {
  const flagged = !!(history.state && history.state[BACK]);
  let back = false;
  try {
    back = traversed && sessionStorage.getItem(LEFT) === location.pathname;
    if (back) sessionStorage.removeItem(LEFT);
  } catch {
    back = false;
  }
  traversed = false;
  if (!flagged && !back) return;
  if (flagged) markEntry(false);
  clear();
  openDialog();
}

/** A chip was activated: same page → highlight in place; other page → let the link navigate. */
function navigate(citation, href, event) {
  if (event.defaultPrevented || event.button > 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const u = new URL(href);
  if (u.origin !== location.origin || pagePath(u) !== pagePath(location)) {
    // Another page: the link navigates (a reload, or Material's instant navigation, which
    // keeps this dialog in the DOM), so get the dialog out of the way of the passage.
    if (dialog) dialog.close(false);
    leaving();
    return;
  }
  event.preventDefault();
  event.stopPropagation(); // keep Material's instant navigation out of it
  if (dialog) dialog.close(false);
  // A new entry, so that Back returns to the conversation instead of leaving the page.
  history.pushState({}, '', u.pathname + stripParam(u.search) + u.hash);
  showPassage(specFor(citation.highlight || citation.passage), anchorOf(u.hash), true);
}

addEventListener('popstate', () => {
  traversed = true;
  setTimeout(reopenIfMarked); // after the theme's own handler
});
addEventListener('pageshow', (e) => {
  if (!e.persisted) return; // back from the cache
  traversed = true;
  reopenIfMarked();
});

// ---- ordinary search as the fallback when the API is down
function searchHref(q) {
  return location.pathname + '?q=' + encodeURIComponent(q);
}

function openSearch(q) {
  const toggle = document.getElementById('__search'); // Material
  const mdInput = document.querySelector('[data-md-component="search-query"]');
  if (toggle && mdInput) {
    toggle.checked = true;
    toggle.dispatchEvent(new Event('change'));
    mdInput.value = q;
    mdInput.focus();
    mdInput.dispatchEvent(new KeyboardEvent('keyup'));
    return true;
  }
  const mkInput = document.getElementById('mkdocs-search-query'); // mkdocs theme
  const mkOpen = document.querySelector('[data-bs-target="#mkdocs_search_modal"]');
  if (mkInput && mkOpen) {
    mkOpen.click();
    mkInput.value = q;
    mkInput.dispatchEvent(new KeyboardEvent('keyup'));
    setTimeout(() => mkInput.focus(), 300);
    return true;
  }
  return false;
}

// ---- "Ask the docs: “…”" as a row of the theme's own search
async function askFromSearch(q) {
  await openDialog();
  if (q) dialog.ask(q);
}

function searchAsk() {
  if (cfg.search_ask === false) return;
  const md = document.querySelector('[data-md-component="search-query"]'); // Material
  const input = md || document.getElementById('mkdocs-search-query'); // mkdocs theme
  const results = md ? document.querySelector('[data-md-component="search-result"]') : document.getElementById('mkdocs-search-results');
  if (!input || !results || input.dataset.anchoredAsk) return;
  input.dataset.anchoredAsk = '1';
  const text = document.createElement('span');
  const inner = document.createElement('span');
  inner.className = 'anchored-search-ask__inner';
  inner.dataset.mdScore = '-1'; // Material's Enter opens the best-scored result: never this row
  inner.append(icon('ask'), text);
  const row = document.createElement('a');
  row.href = '#';
  row.className = 'anchored-ui anchored-search-ask' + (md ? ' md-search-result__link' : '');
  row.hidden = true;
  row.append(inner);
  // First row: Material's arrow keys reach it right after the box; Tab from the box in the mkdocs theme.
  if (md) results.prepend(row);
  else results.before(row);
  const update = () => {
    const q = input.value.trim();
    row.hidden = !q;
    text.textContent = `Ask the docs: “${q}”`;
  };
  input.addEventListener('input', update);
  input.addEventListener('keyup', update);
  update();
  row.addEventListener('click', (e) => {
    e.preventDefault();
    const q = input.value.trim().slice(0, 1000);
    const toggle = document.getElementById('__search');
    if (md && toggle) {
      toggle.checked = false;
      toggle.dispatchEvent(new Event('change'));
      askFromSearch(q);
      return;
    }
    const modal = document.getElementById('mkdocs_search_modal');
    if (!modal || !modal.classList.contains('show')) return void askFromSearch(q);
    let done = false;
    const go = () => done || ((done = true), askFromSearch(q));
    modal.addEventListener('hidden.bs.modal', go, { once: true });
    setTimeout(go, 600); // no Bootstrap event: go anyway
    const close = modal.querySelector('[data-bs-dismiss="modal"]');
    if (close) close.click();
  });
}

// ---- the Ask button and the dialog
let dialog = null;
let button = null;

async function openDialog(from) {
  const opener = from || (button && button.isConnected ? button : null);
  if (!dialog) {
    const { createDialog } = await import('./dialog.js');
    dialog = dialog || createDialog({ cfg, root, page: currentPage, navigate, searchHref, openSearch, closed: () => markEntry(false), leaving });
  }
  dialog.open(opener);
  markEntry(true); // while it is open, this history entry leads back to it
}

function makeButton() {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'anchored-ui anchored-open';
  b.setAttribute('aria-haspopup', 'dialog');
  b.setAttribute('aria-label', String(cfg.title || 'Ask the docs'));
  if (cfg.shortcut) {
    b.setAttribute('aria-keyshortcuts', String(cfg.shortcut));
    b.title = `${cfg.title || 'Ask the docs'} (${cfg.shortcut})`;
  }
  const svg = icon('ask');
  const label = document.createElement('span');
  label.className = 'anchored-open__label';
  label.textContent = 'Ask';
  b.append(svg, label);
  b.addEventListener('click', () => openDialog(b));
  return b;
}

/** Put the button next to the theme's search; a floating button when there is no known place. */
function attach(b) {
  const custom = cfg.attach && document.querySelector(cfg.attach);
  if (custom) return custom.after(b), 'custom';
  const mdSearch = document.querySelector('.md-header__inner .md-search');
  const mdHeader = document.querySelector('.md-header__inner');
  if (mdSearch || mdHeader) {
    b.classList.add('anchored-open--md');
    if (mdSearch) mdSearch.after(b);
    else mdHeader.insertBefore(b, mdHeader.querySelector('.md-header__source'));
    return 'material';
  }
  const mkSearch = document.querySelector('[data-bs-target="#mkdocs_search_modal"]');
  const navbar = document.querySelector('.navbar-nav.ms-md-auto, .navbar-nav.ml-auto, .navbar-right, .navbar-nav');
  if (mkSearch || navbar) {
    const li = document.createElement('li');
    li.className = 'nav-item anchored-nav-item';
    const item = mkSearch && mkSearch.closest('li');
    if (item) item.after(li);
    else navbar.append(li);
    // Below the navbar's breakpoint the menu collapses: keep the button in view, by the toggle.
    const toggle = document.querySelector('.navbar-toggler');
    const narrow = toggle && matchMedia('(max-width: 991.98px)');
    const place = () => {
      const bar = narrow && narrow.matches;
      b.classList.toggle('nav-link', !bar);
      b.classList.toggle('anchored-open--nav', !bar);
      b.classList.toggle('anchored-open--bar', !!bar);
      if (bar) toggle.before(b);
      else li.append(b);
    };
    place();
    if (narrow) narrow.addEventListener('change', place);
    return 'navbar';
  }
  const form = document.querySelector('[role="search"]');
  if (form) return form.after(b), 'search';
  b.classList.add('anchored-open--float');
  document.body.append(b);
  return 'float';
}

function editable(t) {
  return t instanceof Element && !!t.closest('input, textarea, select, [contenteditable=""], [contenteditable="true"], dialog[open]');
}

document.addEventListener('keydown', (e) => {
  if (e.defaultPrevented || e.isComposing || e.ctrlKey || e.metaKey || e.altKey) return;
  const searchOpen = document.getElementById('__search')?.checked || document.querySelector('.modal.show');
  if (e.key === 'Escape' && pill && !editable(e.target) && !searchOpen) {
    clear();
    return;
  }
  if (!cfg.shortcut || e.key !== cfg.shortcut || editable(e.target) || searchOpen) return;
  if (dialog && dialog.element.open) return;
  e.preventDefault();
  openDialog();
});

// ---- the page menu: its button by the page's title, the menu itself (pagemenu.js) on first use
let menuModule = null;
let menuWrap = null;

async function menuOf(wrap, b) {
  const { createMenu } = await (menuModule ||= import('./pagemenu.js'));
  return (wrap.menu ||= createMenu(wrap, b, { cfg, root, page: currentPage }));
}

function addPageMenu() {
  const entries = Array.isArray(cfg.page_menu) ? cfg.page_menu : [];
  if (!entries.length || (menuWrap && menuWrap.isConnected)) return;
  const h1 = document.querySelector('.md-content__inner h1, [role="main"] h1, main h1') || document.querySelector('h1');
  if (!h1) return;
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'anchored-menu__btn';
  b.setAttribute('aria-expanded', 'false');
  const label = document.createElement('span');
  label.textContent = entries.includes('copy') ? 'Copy page' : 'Page menu';
  if (entries.includes('copy')) b.append(icon('copy'));
  b.append(label, icon('chevron'));
  menuWrap = document.createElement('div');
  menuWrap.className = 'anchored-ui anchored-menu';
  menuWrap.append(b);
  const wrap = menuWrap;
  b.addEventListener('click', async () => (await menuOf(wrap, b)).toggle());
  b.addEventListener('keydown', async (e) => {
    if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
    e.preventDefault();
    (await menuOf(wrap, b)).open(e.key === 'ArrowUp' ? -1 : 0);
  });
  h1.before(wrap);
}

// ---- a question asked by a link: ?ask=… opens the box and asks it, in a new conversation
async function askFromLocation() {
  if (cfg.ask_links === false || !/[?&]ask=/.test(location.search)) return;
  const { readAsk, stripAsk } = await import('./pagelinks.js');
  const q = readAsk(location.search);
  history.replaceState(history.state, '', location.pathname + stripAsk(location.search) + location.hash);
  if (!q) return;
  await openDialog();
  dialog.askNew(q);
}

function onPage() {
  if (pill && pill.dataset.path !== location.pathname) hidePill(); // left over from the previous page
  if (!button || !button.isConnected) {
    button = button || makeButton();
    attach(button);
  }
  searchAsk();
  addPageMenu();
  highlightFromLocation();
  askFromLocation();
  reopenIfMarked();
}

onPage();
// Material's instant navigation swaps pages without reloading this module.
if (window.document$ && typeof window.document$.subscribe === 'function') window.document$.subscribe(onPage);
