// The page menu (copy / view the page's Markdown twin, open it in ChatGPT or Claude, the MCP
// snippets), questions as links (?ask=, "Copy link"), and privacy: no cookie, no request to
// any host but the site's. The addresses themselves (pagelinks.js) are checked in Node first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BASE, HERE, INSTANT_SITE, MKDOCS_SITE, OTHER, PAGE, SHOTS, SITE, ask, fileBrowser, harnessLog, isHarness, newPage, open, until } from './helpers.js';
import { assistantLink, mcpSnippets, questionLink, readAsk, serverName, stripAsk, twinPath } from '../../plugin/assets/pagelinks.js';

const browser = await fileBrowser();
const harness = await isHarness();
const ORIGIN = new URL(BASE).origin;
const Q = 'How do I configure the endpoint?';
const twinOf = (path, site = SITE) => BASE + site + twinPath(path);
const ENTRIES = ['Copy page as Markdown', 'View as Markdown', 'Open in ChatGPT', 'Open in Claude', 'Use these docs in your editor'];

// ---- the addresses, in Node

test('twinPath: foo/bar/ → foo/bar/index.md, foo.html → foo.md, home → index.md', () => {
  assert.equal(twinPath('foo/bar/'), 'foo/bar/index.md');
  assert.equal(twinPath('foo.html'), 'foo.md');
  assert.equal(twinPath('guide/foo.html'), 'guide/foo.md');
  assert.equal(twinPath(''), 'index.md');
  assert.equal(twinPath('/user-guide/configuration/'), 'user-guide/configuration/index.md');
  assert.equal(twinPath('about/?x=1#top'), 'about/index.md');
});

test('assistant links carry a prompt that points at the Markdown twin', () => {
  const twin = 'https://docs.example.com/guide/a b/index.md';
  const chatgpt = new URL(assistantLink('chatgpt', twin));
  assert.equal(chatgpt.origin + chatgpt.pathname, 'https://chatgpt.com/');
  assert.equal(chatgpt.searchParams.get('q'), `Read ${twin} and answer questions about it.`);
  const claude = new URL(assistantLink('claude', twin));
  assert.equal(claude.origin + claude.pathname, 'https://claude.ai/new');
  assert.equal(claude.searchParams.get('q'), `Read ${twin} and answer questions about it.`);
});

test('MCP snippets: the server URL in the forms site/mcp.md gives, named after the site', () => {
  assert.equal(serverName('Anchored test site', 'x'), 'anchored-test-site');
  assert.equal(serverName('', 'docs.example.com'), 'docs-example-com');
  assert.equal(serverName('Ünïcode — Docs!', ''), 'unicode-docs');
  assert.equal(serverName('', ''), 'docs');
  const url = 'https://fn.example.com/mcp';
  const [claude, cursor, vscode] = mcpSnippets(url, 'my-docs');
  assert.equal(claude.text, 'claude mcp add --transport http my-docs https://fn.example.com/mcp');
  assert.deepEqual(JSON.parse(cursor.text), { mcpServers: { 'my-docs': { url } } });
  assert.deepEqual(JSON.parse(vscode.text), { servers: { 'my-docs': { type: 'http', url } } });
  // A URL the shell would cut is quoted.
  assert.equal(mcpSnippets("https://x.example/a b'c/mcp", 'd')[0].text, "claude mcp add --transport http d 'https://x.example/a b'\\''c/mcp'");
});

test('question links: ?ask= on the page, read back whole; other parameters kept when stripped', () => {
  const q = 'How do I set "port" & host? 100% sure #1';
  const link = questionLink('https://d.example/guide/?anchored-hl=x#sec', q);
  assert.match(link, /^https:\/\/d\.example\/guide\/\?ask=[^#&]+$/);
  assert.equal(readAsk(new URL(link).search), q);
  assert.equal(readAsk('?a=1'), null);
  assert.equal(readAsk('?ask=' + 'x'.repeat(2000)).length, 1000);
  assert.equal(stripAsk('?ask=hi'), '');
  assert.equal(stripAsk('?q=1&ask=hi&h=2'), '?q=1&h=2');
});

// ---- in Chromium

/** A page whose clipboard the test can read (the menu writes to the real one). */
async function clipPage(opts) {
  const page = await newPage(browser, opts);
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: ORIGIN });
  return page;
}

async function openMenu(page) {
  await page.click('.anchored-menu__btn');
  await page.waitForSelector('.anchored-menu__panel:not([hidden])');
}

/** The focused element: a menu entry's name, 'button' (the menu's), or its tag. */
const focused = (page) =>
  page.evaluate(() => {
    const a = document.activeElement;
    return a.dataset.entry || (a.classList.contains('anchored-menu__btn') ? 'button' : a.tagName);
  });

test('the menu: a button by the page title, its five entries, links to the twin and the assistants', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  const btn = page.locator('.anchored-menu__btn');
  assert.equal(await btn.textContent(), 'Copy page');
  assert.equal(await btn.getAttribute('aria-expanded'), 'false');
  // Beside the page's h1, in the content.
  assert.ok(await page.evaluate(() => document.querySelector('.anchored-menu').nextElementSibling.tagName === 'H1'));
  await openMenu(page);
  assert.equal(await btn.getAttribute('aria-expanded'), 'true');
  const panel = await btn.getAttribute('aria-controls');
  assert.ok(await page.locator('#' + panel).isVisible());
  assert.deepEqual(await page.$$eval('.anchored-menu__label', (l) => l.map((x) => x.textContent)), ENTRIES);
  const twin = twinOf(PAGE);
  assert.equal(await page.getAttribute('[data-entry=view]', 'href'), twin);
  for (const [entry, host] of [['chatgpt', 'https://chatgpt.com/'], ['claude', 'https://claude.ai/new']]) {
    const a = page.locator(`[data-entry=${entry}]`);
    const u = new URL(await a.getAttribute('href'));
    assert.equal(u.origin + u.pathname, host);
    assert.equal(u.searchParams.get('q'), `Read ${twin} and answer questions about it.`);
    assert.equal(await a.getAttribute('target'), '_blank');
    assert.equal(await a.getAttribute('rel'), 'noopener noreferrer');
    assert.match(await a.textContent(), /opens in a new tab/);
  }
  assert.deepEqual(page.external, [], 'nothing asked of another host');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('Copy page as Markdown puts the twin on the clipboard', async () => {
  const page = await clipPage();
  await open(page, PAGE);
  await openMenu(page);
  const got = page.waitForResponse((r) => r.url() === twinOf(PAGE));
  await page.click('[data-entry=copy]');
  assert.equal((await got).status(), 200);
  await until(async () => (await page.textContent('.anchored-menu__status')) !== 'Copying…');
  assert.equal(await page.textContent('.anchored-menu__status'), 'Copied the page as Markdown');
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  if (harness) assert.equal(copied, readFileSync(join(HERE, 'pages', 'docs', 'user-guide', 'configuration.md'), 'utf8'));
  assert.match(copied, /^# Configuration\n/);
  await page.context().close();
});

test('a page without a twin: Copy says so, View is marked unavailable', { skip: !harness && 'needs the harness (about/ has no twin there)' }, async () => {
  const page = await clipPage();
  await open(page, OTHER);
  await page.evaluate(() => navigator.clipboard.writeText('before'));
  await openMenu(page);
  await page.click('[data-entry=copy]');
  await until(async () => (await page.textContent('.anchored-menu__status')) !== 'Copying…');
  assert.equal(await page.textContent('.anchored-menu__status'), 'This page has no Markdown version');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), 'before', 'the clipboard is left alone');
  for (const e of ['copy', 'view']) {
    assert.equal(await page.getAttribute(`[data-entry=${e}]`, 'aria-disabled'), 'true');
    assert.equal(await page.textContent(`[data-entry=${e}] .anchored-menu__note`), 'This page has no Markdown version');
  }
  // Following the View link now opens nothing.
  let popups = 0;
  page.context().on('page', () => popups++);
  await page.click('[data-entry=view]', { force: true }); // aria-disabled: Playwright would wait
  await page.waitForTimeout(300);
  assert.equal(popups, 0);
  await page.context().close();
});

test('View as Markdown opens the twin in a new tab', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  await openMenu(page);
  const [tab] = await Promise.all([page.context().waitForEvent('page'), page.click('[data-entry=view]')]);
  await tab.waitForLoadState();
  assert.equal(tab.url(), twinOf(PAGE));
  assert.match(await tab.evaluate(() => document.body.innerText), /^# Configuration/);
  assert.ok(await page.locator('.anchored-menu__panel').isHidden(), 'the menu closed');
  await page.context().close();
});

test('Open in ChatGPT / Claude: nothing is requested from them until the reader clicks', async () => {
  const page = await newPage(browser);
  const requests = [];
  page.context().on('request', (r) => requests.push(r.url()));
  await open(page, PAGE);
  await openMenu(page);
  for (const e of ['chatgpt', 'claude']) {
    await page.hover(`[data-entry=${e}]`);
    await page.focus(`[data-entry=${e}]`);
  }
  await page.waitForTimeout(500);
  assert.deepEqual(requests.filter((u) => !u.startsWith(ORIGIN)), [], 'hover and focus fetch nothing');
  // The click is a navigation in a new tab (aborted here: the tests stay offline).
  const [tab] = await Promise.all([page.context().waitForEvent('page'), page.click('[data-entry=chatgpt]')]);
  await until(() => requests.some((u) => u.startsWith('https://chatgpt.com/')));
  const asked = new URL(requests.find((u) => u.startsWith('https://chatgpt.com/')));
  assert.equal(asked.searchParams.get('q'), `Read ${twinOf(PAGE)} and answer questions about it.`);
  await tab.close();
  await page.context().close();
});

test('Use these docs in your editor: the MCP snippets for the function\'s /mcp, copyable', async () => {
  const page = await clipPage();
  await open(page, PAGE);
  await openMenu(page);
  await page.click('[data-entry=mcp]');
  const d = page.locator('dialog.anchored-editor[open]');
  await d.waitFor();
  assert.equal(await d.evaluate((x) => document.getElementById(x.getAttribute('aria-labelledby')).textContent), 'Use these docs in your editor');
  const blocks = await d.locator('.anchored-code').evaluateAll((b) => b.map((x) => [x.querySelector('.anchored-code__label').textContent, x.querySelector('code').textContent]));
  const url = ORIGIN + '/mcp'; // widget_endpoint "" : the site's origin
  assert.deepEqual(blocks.map((b) => b[0]), ['MCP server URL', 'Claude Code', 'Cursor: .cursor/mcp.json', 'VS Code: .vscode/mcp.json']);
  assert.equal(blocks[0][1], url);
  assert.equal(blocks[1][1], `claude mcp add --transport http anchored-test-site ${url}`);
  assert.deepEqual(JSON.parse(blocks[2][1]), { mcpServers: { 'anchored-test-site': { url } } });
  assert.deepEqual(JSON.parse(blocks[3][1]), { servers: { 'anchored-test-site': { type: 'http', url } } });
  await page.screenshot({ path: join(SHOTS, 'page-menu-mcp.png') });
  // Focus starts on the first Copy; it copies the URL.
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'Copy MCP server URL');
  await page.keyboard.press('Enter');
  await until(async () => (await page.evaluate(() => navigator.clipboard.readText())) === url);
  await d.locator('button[aria-label="Copy Claude Code"]').click();
  await until(async () => (await page.evaluate(() => navigator.clipboard.readText())).startsWith('claude mcp add'));
  await page.keyboard.press('Escape');
  await page.waitForSelector('dialog.anchored-editor', { state: 'hidden' });
  // The dialog hands focus back as it closes: wait for it (a busy machine is slow to), then check.
  await until(async () => (await focused(page)) === 'button');
  assert.equal(await focused(page), 'button', 'focus back on the menu button');
  await page.context().close();
});

test('the MCP snippets name the function at widget_endpoint', async () => {
  const page = await newPage(browser);
  const config = encodeURIComponent(JSON.stringify({ endpoint: 'https://fn.example.com/prod' }));
  await open(page, PAGE, { query: '?harness-config=' + config });
  await openMenu(page);
  await page.click('[data-entry=mcp]');
  await page.waitForSelector('dialog.anchored-editor[open]');
  assert.equal(await page.textContent('dialog.anchored-editor .anchored-code code'), 'https://fn.example.com/prod/mcp');
  assert.deepEqual(page.external, [], 'showing the address asks nothing of it');
  await page.context().close();
});

test('keyboard: Tab to the button, Enter opens on the first entry, arrows, Home/End, Tab, Esc', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  let on = false;
  for (let i = 0; i < 60 && !on; i++) {
    await page.keyboard.press('Tab');
    on = (await focused(page)) === 'button';
  }
  assert.ok(on, 'the menu button is reachable with Tab');
  await page.keyboard.press('Enter');
  await page.waitForSelector('.anchored-menu__panel:not([hidden])');
  assert.equal(await focused(page), 'copy', 'step 1');
  await page.keyboard.press('ArrowDown');
  assert.equal(await focused(page), 'view', 'step 2');
  await page.keyboard.press('ArrowUp');
  await page.keyboard.press('ArrowUp');
  assert.equal(await focused(page), 'mcp', 'ArrowUp from the first wraps to the last');
  await page.keyboard.press('ArrowDown');
  assert.equal(await focused(page), 'copy', 'ArrowDown from the last wraps to the first');
  await page.keyboard.press('End');
  assert.equal(await focused(page), 'mcp', 'step 5');
  await page.keyboard.press('Home');
  assert.equal(await focused(page), 'copy', 'step 6');
  // Tab walks the entries in order too.
  const order = [];
  for (let i = 0; i < 4; i++) {
    await page.keyboard.press('Tab');
    order.push(await focused(page));
  }
  assert.deepEqual(order, ['view', 'chatgpt', 'claude', 'mcp']);
  // Esc closes and gives focus back to the button.
  await page.keyboard.press('Escape');
  assert.ok(await page.locator('.anchored-menu__panel').isHidden());
  assert.equal(await focused(page), 'button', 'step 7');
  assert.equal(await page.getAttribute('.anchored-menu__btn', 'aria-expanded'), 'false');
  // ArrowDown on the button opens it too; Tab past the last entry closes it.
  await page.keyboard.press('ArrowDown');
  await page.waitForSelector('.anchored-menu__panel:not([hidden])');
  assert.equal(await focused(page), 'copy', 'step 8');
  await page.keyboard.press('End');
  await page.keyboard.press('Tab');
  assert.ok(await page.locator('.anchored-menu__panel').isHidden(), 'Tab out of the menu closes it');
  // A click elsewhere closes it.
  await openMenu(page);
  await page.mouse.click(5, 400);
  assert.ok(await page.locator('.anchored-menu__panel').isHidden(), 'a click outside closes it');
  // Esc in the menu does not open or close anything else (no dialog, the page stays).
  assert.ok(!(await page.$('dialog.anchored-dialog[open]')));
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("Material's instant navigation: one menu per page, naming the page it is on", { skip: !INSTANT_SITE && 'no instant-navigation site' }, async () => {
  const page = await newPage(browser);
  await open(page, PAGE, { site: INSTANT_SITE });
  await page.click(`.md-nav__link[href$="${OTHER}"]`);
  await page.waitForFunction((o) => location.pathname.endsWith('/' + o), OTHER);
  await page.waitForSelector('.md-content .anchored-menu__btn');
  assert.equal(await page.locator('.anchored-menu').count(), 1);
  await openMenu(page);
  assert.equal(await page.getAttribute('[data-entry=view]', 'href'), twinOf(OTHER, INSTANT_SITE));
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('each entry is an option: widget_page_menu lists those shown, [] shows no menu', async () => {
  const page = await newPage(browser);
  const only = encodeURIComponent(JSON.stringify({ page_menu: ['claude', 'mcp'] }));
  await open(page, PAGE, { query: '?harness-config=' + only });
  assert.equal(await page.textContent('.anchored-menu__btn'), 'Page menu');
  await openMenu(page);
  assert.deepEqual(await page.$$eval('.anchored-menu__item', (l) => l.map((x) => x.dataset.entry)), ['claude', 'mcp']);
  const none = encodeURIComponent(JSON.stringify({ page_menu: [] }));
  await open(page, PAGE, { query: '?harness-config=' + none });
  assert.equal(await page.locator('.anchored-menu').count(), 0);
  await page.context().close();
});

test('?ask= opens the box and asks, in a new conversation; the parameter leaves the address bar', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'Which options are there?'); // an earlier conversation in this tab
  const req = page.waitForRequest('**/v1/ask');
  await page.goto(BASE + SITE + OTHER + '?ask=' + encodeURIComponent(Q));
  const body = (await req).postDataJSON();
  assert.equal(body.question, Q);
  assert.equal(body.history, undefined, 'a linked question stands alone');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  await page.waitForFunction(() => document.querySelector('.anchored-turn:not(.anchored-turn--live) .anchored-answer'));
  assert.deepEqual(await page.$$eval('.anchored-q', (q) => q.map((x) => x.textContent.replace('You asked: ', ''))), [Q]);
  assert.equal(await page.evaluate(() => location.search), '');
  assert.equal(await page.evaluate(() => location.pathname), new URL(BASE + SITE + OTHER).pathname);
  if (harness) assert.equal((await harnessLog('asks')).filter((a) => a.question === Q).length >= 1, true);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('?ask= in MkDocs\' theme too', { skip: !MKDOCS_SITE && 'no default-theme site' }, async () => {
  const page = await newPage(browser);
  await page.goto(BASE + MKDOCS_SITE + PAGE + '?ask=' + encodeURIComponent(Q));
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-turn:not(.anchored-turn--live) .anchored-answer');
  assert.equal(await page.evaluate(() => location.search), '');
  // The menu is by the title there too.
  await page.keyboard.press('Escape');
  await openMenu(page);
  assert.equal(await page.getAttribute('[data-entry=view]', 'href'), twinOf(PAGE, MKDOCS_SITE));
  await page.context().close();
});

test('every answer has "Copy link to this question": the page with ?ask=, which asks it again', async () => {
  const page = await clipPage();
  await open(page, OTHER);
  await ask(page, Q);
  const btn = page.locator('.anchored-actions button[aria-label="Copy link to this question"]');
  assert.equal(await btn.textContent(), 'Copy link');
  await btn.click();
  const link = await until(async () => {
    const t = await page.evaluate(() => navigator.clipboard.readText());
    return t.includes('?ask=') && t;
  });
  const u = new URL(link);
  assert.equal(u.origin + u.pathname, new URL(BASE + SITE + OTHER).href);
  assert.equal(u.searchParams.get('ask'), Q);
  assert.equal(u.hash, '');
  // An abstention has it too.
  await ask(page, 'What is the weather?');
  assert.equal(await page.locator('.anchored-turn').last().locator('button[aria-label="Copy link to this question"]').count(), 1);
  // The link, opened in a fresh tab, asks the question.
  const other = await newPage(browser);
  const req = other.waitForRequest('**/v1/ask');
  await other.goto(link);
  assert.equal((await req).postDataJSON().question, Q);
  await other.context().close();
  // widget_ask_links: false: no button, and ?ask= is left alone.
  const off = encodeURIComponent(JSON.stringify({ ask_links: false }));
  await open(page, OTHER, { query: '?harness-config=' + off + '&ask=' + encodeURIComponent(Q) });
  await page.waitForTimeout(500);
  assert.ok(!(await page.$('dialog.anchored-dialog[open]')), 'ask links off: nothing asked');
  await ask(page, Q);
  assert.equal(await page.locator('.anchored-turn').last().locator('button[aria-label="Copy link to this question"]').count(), 0);
  await page.context().close();
});

test('privacy: the box and the menu set no cookie and ask nothing of any host but the site', async () => {
  const page = await clipPage();
  const requests = [];
  page.context().on('request', (r) => requests.push(r.url()));
  await page.goto(BASE + SITE + PAGE + '?ask=' + encodeURIComponent(Q));
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-turn:not(.anchored-turn--live) .anchored-answer');
  await page.click('.anchored-actions button[aria-label="Copy link to this question"]');
  await page.click('.anchored-actions button[aria-label="Copy answer as Markdown"]');
  await page.locator('.anchored-fb button[aria-label="Helpful"]').click();
  await until(async () => (await page.textContent('.anchored-fb__note')).startsWith('Thanks'));
  await page.keyboard.press('Escape');
  await page.waitForFunction(() => !document.querySelector('dialog.anchored-dialog').open);
  await openMenu(page);
  await page.click('[data-entry=copy]');
  await until(async () => (await page.textContent('.anchored-menu__status')).startsWith('Copied'));
  for (const e of ['view', 'chatgpt', 'claude']) await page.hover(`[data-entry=${e}]`);
  await page.click('[data-entry=mcp]');
  await page.waitForSelector('dialog.anchored-editor[open]');
  await page.keyboard.press('Escape');
  await page.waitForTimeout(300);
  const hosts = [...new Set(requests.map((u) => new URL(u).origin))];
  assert.deepEqual(hosts, [ORIGIN], `requests to: ${hosts.join(', ')}`);
  assert.ok(requests.some((u) => u.endsWith('/v1/ask')) && requests.some((u) => u.endsWith('/v1/feedback')) && requests.some((u) => u.endsWith('.md')));
  assert.equal(await page.evaluate(() => document.cookie), '');
  assert.deepEqual(await page.context().cookies(), []);
  await page.context().close();
});

test('375 px: the button and the open menu fit the screen, nothing scrolls sideways; the MCP dialog fits', async () => {
  const page = await newPage(browser, { viewport: { width: 375, height: 720 }, isMobile: true, hasTouch: true });
  await open(page, PAGE);
  const btn = await page.locator('.anchored-menu__btn').boundingBox();
  assert.ok(btn.x >= 0 && btn.x + btn.width <= 375, JSON.stringify(btn));
  await page.tap('.anchored-menu__btn');
  await page.waitForSelector('.anchored-menu__panel:not([hidden])');
  const panel = await page.locator('.anchored-menu__panel').boundingBox();
  assert.ok(panel.x >= 0 && panel.x + panel.width <= 375, `panel ${JSON.stringify(panel)}`);
  for (const item of await page.locator('.anchored-menu__item').all()) {
    const b = await item.boundingBox();
    assert.ok(b.x >= 0 && b.x + b.width <= 375 && b.height >= 32, `entry ${JSON.stringify(b)}`);
  }
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth), 'the page scrolls sideways');
  await page.tap('[data-entry=mcp]');
  await page.waitForSelector('dialog.anchored-editor[open]');
  const d = await page.locator('dialog.anchored-editor').boundingBox();
  assert.ok(d.x >= 0 && d.width <= 375, JSON.stringify(d));
  const frame = await page.evaluate(() => {
    const f = document.querySelector('dialog.anchored-editor .anchored-frame');
    return [f.scrollWidth, f.clientWidth];
  });
  assert.ok(frame[0] <= frame[1], `the MCP dialog scrolls sideways: ${frame}`);
  await page.context().close();
});

/** Contrast of an element's text on the panel (WCAG ratio). */
function contrast(page, selector) {
  return page.evaluate((sel) => {
    const rgb = (s) => s.match(/[\d.]+/g).map(Number);
    const lum = ([r, g, b]) => {
      const f = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const bg = rgb(getComputedStyle(document.querySelector('.anchored-menu__panel')).backgroundColor);
    const fgA = rgb(getComputedStyle(document.querySelector(sel)).color);
    const a = fgA.length > 3 ? fgA[3] : 1;
    const fg = fgA.slice(0, 3).map((c, i) => c * a + bg[i] * (1 - a));
    const [hi, lo] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  }, selector);
}

for (const [scheme, width] of [['light', 1280], ['dark', 1280], ['light', 375], ['dark', 375]]) {
  test(`Material ${scheme}, ${width} px: the open menu is readable; screenshot`, async () => {
    const page = await newPage(browser, { viewport: { width, height: width < 500 ? 720 : 640 }, isMobile: width < 500, hasTouch: width < 500 });
    await open(page, PAGE);
    if (scheme === 'dark') {
      await page.evaluate(() => document.querySelector('label[for="__palette_1"]').click());
      await page.waitForFunction(() => document.body.getAttribute('data-md-color-scheme') === 'slate');
    }
    await openMenu(page);
    const bg = await page.$eval('.anchored-menu__panel', (p) => getComputedStyle(p).backgroundColor);
    const page_ = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, page_, 'the panel takes the palette\'s background');
    const label = await contrast(page, '.anchored-menu__label');
    const note = await contrast(page, '.anchored-menu__note');
    assert.ok(label >= 7 && note >= 4.5, `contrast: labels ${label}, notes ${note}`);
    await page.hover('[data-entry=chatgpt]');
    await page.screenshot({ path: join(SHOTS, `page-menu-${scheme}-${width}.png`) });
    await page.context().close();
  });
}

test("MkDocs' theme: the menu by the title, light and dark", { skip: !MKDOCS_SITE && 'no default-theme site' }, async () => {
  for (const dark of [false, true]) {
    const page = await newPage(browser, { colorScheme: dark ? 'dark' : 'light' });
    await open(page, PAGE, { site: MKDOCS_SITE });
    if (dark) await page.evaluate(() => document.documentElement.setAttribute('data-bs-theme', 'dark'));
    assert.equal(await page.evaluate(() => document.querySelector('.anchored-menu').nextElementSibling.tagName), 'H1');
    await openMenu(page);
    const label = await contrast(page, '.anchored-menu__label');
    const note = await contrast(page, '.anchored-menu__note');
    assert.ok(label >= 7 && note >= 4.5, `contrast: labels ${label}, notes ${note}`);
    await page.screenshot({ path: join(SHOTS, `page-menu-mkdocs-${dark ? 'dark' : 'light'}.png`) });
    await page.context().close();
  }
});
