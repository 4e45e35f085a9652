// The "Ask the docs" dialog: question box, staged progress, the conversation (follow-ups),
// scope, the passage preview. Answers are drawn by answer.js; data only becomes text nodes.
import { liveView, renderTurnBody } from './answer.js';
import { apiUrl, postJSON, readAnswer, readSentence, readSources } from './api.js';
import { el, icon } from './dom.js';
import { languageControl } from './languages.js';
import { versionControl } from './versions.js';
import { siteLink } from './markdown.js';
import { questionLink } from './pagelinks.js';
import { answerText, citationHref, citationPath, prefixLabel, sectionPrefix } from './text.js';

const STORE = 'anchored:conversation';
// What the status line says: until the query function reports a stage, and then for each
// `stage` event it streams (a buffered reply reports none).
const WAITING = 'Waiting for the docs assistant…';
const STAGES = {
  retrieving: 'Searching the docs…',
  generating: 'Writing the answer…',
  verifying: 'Checking the answer against the docs…',
};
function load() {
  try {
    const turns = JSON.parse(sessionStorage.getItem(STORE) || '[]');
    return Array.isArray(turns) ? turns.filter((t) => t && typeof t.q === 'string' && t.reply) : [];
  } catch {
    return [];
  }
}

function save(turns) {
  try {
    const keep = turns.filter((t) => t.reply).slice(-6).map(({ q, reply, rating }) => ({ q, reply, rating }));
    sessionStorage.setItem(STORE, JSON.stringify(keep));
  } catch {
    /* storage full or disabled: the conversation just isn't kept across pages */
  }
}

/**
 * Create the dialog. `env`: {cfg, root: URL, page(): string, navigate(citation, href, event),
 * searchHref(q): string, openSearch(q): boolean, closed(): the reader closed it,
 * leaving(): a link in an answer takes the reader to another page}. Returns {open(opener), close(), element}.
 */
export function createDialog(env) {
  const { cfg } = env;
  let turns = load();
  let busy = null; // {ctl} while a question is in flight
  let opener = null;
  const uid = 'anchored-' + Math.random().toString(36).slice(2, 8);

  const hrefFor = (c) => citationHref(c, env.root);

  // ---- skeleton
  const tip = el('div', { class: 'anchored-tip', role: 'tooltip', id: uid + '-tip', hidden: true });
  const scopeSel = el('select', { class: 'anchored-scope__select', id: uid + '-scope' });
  const scope = el('label', { class: 'anchored-scope', for: uid + '-scope' }, 'Search in ', scopeSel);
  const language = languageControl(cfg, uid); // multilingual docs: the reader's language first
  const version = versionControl(cfg, env.root, uid); // versioned docs (mike): this page's or the latest
  const log = el('div', { class: 'anchored-log', 'aria-live': 'polite', 'aria-relevant': 'additions' });
  const intro = el(
    'div',
    { class: 'anchored-intro' },
    el('p', { text: 'Answers are written only from these docs, and every sentence links to the passage it comes from.' }),
    el(
      'ul',
      { class: 'anchored-starters', 'aria-label': 'Example questions' },
      (Array.isArray(cfg.starters) ? cfg.starters : []).slice(0, 4).map((s) =>
        el('li', {}, el('button', { type: 'button', class: 'anchored-starter', onclick: () => ask(String(s)) }, String(s))),
      ),
    ),
  );
  const body = el('div', { class: 'anchored-body' }, intro, log);
  const stage = el('span', { class: 'anchored-stage' });
  const cancelBtn = el('button', { type: 'button', class: 'anchored-btn', onclick: () => busy && busy.ctl.abort() }, 'Cancel');
  const status = el('div', { class: 'anchored-status', role: 'status' }, el('span', { class: 'anchored-spinner', 'aria-hidden': 'true' }), stage);
  const input = el('input', {
    type: 'text',
    class: 'anchored-input',
    id: uid + '-q',
    name: 'question',
    placeholder: String(cfg.placeholder || 'Ask the docs…'),
    autocomplete: 'off',
    maxlength: '1000',
    enterkeyhint: 'send',
  });
  const sendBtn = el('button', { type: 'submit', class: 'anchored-send', 'aria-label': 'Ask' }, icon('send'));
  const form = el(
    'form',
    {
      class: 'anchored-form',
      onsubmit: (e) => {
        e.preventDefault();
        ask(input.value);
      },
    },
    el('label', { class: 'anchored-sr', for: uid + '-q', text: 'Your question' }),
    input,
    sendBtn,
    cancelBtn,
  );
  const titleId = uid + '-title';
  const dialog = el(
    'dialog',
    { class: 'anchored-ui anchored-dialog', 'aria-labelledby': titleId },
    el(
      'div',
      { class: 'anchored-frame' },
      el(
        'div',
        { class: 'anchored-head' },
        el('h2', { class: 'anchored-title', id: titleId, text: String(cfg.title || 'Ask the docs') }),
        scope,
        language.element,
        version.element,
        el('button', { type: 'button', class: 'anchored-icon-btn', title: 'New conversation', 'aria-label': 'New conversation', onclick: reset }, icon('reset')),
        el('button', { type: 'button', class: 'anchored-icon-btn', title: 'Close (Esc)', 'aria-label': 'Close', onclick: () => close() }, icon('close')),
      ),
      body,
      status,
      form,
      el('p', { class: 'anchored-foot', text: 'Answers can be incomplete: check the linked passages.' }),
    ),
    tip,
  );
  cancelBtn.hidden = true;
  status.hidden = true;

  function refreshScope() {
    const prefix = cfg.scopes === false ? '' : sectionPrefix(env.page());
    const was = scopeSel.value;
    scopeSel.replaceChildren(el('option', { value: '' }, 'Whole site'));
    if (prefix) scopeSel.append(el('option', { value: prefix }, 'This section: ' + prefixLabel(prefix)));
    scopeSel.value = was === prefix ? prefix : '';
    scope.hidden = !prefix;
  }

  // ---- preview of a cited passage (hover or focus on a chip)
  let tipFor = null;
  function showTip(chip, c) {
    const passage = c.passage.length > 420 ? c.passage.slice(0, 400).trimEnd() + ' …' : c.passage;
    tip.replaceChildren(
      el('span', { class: 'anchored-tip__path', text: citationPath(c) }),
      el('span', { class: 'anchored-tip__text', text: passage }),
    );
    tip.hidden = false;
    tipFor = chip;
    chip.setAttribute('aria-describedby', tip.id);
    const d = dialog.getBoundingClientRect();
    const r = chip.getBoundingClientRect();
    // The sentence the chip belongs to (and the chip): the preview goes below it, else above.
    let s = chip.previousElementSibling;
    while (s && !s.classList.contains('anchored-sentence')) s = s.previousElementSibling;
    const boxes = [r, ...(s ? [...s.getClientRects()] : [])];
    const above = Math.min(...boxes.map((b) => b.top)) - d.top;
    const under = Math.max(...boxes.map((b) => b.bottom)) - d.top;
    const w = tip.offsetWidth;
    const h = tip.offsetHeight;
    const left = Math.max(8, Math.min(r.left - d.left, d.width - w - 8));
    let top = under + 6;
    if (top + h > d.height - 8) top = above - h - 6 >= 8 ? above - h - 6 : Math.max(8, d.height - h - 8);
    tip.style.left = left + 'px';
    tip.style.top = top + 'px';
  }
  function hideTip() {
    if (tipFor) tipFor.removeAttribute('aria-describedby');
    tip.hidden = true;
    tipFor = null;
  }

  const ctx = {
    hrefFor,
    navigate: (c, href, e) => env.navigate(c, href, e),
    showTip,
    hideTip,
    sendFeedback: (payload) => postJSON(apiUrl(cfg.endpoint, 'v1/feedback'), payload, { timeout: 15000 }),
    saved: () => save(turns),
    host: dialog,
    retry: (turn) => ask(turn.q, turn),
    linkFor: (href) => {
      const u = siteLink(href, env.root);
      return u ? u.href : null;
    },
    follow: (e) => {
      if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      close(false);
      if (env.leaving) env.leaving();
    },
    searchHref: (q) => env.searchHref(q),
    // "Copy link": this page with ?ask= (off with widget_ask_links: false)
    questionLink: cfg.ask_links === false ? null : (q) => questionLink(location.href, q),
    openSearch: (q) => {
      if (!env.openSearch(q)) return false;
      close(false);
      if (env.closed) env.closed();
      return true;
    },
  };

  function renderTurn(turn) {
    const a = el('div', { class: 'anchored-a' }, renderTurnBody(ctx, turn));
    const node = el(
      'article',
      { class: turn.live ? 'anchored-turn anchored-turn--live' : 'anchored-turn' },
      el('p', { class: 'anchored-q' }, el('span', { class: 'anchored-sr', text: 'You asked: ' }), turn.q),
      a,
    );
    if (turn.node) turn.node.replaceWith(node);
    turn.node = node;
    return node;
  }

  function renderAll() {
    log.replaceChildren(...turns.map(renderTurn));
    intro.hidden = turns.length > 0;
    input.placeholder = turns.length ? 'Ask a follow-up…' : String(cfg.placeholder || 'Ask the docs…');
  }

  function setBusy(on) {
    status.hidden = !on;
    cancelBtn.hidden = !on;
    sendBtn.hidden = on;
    input.readOnly = on;
    // While an answer streams into the live region, screen readers wait for the final one.
    if (on) log.setAttribute('aria-busy', 'true');
    else log.removeAttribute('aria-busy');
    if (!on) busy = null;
  }

  function history() {
    return turns
      .filter((t) => t.reply)
      .slice(-3)
      .flatMap((t) => [
        { role: 'user', content: t.q },
        { role: 'assistant', content: answerText(t.reply.answer) || 'The docs don’t seem to cover this.' },
      ]);
  }

  async function ask(question, existing) {
    const q = String(question || '').trim();
    if (!q) return;
    if (busy) busy.ctl.abort(); // a new question replaces the one in flight
    const body = { question: q };
    const hist = history();
    if (hist.length) body.history = hist;
    if (scopeSel.value) body.scope = { include: [scopeSel.value] };
    language.apply(body); // lang (this page's), other_languages when the reader includes them
    if (version.value()) body.version = version.value();
    const turn = existing || { q };
    delete turn.error;
    delete turn.cancelled;
    delete turn.reply;
    if (!existing) turns.push(turn);
    input.value = '';
    intro.hidden = true;
    turn.live = liveView(ctx);
    const node = renderTurn(turn);
    if (!existing) log.append(node);
    node.scrollIntoView({ block: 'nearest' });

    const ctl = new AbortController();
    const mine = () => busy && busy.ctl === ctl;
    busy = { ctl };
    stage.textContent = WAITING;
    setBusy(true);
    const live = turn.live;
    const onEvent = (name, data) => {
      if (!mine() || turn.live !== live) return;
      if (name === 'stage') {
        if (STAGES[data.stage]) stage.textContent = STAGES[data.stage];
      } else if (name === 'sources') {
        live.sources(version.adopt({ version: body.version, citations: readSources(data) }).citations); // another version's pages when asked
      } else if (name === 'sentence') {
        const s = readSentence(data);
        if (s) live.sentence(s);
      }
    };
    try {
      const data = await postJSON(apiUrl(cfg.endpoint, 'v1/ask'), body, {
        signal: ctl.signal,
        timeout: Number(cfg.timeout) || 30000,
        onEvent,
      });
      turn.reply = version.adopt(readAnswer(data));
    } catch (e) {
      if (e.kind === 'aborted') {
        turn.cancelled = true;
        if (mine() && turns.includes(turn)) input.value = q;
      } else {
        turn.error = { kind: e.kind || 'server', message: String(e.message), detail: e.detail || '', retryAfter: e.retryAfter || 0 };
      }
    }
    if (turn.live === live) delete turn.live;
    try {
      renderTurn(turn); // the final record replaces everything the stream showed
    } catch {
      // A reply this widget cannot show still ends its turn: said so, saved, the box freed.
      delete turn.reply;
      turn.error = { kind: 'display', message: 'The answer could not be shown.', detail: '', retryAfter: 0 };
      renderTurn(turn);
    }
    save(turns);
    if (!mine()) return; // a newer question owns the status line and the input now
    setBusy(false);
    input.placeholder = 'Ask a follow-up…';
    // Keep typing follow-ups: back to the box unless the reader moved on inside the dialog.
    const at = document.activeElement;
    if (dialog.open && (!dialog.contains(at) || at === cancelBtn || at === input)) input.focus();
  }

  function reset() {
    if (busy) busy.ctl.abort();
    turns = [];
    save(turns);
    renderAll();
    input.value = '';
    input.focus();
  }

  // A question from a link stands alone: a new conversation, no earlier turns as history.
  function askNew(q) {
    reset();
    ask(q);
  }

  function open(from) {
    opener = from && from !== document.body ? from : null;
    refreshScope();
    if (!dialog.isConnected) document.body.append(dialog);
    if (!dialog.open) dialog.showModal();
    body.scrollTop = body.scrollHeight; // the latest answer
    input.focus();
  }

  function close(restore = true) {
    if (busy) busy.ctl.abort(); // a closed dialog stops its answer
    hideTip();
    if (restore && env.closed) env.closed(); // the reader closed it (not a citation taking them away)
    if (dialog.open) dialog.close();
    if (restore && opener && opener.isConnected) opener.focus();
  }

  dialog.addEventListener('close', () => {
    hideTip();
    if (opener && opener.isConnected && !dialog.contains(document.activeElement) && document.activeElement === document.body) opener.focus();
  });
  dialog.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !tip.hidden) {
      e.preventDefault(); // first Esc only hides the preview
      hideTip();
    }
    // Keys typed here are not the page's shortcuts (Material's "s", the mkdocs theme's "n"/"p").
    e.stopPropagation();
  });
  dialog.addEventListener('cancel', (e) => {
    e.preventDefault();
    close();
  });
  // A click on the backdrop (outside the frame) closes the dialog.
  dialog.addEventListener('click', (e) => {
    if (e.target === dialog) close();
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowUp' && !input.value && turns.length) input.value = turns[turns.length - 1].q;
  });

  renderAll();
  return { open, close, element: dialog, ask, askNew };
}
