// The widget's weight and its rules on data handling, checked on the shipped files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { HERE } from './helpers.js';

const ASSETS = join(HERE, '..', '..', 'plugin', 'assets');
const FILES = readdirSync(ASSETS).filter((f) => /\.(js|css)$/.test(f));

const gz = (f) => gzipSync(readFileSync(join(ASSETS, f)), { level: 9 }).length;

// What every page loads: the stylesheet, the entry module and what it imports statically.
function eager() {
  const seen = new Set(['anchored.css']);
  const visit = (f) => {
    if (seen.has(f)) return;
    seen.add(f);
    const src = readFileSync(join(ASSETS, f), 'utf8');
    for (const m of src.matchAll(/^import\s[^'"]*from\s*['"]\.\/([\w-]+\.js)['"]/gm)) visit(m[1]);
  };
  visit('anchored.js');
  return [...seen];
}

// Everything: 30 KB until streaming, cited spans, versions and languages (2026-12-01) took it
// to about 37 KB, the page menu and question links (2026-12-03) to about 45 KB; all of that
// loads only when the dialog or the page menu opens or a passage is marked.
test('a page loads at most 16 KB gzipped before the dialog opens; everything is at most 48 KB', (t) => {
  const first = eager();
  const firstGz = first.reduce((n, f) => n + gz(f), 0);
  const allGz = FILES.reduce((n, f) => n + gz(f), 0);
  t.diagnostic(`on every page: ${first.join(', ')} = ${firstGz} bytes gzipped; all ${FILES.length} files: ${allGz} bytes gzipped`);
  assert.ok(FILES.includes('anchored.js') && FILES.includes('anchored.css'));
  assert.ok(!['dialog.js', 'markdown.js', 'highlight.js'].some((f) => first.includes(f)), `loaded eagerly: ${first}`);
  assert.ok(firstGz <= 16 * 1024, `${firstGz} bytes gzipped on every page`);
  assert.ok(!['pagemenu.js', 'pagelinks.js', 'clipboard.js'].some((f) => first.includes(f)), `loaded eagerly: ${first}`);
  assert.ok(allGz <= 48 * 1024, `${allGz} bytes gzipped in all`);
});

test('no HTML parsing of data and no code from strings anywhere in the widget', () => {
  for (const f of FILES.filter((x) => x.endsWith('.js'))) {
    const src = readFileSync(join(ASSETS, f), 'utf8');
    for (const bad of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function', 'createContextualFragment', 'srcdoc']) {
      assert.ok(!src.includes(bad), `${f} uses ${bad}`);
    }
  }
});

// The page menu's "Open in ChatGPT / Claude" are links the reader follows (pagemenu.test.js
// checks nothing is requested from those hosts before); no other file names another host.
const LINK_TARGETS = { 'pagelinks.js': ['https://chatgpt.com/?q=', 'https://claude.ai/new?q='] };

test('no request to another host: the only absolute URLs are the SVG namespace and the assistants\' links', () => {
  for (const f of FILES) {
    const urls = readFileSync(join(ASSETS, f), 'utf8').match(/https?:\/\/[^\s'"`)]+/g) || [];
    assert.deepEqual(urls.filter((u) => u !== 'http://www.w3.org/2000/svg'), LINK_TARGETS[f] || [], f);
  }
});

test('modules import each other by relative path only', () => {
  for (const f of FILES.filter((x) => x.endsWith('.js'))) {
    const specs = [...readFileSync(join(ASSETS, f), 'utf8').matchAll(/import\s*(?:[^'"]*from\s*)?\(?\s*['"]([^'"]+)['"]/g)].map((m) => m[1]);
    for (const s of specs) {
      assert.match(s, /^\.\/[\w-]+\.js$/, `${f} imports ${s}`);
      assert.ok(FILES.includes(s.slice(2)), `${f} imports ${s}, which is not in plugin/assets`);
    }
  }
});
