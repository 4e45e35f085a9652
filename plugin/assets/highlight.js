// Highlight a cited passage on the live page: walk text nodes (like Material's `?h=`),
// match on a whitespace-free, lower-case key, wrap the matched ranges in <mark>.
import { keyChars, findSpan, toKey } from './text.js';

export const MARK_CLASS = 'anchored-hl';

// Subtrees whose text is not in the index: the same list as build_index/html.py (_DROP),
// so the page text and the back end's section text line up character for character.
const IGNORE =
  "script,style,noscript,template,svg,canvas,iframe,object,nav,footer,button,select,textarea," +
  "aside:not([class*='footnote']),.headerlink,.md-source-file,.md-feedback,.md-content__button," +
  ".linenos,.linenodiv,[hidden],[aria-hidden='true'],[style*='display:none' i]," +
  "[style*='display: none' i],[data-search-exclude]:not(h1,h2,h3,h4,h5,h6),.anchored-ui";
// Other generators' permalinks: a short symbol link inside a heading ("#", "§", "🔗").
const PERMALINK = /^[^\p{L}\p{N}_]{0,2}$/u;

function ignored(el) {
  if (el.matches(IGNORE)) return true;
  return (
    el.tagName === 'A' &&
    (el.getAttribute('href') || '').startsWith('#') &&
    !el.hasAttribute('id') &&
    !el.hasAttribute('name') &&
    !!el.closest('h1,h2,h3,h4,h5,h6') &&
    PERMALINK.test(el.textContent.trim())
  );
}

/** The element that holds the page's content in Material, mkdocs/readthedocs themes, or anything else. */
export function contentRoot(doc = document) {
  return (
    doc.querySelector('article.md-content__inner') ||
    doc.querySelector('[role="main"]') ||
    doc.querySelector('main') ||
    doc.querySelector('article') ||
    doc.body
  );
}

const BLOCKISH = /^(block|flex|grid|table|list-item|flow-root)/;

/** A whitespace-only text node that renders (inside code or between inline content). */
function flowing(node) {
  const parent = node.parentElement;
  if (!parent) return false;
  if (parent.closest('pre, code')) return true;
  const side = (n) => !n || (n.nodeType === 1 && BLOCKISH.test(getComputedStyle(n).display));
  if (BLOCKISH.test(getComputedStyle(parent).display) && (side(node.previousSibling) || side(node.nextSibling))) return false;
  return !/^(TR|TBODY|THEAD|TFOOT|TABLE|UL|OL|DL|COLGROUP)$/.test(parent.tagName);
}

/** The text of an element the index keeps (the ignored subtrees left out). */
function visibleText(el) {
  return textNodes(el).map((n) => n.data).join('');
}

/** Display of an element that starts a block (or a cell, a row, an item): marks stop there. */
function isBlock(el) {
  return BLOCKISH.test(getComputedStyle(el).display) || /^(PRE|TD|TH|LI|TR)$/.test(el.tagName);
}

/**
 * Mark key range [a, b): the text nodes it covers (the two at its ends split at its ends),
 * each lifted to the largest inline element it fills (inline code, bold, a link, a code
 * token), and runs of neighbouring covered nodes wrapped in one <mark> per block: one
 * continuous mark across inline elements and code tokens. Whitespace between blocks
 * (cells, items, paragraphs) is not rendered and stays outside.
 */
function markSpan(doc, root, nodes, nodeOf, offOf, a, b) {
  const firstNode = nodeOf[a];
  const lastNode = nodeOf[b - 1];
  const covered = [];
  for (let ni = firstNode; ni <= lastNode; ni++) {
    let node = nodes[ni];
    const s = ni === firstNode ? offOf[a] : 0;
    const e = ni === lastNode ? offOf[b - 1] + 1 : node.data.length;
    if (!node.data.slice(s, e).trim() && !flowing(node)) continue;
    if (e < node.data.length) node.splitText(e);
    if (s > 0) node = node.splitText(s);
    covered.push(node);
  }
  const inSpan = new Set(covered);
  const full = (el) => textNodes(el).every((t) => inSpan.has(t));
  const tops = [];
  for (const node of covered) {
    let top = node;
    while (top.parentElement && top.parentElement !== root && !isBlock(top.parentElement) && full(top.parentElement)) {
      top = top.parentElement;
    }
    if (tops[tops.length - 1] !== top && !(tops.length && tops[tops.length - 1].contains(top))) tops.push(top);
  }
  // Runs of siblings: consecutive tops with nothing but covered nodes between them.
  const marks = [];
  let run = [];
  const flush = () => {
    if (!run.length) return;
    const mark = doc.createElement('mark');
    mark.className = MARK_CLASS;
    run[0].parentNode.insertBefore(mark, run[0]);
    for (const n of run) mark.appendChild(n);
    marks.push(mark);
    run = [];
  };
  for (const top of tops) {
    const prev = run[run.length - 1];
    if (prev && prev.nextSibling !== top) flush();
    run.push(top);
  }
  flush();
  return marks;
}

function textNodes(root) {
  const doc = root.ownerDocument;
  const walker = doc.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
    acceptNode(n) {
      if (n.nodeType === 1) return ignored(n) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_SKIP;
      return NodeFilter.FILTER_ACCEPT;
    },
  });
  const out = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) out.push(n);
  return out;
}

/** Remove every highlight mark and merge the text nodes back. */
export function clearHighlight(doc = document) {
  for (const b of doc.querySelectorAll('.' + MARK_CLASS + '-block')) b.classList.remove(MARK_CLASS + '-block');
  const parents = new Set();
  for (const m of doc.querySelectorAll('mark.' + MARK_CLASS)) {
    const p = m.parentNode;
    while (m.firstChild) p.insertBefore(m.firstChild, m);
    p.removeChild(m);
    parents.add(p);
  }
  for (const p of parents) p.normalize();
}

function openAncestors(el) {
  for (let n = el.parentElement; n; n = n.parentElement) {
    if (n.tagName === 'DETAILS' && !n.open) n.open = true;
    // Material / pymdownx tabs: select the tab whose panel holds the passage.
    if (n.parentElement && n.parentElement.classList.contains('tabbed-content')) {
      const set = n.closest('.tabbed-set');
      const idx = [...n.parentElement.children].indexOf(n);
      const input = set && set.querySelectorAll(':scope > input')[idx];
      if (input && !input.checked) input.click();
    }
  }
}

/**
 * Highlight `spec` ({start, end?, len?}) in the section that starts at element `#anchor`
 * (or anywhere in the content when not found there). Returns the marks (empty when the
 * passage is not on the page).
 */
export function highlight(spec, anchor, doc = document) {
  clearHighlight(doc);
  if (!spec) return [];
  const root = contentRoot(doc);
  const nodes = textNodes(root);
  const key = [];
  const nodeOf = [];
  const offOf = [];
  nodes.forEach((node, ni) => {
    keyChars(node.data, key, (i) => {
      nodeOf.push(ni);
      offOf.push(i);
    });
  });
  const text = key.join('');

  // Key position where the anchored section starts.
  let from = 0;
  const target = anchor ? doc.getElementById(anchor) : null;
  if (target) {
    const first = nodes.findIndex(
      (n) => target.contains(n) || target.compareDocumentPosition(n) & Node.DOCUMENT_POSITION_FOLLOWING,
    );
    from = text.length;
    if (first >= 0) for (let k = 0; k < nodeOf.length; k++) if (nodeOf[k] >= first) { from = k; break; }
  }
  const span = findSpan(text, spec, from) || (from ? findSpan(text, spec, 0) : null);
  if (!span) return [];

  const [a, b] = span;
  const marks = markSpan(doc, root, nodes, nodeOf, offOf, a, b);
  if (marks.length) {
    // A table row marked whole is shaded whole: its cells' padding joins the marks.
    const rows = new Set(marks.map((m) => m.closest('tr')).filter((r) => r && root.contains(r)));
    for (const row of rows) {
      const cells = [...row.children].filter((c) => c.textContent.trim());
      if (cells.every((c) => toKey([...c.querySelectorAll('mark.' + MARK_CLASS)].map((m) => m.textContent).join('')) === toKey(visibleText(c)))) {
        row.classList.add(MARK_CLASS + '-block');
      }
    }
    marks[0].classList.add(MARK_CLASS + '--first');
    marks[marks.length - 1].classList.add(MARK_CLASS + '--last');
    openAncestors(marks[0]);
  }
  return marks;
}

/**
 * Scroll the passage into the middle of the free part of the viewport — below a fixed
 * header, above `below` (an overlay at the bottom, e.g. the pill) — or, when it is taller,
 * its start to the top of that part; then move focus to it without scrolling again.
 */
export function reveal(marks, smooth = false, below = null) {
  const first = marks[0];
  if (!first) return;
  smooth = smooth && !matchMedia('(prefers-reduced-motion: reduce)').matches;
  const header = document.querySelector('.md-header, .navbar.fixed-top');
  const hb = header ? header.getBoundingClientRect() : null;
  const top = hb && hb.top <= 0 && hb.bottom > 0 ? hb.bottom + 8 : 8;
  const bottom = (below ? below.getBoundingClientRect().top : innerHeight) - 8;
  const rects = marks.map((m) => m.getBoundingClientRect()).filter((r) => r.width || r.height);
  if (!rects.length) {
    first.scrollIntoView({ block: 'center', behavior: smooth ? 'smooth' : 'auto' });
  } else {
    const start = Math.min(...rects.map((r) => r.top));
    const end = Math.max(...rects.map((r) => r.bottom));
    const room = bottom - top;
    const want = end - start <= room ? top + (room - (end - start)) / 2 : top;
    window.scrollBy({ top: start - want, behavior: smooth ? 'smooth' : 'auto' });
  }
  first.setAttribute('tabindex', '-1');
  first.focus({ preventScroll: true });
}
