// Shared setup for the browser tests: one Chromium per test file, pages on the server
// named by ANCHORED_TEST_URL (the harness, or later `anchored serve`).
import { readFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after } from 'node:test';
import { chromium } from 'playwright-core';
import { sseParser } from '../../plugin/assets/api.js';

export const HERE = dirname(fileURLToPath(import.meta.url));
export const BASE = (process.env.ANCHORED_TEST_URL || 'http://127.0.0.1:8765').replace(/\/$/, '');
/** Site prefixes on that server: the Material build and the default-theme build ("" skips the latter). */
export const SITE = process.env.ANCHORED_TEST_SITE ?? '/material/';
export const MKDOCS_SITE = process.env.ANCHORED_TEST_MKDOCS_SITE ?? '/mkdocs/';
/** The Material build with navigation.instant ("" skips its test). */
export const INSTANT_SITE = process.env.ANCHORED_TEST_INSTANT_SITE ?? '/instant/';
/** Page (relative to the site root) that holds the cited passages, and a page that does not. */
export const PAGE = process.env.ANCHORED_TEST_PAGE ?? 'user-guide/configuration/';
export const OTHER = process.env.ANCHORED_TEST_OTHER_PAGE ?? 'about/';
export const FIXTURES = JSON.parse(readFileSync(join(HERE, 'fixtures.json'), 'utf8'));
/** Screenshots go to a temp folder unless ANCHORED_SCREENSHOTS names one (e.g. site/images). */
export const SHOTS = process.env.ANCHORED_SCREENSHOTS || join(tmpdir(), 'anchored-screenshots');
mkdirSync(SHOTS, { recursive: true });

const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--no-first-run', '--disable-quic'];

export function launch() {
  return chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ARGS });
}

/**
 * The test file's one Chromium, closed after its tests: `const browser = await fileBrowser();`
 * at the top of the file. None (null) when `skip` is set (the file's tests are skipped).
 */
export async function fileBrowser({ skip = false } = {}) {
  if (skip) return null;
  const browser = await launch();
  after(() => browser.close());
  return browser;
}

let harness = null;
/** True when the server is tests/browser/harness.py (it records calls under /__harness/). */
export async function isHarness() {
  if (harness === null) {
    try {
      harness = (await fetch(BASE + '/__harness/asks')).ok;
    } catch {
      harness = false;
    }
  }
  return harness;
}

export async function harnessLog(kind) {
  return (await fetch(`${BASE}/__harness/${kind}`)).json();
}

// Same keyword → fixture choice as harness.py, for servers that don't have the fixtures.
function pick(q) {
  q = q.toLowerCase();
  if (['xss', '<script', '<img'].some((w) => q.includes(w))) return 'xss';
  if (['weather', 'abstain'].some((w) => q.includes(w))) return 'abstain';
  if (['extractive', 'quote'].some((w) => q.includes(w))) return 'extractive';
  if (q.includes('markdown')) return 'markdown'; // before "down", which it contains
  if (['down', '503'].some((w) => q.includes(w))) return 'down';
  if (['busy', '429'].some((w) => q.includes(w))) return 'busy';
  return 'default';
}

/**
 * A fresh page (own context). Records page errors and any request that leaves the server.
 * Against an external server, /v1/ask is answered from fixtures.json unless `live`.
 */
export async function newPage(browser, { live = false, viewport = { width: 1280, height: 800 }, ...opts } = {}) {
  const context = await browser.newContext({ viewport, ...opts });
  const page = await context.newPage();
  // A page load waits up to 90 s, not Playwright's 30 s: a busy machine took longer (a
  // page that never loads still fails).
  page.setDefaultNavigationTimeout(90000);
  page.errors = [];
  page.external = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (u.startsWith(BASE) || u.startsWith('data:') || u.startsWith('blob:')) return route.fallback();
    page.external.push(u);
    return route.abort();
  });
  if (!live && !(await isHarness())) {
    await context.route('**/v1/ask', async (route) => {
      const q = String(route.request().postDataJSON()?.question || '');
      if (q.toLowerCase().includes('slow')) await new Promise((r) => setTimeout(r, 4000));
      if (q.toLowerCase().includes('garbage')) return route.fulfill({ status: 200, body: '<html>not json' });
      const f = FIXTURES[pick(q)];
      if (f.status) return route.fulfill({ status: f.status, headers: f.headers, json: f.body });
      return route.fulfill({ json: f });
    });
  }
  return page;
}

/** Open a page of the site (`path` relative to the site root) and wait for the widget. */
export async function open(page, path = PAGE, { site = SITE, query = '' } = {}) {
  await page.goto(BASE + site + path + query);
  await page.waitForSelector('.anchored-open', { state: 'attached' });
}

/** Open the dialog (button) if needed, ask `q`, wait (`timeout` ms) for the turn to finish. */
export async function ask(page, q, { timeout = 40000 } = {}) {
  if (!(await page.$('dialog.anchored-dialog[open]'))) {
    await page.click('.anchored-open');
    await page.waitForSelector('dialog.anchored-dialog[open]');
  }
  const before = await page.$$eval('.anchored-turn', (t) => t.length);
  await page.fill('.anchored-input', q);
  await page.press('.anchored-input', 'Enter');
  await page.waitForFunction((n) => {
    const turns = document.querySelectorAll('.anchored-turn');
    const last = turns[turns.length - 1];
    // finished: something shown and no longer streaming (the final record replaced the live view)
    return turns.length > n && last.querySelector('.anchored-a').childElementCount > 0 && !last.classList.contains('anchored-turn--live');
  }, before, { timeout });
}

/** Matching key: lower case, no whitespace, no table separators or pilcrows. */
export const key = (s) => String(s).toLowerCase().replace(/[\s¶|]/g, '');
/** Whitespace-normalised text with the back end's " | " cell separators dropped. */
export const flat = (s) => String(s).replace(/\s*\|\s*/g, ' ').replace(/¶/g, '').replace(/\s+/g, ' ').trim();

/**
 * The highlight on the page: text of the marks, text of the DOM range from the first
 * mark to the last (what a reader sees highlighted), whether the first is on screen.
 */
export function readHighlight(page) {
  return page.evaluate(() => {
    const marks = [...document.querySelectorAll('mark.anchored-hl')];
    if (!marks.length) return { count: 0, marks: '', range: '', inView: false };
    const r = document.createRange();
    r.setStartBefore(marks[0]);
    r.setEndAfter(marks[marks.length - 1]);
    const box = marks[0].getBoundingClientRect();
    return {
      count: marks.length,
      marks: marks.map((m) => m.textContent).join(''),
      range: r.toString(),
      inView: box.top >= 0 && box.bottom <= innerHeight && box.height > 0,
    };
  });
}

/** Poll `fn` (async, returns truthy) until it holds or `ms` pass. */
export async function until(fn, ms = 5000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  return last;
}

/** The /v1/ask reply a response carried: its JSON, or the `final` event of its event stream. */
export async function replyOf(response) {
  const text = await response.text();
  if (!/^text\/event-stream/i.test(response.headers()['content-type'] || '')) return JSON.parse(text);
  let final = null;
  const parser = sseParser((name, data) => {
    if (name === 'final') final = JSON.parse(data);
  });
  parser.push(text);
  parser.end();
  return final;
}
