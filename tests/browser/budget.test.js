// The widget's weight and its rules on data handling, checked on the shipped files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { HERE } from './helpers.js';

const ASSETS = join(HERE, '..', '..', 'plugin', 'assets');
const FILES = readdirSync(ASSETS).filter((f) => /\.(js|css)$/.test(f));

test('JS + CSS are at most 25 KB gzipped in total', (t) => {
  let raw = 0;
  let gz = 0;
  for (const f of FILES) {
    const data = readFileSync(join(ASSETS, f));
    raw += data.length;
    gz += gzipSync(data, { level: 9 }).length;
  }
  t.diagnostic(`${FILES.length} files, ${raw} bytes raw, ${gz} bytes gzipped`);
  assert.ok(FILES.includes('anchored.js') && FILES.includes('anchored.css'));
  assert.ok(gz <= 25 * 1024, `${gz} bytes gzipped`);
});

test('no HTML parsing of data and no code from strings anywhere in the widget', () => {
  for (const f of FILES.filter((x) => x.endsWith('.js'))) {
    const src = readFileSync(join(ASSETS, f), 'utf8');
    for (const bad of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function', 'createContextualFragment', 'srcdoc']) {
      assert.ok(!src.includes(bad), `${f} uses ${bad}`);
    }
  }
});

test('no request to another host: the only absolute URL is the SVG namespace', () => {
  for (const f of FILES) {
    const urls = readFileSync(join(ASSETS, f), 'utf8').match(/https?:\/\/[^\s'"`)]+/g) || [];
    assert.deepEqual(urls.filter((u) => u !== 'http://www.w3.org/2000/svg'), [], f);
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
