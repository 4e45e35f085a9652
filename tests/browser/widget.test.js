// The dialog: asking, chips and previews, follow-ups, scope, copy, feedback, errors, safety, keyboard.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { BASE, FIXTURES, HERE, MKDOCS_SITE, OTHER, PAGE, SHOTS, SITE, ask, harnessLog, isHarness, key, fileBrowser, newPage, open, until } from './helpers.js';

const browser = await fileBrowser();

const DEFAULT = FIXTURES.default;

test('ask: sentences with chips numbered 1..n in order, sources grouped by page', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  const chips = await page.$$eval('.anchored-answer .anchored-chip', (c) => c.map((x) => Number(x.textContent)));
  const firstSeen = [...new Set(chips)];
  assert.deepEqual(firstSeen, firstSeen.map((_, i) => i + 1), `chips in order of appearance: ${chips}`);
  assert.equal(firstSeen.length, DEFAULT.citations.length);
  assert.equal(await page.$$eval('.anchored-sentence', (s) => s.length), DEFAULT.answer.length);
  const groups = await page.$$eval('.anchored-page', (g) =>
    g.map((p) => [p.querySelector('.anchored-page__title').textContent, p.querySelectorAll('.anchored-source').length]),
  );
  assert.deepEqual(groups, [['Configuration', 4], ['Highlighting', 1]]);
  assert.match(await page.textContent('.anchored-meta'), /120 passages/);
  assert.deepEqual(page.errors, []);
  assert.deepEqual(page.external, [], 'no request leaves the site');
  await page.context().close();
});

test('chips have accessible names; focus or hover previews the cited passage', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  const chip = page.locator('.anchored-answer .anchored-chip').nth(1);
  assert.equal(await chip.getAttribute('aria-label'), 'Source 2: Configuration › Options');
  await chip.focus();
  const tip = page.locator('.anchored-tip');
  await tip.waitFor({ state: 'visible' });
  assert.equal(await tip.locator('.anchored-tip__path').textContent(), 'Configuration › Options');
  assert.equal(key(await tip.locator('.anchored-tip__text').textContent()), key(DEFAULT.citations[1].passage));
  assert.equal(await chip.getAttribute('aria-describedby'), await tip.getAttribute('id'));
  await page.locator('.anchored-answer .anchored-chip').first().hover();
  await until(async () => key(await tip.textContent()).includes(key('Set the endpoint option')));
  assert.ok(key(await tip.textContent()).includes(key(DEFAULT.citations[0].passage)));
  // Esc hides the preview first, leaving the dialog open.
  await chip.focus();
  await page.keyboard.press('Escape');
  assert.ok(await tip.isHidden());
  assert.ok(await page.locator('dialog.anchored-dialog').evaluate((d) => d.open));
  await page.context().close();
});

test('a follow-up question sends the previous turn as history', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  const req = page.waitForRequest('**/v1/ask');
  await ask(page, 'And the shortcut?');
  const body = (await req).postDataJSON();
  assert.equal(body.question, 'And the shortcut?');
  assert.deepEqual(body.history, [
    { role: 'user', content: 'How do I configure the endpoint?' },
    { role: 'assistant', content: DEFAULT.answer.map((s) => s.text).join(' ') },
  ]);
  assert.equal(await page.locator('.anchored-turn').count(), 2);
  assert.equal(await page.getAttribute('.anchored-input', 'placeholder'), 'Ask a follow-up…');
  await page.context().close();
});

test('scope control: this section sends include, whole site sends no scope, home has none', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  await page.click('.anchored-open');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  await page.selectOption('.anchored-scope__select', 'user-guide/');
  let req = page.waitForRequest('**/v1/ask');
  await ask(page, 'How do I configure the endpoint?');
  assert.deepEqual((await req).postDataJSON().scope, { include: ['user-guide/'] });
  await page.selectOption('.anchored-scope__select', '');
  req = page.waitForRequest('**/v1/ask');
  await ask(page, 'Which options are there?');
  assert.equal((await req).postDataJSON().scope, undefined);
  await open(page, '');
  await page.click('.anchored-open');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  assert.ok(await page.locator('.anchored-scope', { has: page.locator('.anchored-scope__select') }).isHidden(), 'no section on the home page');
  await page.context().close();
});

test('feedback: thumbs up, and thumbs down with a reason and comment, reach the server', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  let res = page.waitForResponse('**/v1/feedback');
  await page.click('.anchored-fb [aria-label="Helpful"]');
  let r = await res;
  assert.ok(r.ok(), `feedback status ${r.status()}`);
  assert.deepEqual(r.request().postDataJSON(), { answer_id: 'ans-default', rating: 'up' });
  await page.locator('.anchored-fb__note', { hasText: 'Thanks' }).waitFor();

  await ask(page, 'Which options are there?');
  const last = page.locator('.anchored-turn').last();
  await last.locator('[aria-label="Not helpful"]').click();
  await last.locator('input[value="bad_citation"]').check();
  await last.locator('.anchored-fb__comment').fill('Chip 2 <b>lands</b> too low');
  res = page.waitForResponse('**/v1/feedback');
  await last.locator('.anchored-fb__form button[type=submit]').click();
  r = await res;
  assert.ok(r.ok());
  assert.deepEqual(r.request().postDataJSON(), {
    answer_id: 'ans-default', rating: 'down', reason: 'bad_citation', comment: 'Chip 2 <b>lands</b> too low',
  });
  if (await isHarness()) {
    const log = await harnessLog('feedback');
    assert.ok(log.some((f) => f.rating === 'down' && f.reason === 'bad_citation'), 'harness recorded the feedback');
  }
  await page.context().close();
});

test('copy answer puts Markdown with absolute, highlighting links on the clipboard', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  await page.evaluate(() => {
    navigator.clipboard.writeText = async (t) => {
      window.__copied = t;
    };
  });
  await page.click('.anchored-actions button:has-text("Copy answer")');
  const md = await until(() => page.evaluate(() => window.__copied));
  assert.match(md, /^Set the endpoint option .* same origin\. \[1\] Every option/);
  assert.match(md, /\n\[1\]: http:\/\/\S+\/user-guide\/configuration\/\?anchored-hl=\S+#endpoint "Configuration › Endpoint"\n/);
  assert.match(md, /\n\[5\]: http:\/\/\S+\/user-guide\/highlighting\/\?anchored-hl=\S+#how-links-work /);
  await page.context().close();
});

test('markup in answers, titles and passages is shown as text and never runs', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  await ask(page, 'Is <img src=x onerror=window.__xss=1> safe? xss');
  const dialog = page.locator('dialog.anchored-dialog');
  assert.equal(await dialog.locator('img, script, b').count(), 0, 'no element made from data');
  const text = await dialog.textContent();
  assert.ok(text.includes('Markup like <img src=x onerror=window.__xss=1> is shown as text.'));
  assert.ok(text.includes('So is <script>window.__xss=1</script> and <b>bold</b>.'));
  assert.ok(text.includes('Is <img src=x onerror=window.__xss=1> safe? xss'));
  await dialog.locator('.anchored-answer .anchored-chip').first().hover();
  assert.ok((await page.textContent('.anchored-tip')).includes('<script>window.__xss=1</script>'));
  const hrefs = await dialog.locator('[href]').evaluateAll((a) => a.map((x) => x.getAttribute('href')));
  assert.ok(hrefs.length > 0 && hrefs.every((h) => /^https?:\/\//.test(h) || h.startsWith('/')), hrefs.join(' '));
  // The javascript: citation is rendered, but not as a link.
  const chip2 = dialog.locator('.anchored-answer .anchored-chip', { hasText: '2' }).first();
  assert.deepEqual(await chip2.evaluate((c) => [c.tagName, c.hasAttribute('href')]), ['BUTTON', false]);
  await chip2.click();
  // The safe citation is on this page: it highlights the literal markup text.
  await dialog.locator('.anchored-answer a.anchored-chip').first().click();
  await page.waitForSelector('mark.anchored-hl');
  const marked = await page.$$eval('mark.anchored-hl', (m) => m.map((x) => x.textContent).join(''));
  assert.equal(key(marked), key(FIXTURES.xss.citations[0].highlight));
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('Markdown in answers: every construct is built from elements and text, unsafe links stay text', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  await ask(page, 'Is <img src=x onerror=window.__xss=1> safe? xss');
  const answer = page.locator('dialog.anchored-dialog .anchored-answer');
  assert.equal(await answer.locator('img, script, b, iframe, object').count(), 0, 'no element made from data');
  const text = await answer.textContent();
  // links that leave the site (javascript:, protocol-relative, data:) are shown as their Markdown
  for (const src of ['[link](javascript:window.__xss=1)', '[protocol-relative one](//evil.example/x)', '[data one](data:text/html,<script>window.__xss=1</script>)', '[deep](javascript:window.__xss=1)']) {
    assert.ok(text.includes(src), `${src} shown as text`);
  }
  const links = await answer.locator('a:not(.anchored-chip)').evaluateAll((a) => a.map((x) => [x.getAttribute('href'), x.textContent]));
  assert.equal(links.length, 1, JSON.stringify(links));
  assert.ok(new URL(links[0][0]).pathname.endsWith('/user-guide/configuration/'), links[0][0]);
  assert.equal(links[0][1], '<img src=x onerror=window.__xss=1>', 'a safe link keeps markup in its label as text');
  // HTML inside a code block, inline code, bold and italic is text
  const codes = await answer.locator('pre code').allTextContents();
  assert.deepEqual(codes, ['<script>window.__xss=1</script><img src=x onerror=window.__xss=1>', 'x']);
  assert.deepEqual(await answer.locator('pre code').evaluateAll((c) => c.map((x) => x.className)), ['language-html', '']);
  assert.equal(await answer.locator('strong').first().textContent(), 'bold <img src=x onerror=window.__xss=1>');
  assert.equal(await answer.locator('em code').first().textContent(), '<b>code</b>');
  assert.ok((await answer.locator('code.anchored-code-inline').allTextContents()).includes('<script>window.__xss=1</script>'));
  assert.equal(await answer.locator('strong em').first().textContent(), 'italic [deep](javascript:window.__xss=1)');
  assert.ok(text.includes('**unclosed <b>.'), 'an unclosed marker stays text');
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('Markdown in answers: paragraphs, lists, code with language and copy, emphasis, site links', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'Show me the markdown example');
  const answer = page.locator('.anchored-turn').last().locator('.anchored-answer');
  assert.deepEqual(await answer.evaluate((a) => [...a.children].map((c) => c.tagName)), ['P', 'DIV', 'OL', 'UL']);
  assert.equal(await answer.locator('p strong').textContent(), 'mkdocs.yml');
  assert.equal(await answer.locator('p code').textContent(), 'plugins');
  const link = answer.locator('p a.anchored-link');
  assert.equal(await link.textContent(), 'endpoint section');
  assert.match(await link.getAttribute('href'), /^http:\/\/[^/]+\/(.*\/)?user-guide\/configuration\/#endpoint$/);
  const code = answer.locator('.anchored-code');
  assert.equal(await code.locator('.anchored-code__lang').textContent(), 'yaml');
  assert.equal(await code.locator('pre code.language-yaml').textContent(), 'plugins:\n  - search\n  - anchored:\n      widget_endpoint: https://api.example.com');
  assert.deepEqual(await code.locator('.anchored-chip').allTextContents(), ['3']);
  assert.deepEqual(await answer.locator('ol > li').evaluateAll((l) => l.map((x) => x.firstChild.textContent)), ['Install the package.', 'Build the site with mkdocs build.']);
  assert.equal(await answer.locator('ol em').textContent(), 'package');
  assert.equal(await answer.locator('ul em strong').textContent(), 'same origin');
  assert.ok((await answer.locator('ul').textContent()).includes('[the MkDocs site](https://www.mkdocs.org/user-guide/)'), 'an external link is text');
  assert.equal(await answer.locator('ul a:not(.anchored-chip)').count(), 0);
  // one .anchored-sentence per answer item, chips numbered in order
  assert.equal(await answer.locator('.anchored-sentence').count(), FIXTURES.markdown.answer.length);
  // the code block's copy button copies the code only
  await page.evaluate(() => {
    navigator.clipboard.writeText = async (t) => {
      window.__copied = t;
    };
  });
  await code.getByRole('button', { name: 'Copy code' }).click();
  assert.equal(await until(() => page.evaluate(() => window.__copied)), FIXTURES.markdown.answer[1].text.split('\n').slice(1, -1).join('\n'));
  await code.locator('.anchored-code__copy', { hasText: 'Copied' }).waitFor();
  // Copy answer keeps the Markdown (site link absolute, external link escaped)
  await page.evaluate(() => (window.__copied = null));
  await page.click('.anchored-turn:last-child .anchored-actions button:has-text("Copy answer")');
  const md = await until(() => page.evaluate(() => window.__copied));
  assert.match(md, /^Add the plugin to \*\*mkdocs\.yml\*\* under `plugins`, as the \[endpoint section\]\(http:\/\/\S+\/user-guide\/configuration\/#endpoint\) explains: \[1\]\n\n```yaml\nplugins:\n/);
  assert.ok(md.includes('\n1. Install the *package*. [2]\n2. Build the site with `mkdocs build`. [2]\n'));
  assert.ok(md.includes('\\[the MkDocs site\\](https://www.mkdocs.org/user-guide/)'));
  // a site link closes the dialog and navigates
  await Promise.all([page.waitForNavigation(), link.click()]);
  assert.match(page.url(), /\/user-guide\/configuration\/#endpoint$/);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test("mkdocs theme: code in answers gets the theme's highlight.js colouring", { skip: !MKDOCS_SITE && 'no default-theme site' }, async () => {
  const page = await newPage(browser);
  await page.goto(BASE + MKDOCS_SITE + OTHER);
  await page.waitForSelector('.anchored-open');
  // The theme's default (highlightjs: true) loads highlight.js 11.8.0 from cdnjs; the test
  // site turns it off to stay offline, so the same release is added from node_modules.
  await page.addScriptTag({ path: join(HERE, 'node_modules', '@highlightjs', 'cdn-assets', 'highlight.min.js') });
  await ask(page, 'Show me the markdown example');
  const code = page.locator('.anchored-turn').last().locator('pre code.language-yaml');
  await code.waitFor();
  assert.ok(await code.evaluate((c) => c.classList.contains('hljs') && c.querySelectorAll('span').length > 0), 'highlighted by hljs');
  assert.equal(await code.textContent(), 'plugins:\n  - search\n  - anchored:\n      widget_endpoint: https://api.example.com');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('abstention looks like one and links the sections the docs do cover', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, "What's the weather tomorrow?");
  const turn = page.locator('.anchored-turn').last();
  assert.equal(await turn.locator('.anchored-abstain__title').textContent(), 'The docs don’t seem to cover this.');
  assert.equal(await turn.locator('.anchored-chip').count(), 0);
  const links = await turn.locator('a.anchored-source').evaluateAll((a) => a.map((x) => [x.textContent, x.href]));
  assert.equal(links.length, FIXTURES.abstain.citations.length);
  assert.match(links[0][0], /Configuration › Endpoint/);
  assert.match(links[0][1], /\/user-guide\/configuration\/\?anchored-hl=.+#endpoint$/);
  assert.match(links[2][1], /\/user-guide\/highlighting\/\?anchored-hl=.+#how-links-work$/);
  await page.context().close();
});

test('extractive answers are labelled as quotes', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'Where is the cache? extractive');
  assert.equal(
    await page.locator('.anchored-turn').last().locator('.anchored-badge').textContent(),
    'Quoted from the docs',
  );
  await page.context().close();
});

test('a tentative extractive answer is labelled as the closest passage', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'Where is the cache? closest');
  const badge = page.locator('.anchored-turn').last().locator('.anchored-badge');
  assert.equal(await badge.textContent(), 'Closest passage in the docs');
  assert.match(await badge.getAttribute('title'), /may not answer this exactly/);
  assert.equal(await page.locator('.anchored-turn').last().locator('.anchored-answer').count(), 1);
  await page.context().close();
});

for (const [name, question, expected, prepare] of [
  ['503', 'Is the service down?', /unavailable right now/, null],
  ['429', 'busy: how do I configure it?', /Too many questions.*20 s/, null],
  ['network error', 'How do I configure the endpoint?', /can’t be reached/, (p) => p.route('**/v1/ask', (r) => r.abort('connectionrefused'))],
  ['unreadable reply', 'garbage please', /unreadable|unavailable/, null],
]) {
  test(`endpoint trouble (${name}): clear message, retry, a link to the ordinary search; page unharmed`, async () => {
    const page = await newPage(browser);
    await open(page, OTHER);
    if (prepare) await prepare(page);
    await ask(page, question);
    const err = page.locator('.anchored-turn').last().locator('.anchored-error');
    assert.match(await err.locator('.anchored-error__title').textContent(), expected);
    assert.equal(await err.getAttribute('role'), 'alert');
    assert.equal(await err.locator('button', { hasText: 'Try again' }).count(), 1);
    const link = err.locator('a.anchored-search-link');
    assert.ok((await link.getAttribute('href')).endsWith('?q=' + encodeURIComponent(question)));
    // Material: the link opens Material's own search with the question filled in.
    await link.click();
    assert.ok(await page.evaluate(() => document.getElementById('__search').checked));
    assert.equal(await page.inputValue('.md-search__input'), question);
    assert.ok(await page.locator('dialog.anchored-dialog').evaluate((d) => !d.open));
    assert.deepEqual(page.errors, []);
    await page.context().close();
  });
}

test('waiting shows stages and Cancel aborts the request', async () => {
  const page = await newPage(browser);
  // The reply is held until the test has looked and cancelled. The harness's "slow" reply
  // (4 s) came before the Cancel click on a busy machine, leaving nothing to cancel.
  let release;
  const held = new Promise((r) => (release = r));
  await page.route('**/v1/ask', async (route) => {
    await held;
    await route.continue().catch(() => {}); // cancelled by then: nothing to continue
  });
  await open(page, OTHER);
  await page.click('.anchored-open');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  await page.fill('.anchored-input', 'slow question about the endpoint');
  await page.press('.anchored-input', 'Enter');
  const stage = page.locator('.anchored-stage');
  await stage.waitFor();
  // No reply yet, so no stage reported: the line says so, and no timer makes one up.
  assert.equal(await stage.textContent(), 'Waiting for the docs assistant…');
  assert.equal(await page.getAttribute('.anchored-status', 'role'), 'status');
  await page.waitForTimeout(2000);
  assert.equal(await stage.textContent(), 'Waiting for the docs assistant…');
  const failed = page.waitForEvent('requestfailed');
  await page.click('.anchored-form button:has-text("Cancel")');
  assert.match((await failed).url(), /\/v1\/ask$/);
  await page.locator('.anchored-turn .anchored-meta', { hasText: 'Cancelled.' }).waitFor();
  assert.equal(await page.inputValue('.anchored-input'), 'slow question about the endpoint', 'question kept for a retry');
  assert.ok(await page.locator('.anchored-status').isHidden());
  release();
  await page.context().close();
});

test('a reply slower than the timeout gives a clear message', async (t) => {
  if (!(await isHarness())) return t.skip('needs the harness to shorten the timeout');
  const page = await newPage(browser);
  await open(page, OTHER, { query: '?harness-config=' + encodeURIComponent('{"timeout":1200}') });
  await ask(page, 'slow one');
  assert.match(await page.textContent('.anchored-error__title'), /taking too long/);
  await page.context().close();
});

test('keyboard only: shortcut, Tab to a chip, Esc closes and focus returns to the opener', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  // The shortcut does not fire while typing in an input (Material's search box).
  await page.focus('.md-search__input');
  await page.keyboard.press('a');
  assert.ok(!(await page.$('dialog.anchored-dialog[open]')));
  assert.equal(await page.inputValue('.md-search__input'), 'a');
  await page.keyboard.press('Escape');
  await page.evaluate(() => document.activeElement.blur());

  // Reach the Ask button with Tab, open it with Enter.
  let onButton = false;
  for (let i = 0; i < 40 && !onButton; i++) {
    await page.keyboard.press('Tab');
    onButton = await page.evaluate(() => document.activeElement.classList.contains('anchored-open'));
  }
  assert.ok(onButton, 'the Ask button is reachable with Tab');
  await page.keyboard.press('Enter');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  assert.ok(await page.evaluate(() => document.activeElement.classList.contains('anchored-input')));
  await page.keyboard.type('How do I configure the endpoint?');
  await page.keyboard.press('Enter');
  await page.waitForSelector('.anchored-chip');
  // The answer streams: the final record redraws the turn, and a chip focused before it
  // would be gone. Walk the finished answer (what a reader tabs through).
  await page.waitForFunction(() => {
    const last = [...document.querySelectorAll('.anchored-turn')].pop();
    return last && !last.classList.contains('anchored-turn--live') && last.querySelector('.anchored-a .anchored-chip');
  });
  // Shift+Tab from the input walks back into the answer and reaches the last chip.
  let onChip = false;
  for (let i = 0; i < 30 && !onChip; i++) {
    await page.keyboard.press('Shift+Tab');
    onChip = await page.evaluate(() => document.activeElement.classList.contains('anchored-chip'));
  }
  assert.ok(onChip, 'chips are reachable with the keyboard');
  assert.ok(await page.locator('.anchored-tip').isVisible(), 'focus shows the preview');
  // Focus stays inside the dialog (modal).
  for (let i = 0; i < 25; i++) {
    await page.keyboard.press('Tab');
    assert.ok(await page.evaluate(() => !!document.activeElement.closest('dialog.anchored-dialog') || document.activeElement === document.body));
  }
  await page.keyboard.press('Escape'); // hides the preview if one is shown
  await page.keyboard.press('Escape');
  await page.waitForFunction(() => !document.querySelector('dialog.anchored-dialog').open);
  assert.ok(await page.evaluate(() => document.activeElement.classList.contains('anchored-open')), 'focus returned to the Ask button');

  // The shortcut opens it from the page; closing returns focus to the button.
  await page.keyboard.press('a');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  await page.keyboard.press('Escape');
  await page.waitForFunction(() => !document.querySelector('dialog.anchored-dialog').open);
  assert.ok(await page.evaluate(() => document.activeElement.classList.contains('anchored-open')));
  await page.context().close();
});

test('the answer region is polite-live and the dialog is labelled', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await page.click('.anchored-open');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  assert.equal(await page.getAttribute('.anchored-log', 'aria-live'), 'polite');
  const labelled = await page.$eval('dialog.anchored-dialog', (d) => document.getElementById(d.getAttribute('aria-labelledby')).textContent);
  assert.equal(labelled, 'Ask the docs');
  assert.equal(await page.getAttribute('.anchored-open', 'aria-keyshortcuts'), 'a');
  await page.context().close();
});

test('works at 375 px: dialog fits the screen, nothing scrolls sideways', async () => {
  const page = await newPage(browser, { viewport: { width: 375, height: 720 }, isMobile: true, hasTouch: true });
  await open(page, OTHER);
  assert.ok(await page.locator('.anchored-open').isVisible(), 'the Ask button is visible on a phone');
  await ask(page, 'How do I configure the endpoint?');
  const box = await page.locator('dialog.anchored-dialog').boundingBox();
  assert.ok(box.x >= 0 && box.width <= 375, JSON.stringify(box));
  const overflow = await page.evaluate(() => {
    const d = document.querySelector('.anchored-frame');
    return [d.scrollWidth, d.clientWidth];
  });
  assert.ok(overflow[0] <= overflow[1], `frame scrolls sideways: ${overflow}`);
  assert.ok(await page.locator('.anchored-chip').first().isVisible());
  assert.ok(await page.locator('.anchored-input').isVisible());
  await page.context().close();
});

for (const [theme, site] of [['Material', SITE], ['mkdocs theme', MKDOCS_SITE]]) {
  test(`${theme}: the Ask button is visible and labelled at 1280, 768 and 375 px`, { skip: !site && 'no such site' }, async () => {
    for (const width of [1280, 768, 375]) {
      const page = await newPage(browser, { viewport: { width, height: 700 }, isMobile: width < 500, hasTouch: width < 500 });
      await open(page, OTHER, { site });
      const btn = page.locator('.anchored-open');
      assert.ok(await btn.isVisible(), `${width} px: Ask button visible without opening a menu`);
      const label = btn.locator('.anchored-open__label');
      assert.ok(await label.isVisible(), `${width} px: the button shows its label`);
      assert.equal(await label.textContent(), 'Ask');
      const box = await btn.boundingBox();
      assert.ok(box.x >= 0 && box.x + box.width <= width, `${width} px: button inside the screen ${JSON.stringify(box)}`);
      await btn.click();
      await page.waitForSelector('dialog.anchored-dialog[open]');
      await page.context().close();
    }
  });
}

test('the scope selector shows its whole label at 1280, 768 and 375 px', async () => {
  for (const width of [1280, 768, 375]) {
    const page = await newPage(browser, { viewport: { width, height: 700 } });
    await open(page, PAGE);
    await page.click('.anchored-open');
    await page.waitForSelector('dialog.anchored-dialog[open]');
    await page.selectOption('.anchored-scope__select', 'user-guide/');
    const [need, have] = await page.$eval('.anchored-scope__select', (sel) => {
      const probe = document.createElement('span');
      probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap;font:' + getComputedStyle(sel).font;
      probe.textContent = sel.options[sel.selectedIndex].text;
      document.body.append(probe);
      const w = probe.getBoundingClientRect().width;
      probe.remove();
      return [w, sel.getBoundingClientRect().width];
    });
    assert.ok(have >= need + 12, `${width} px: "This section: User guide" needs ${need} px, the select is ${have} px`);
    await page.context().close();
  }
});

const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;

/**
 * Wait until the page has loaded and the passage and the pill have stopped moving: the
 * widget places the passage when it marks it and again once images and fonts have loaded,
 * which on a busy machine can come later than any fixed pause (it was 200 ms here).
 */
async function settled(page) {
  await page.waitForLoadState('load');
  let last = null;
  const still = await until(async () => {
    const now = await page.evaluate(async () => {
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      const box = (x) => (x ? JSON.stringify(x.getBoundingClientRect()) : '');
      return [scrollY, box(document.querySelector('.anchored-pill')), box(document.querySelector('mark.anchored-hl'))].join(' ');
    });
    const same = now === last;
    last = now;
    return same;
  }, 10000);
  assert.ok(still, `the passage and the pill kept moving: ${last}`);
}

for (const width of [1280, 375]) {
  test(`${width} px: a chip's preview never covers the sentence it belongs to`, async () => {
    const page = await newPage(browser, { viewport: { width, height: 720 }, isMobile: width < 500, hasTouch: width < 500 });
    await open(page, OTHER);
    await ask(page, 'How do I configure the endpoint?');
    const chips = page.locator('.anchored-answer .anchored-chip');
    for (let i = 0; i < (await chips.count()); i++) {
      await chips.nth(i).focus();
      await page.locator('.anchored-tip').waitFor({ state: 'visible' });
      const hit = await chips.nth(i).evaluate((chip) => {
        const tip = document.querySelector('.anchored-tip').getBoundingClientRect();
        let s = chip.previousElementSibling;
        while (s && !s.classList.contains('anchored-sentence')) s = s.previousElementSibling;
        const boxes = [chip.getBoundingClientRect(), ...s.getClientRects()];
        return boxes.some((b) => b.left < tip.right && tip.left < b.right && b.top < tip.bottom && tip.top < b.bottom);
      });
      assert.equal(hit, false, `preview of chip ${i + 1} covers its sentence`);
    }
    await page.context().close();
  });

  test(`${width} px: the pill never covers the highlighted passage (paragraph, table, list, code)`, async () => {
    for (const c of FIXTURES.default.citations.filter((x) => x.url.startsWith(PAGE))) {
      const page = await newPage(browser, { viewport: { width, height: width < 500 ? 720 : 800 }, isMobile: width < 500, hasTouch: width < 500 });
      await open(page, OTHER);
      await ask(page, 'How do I configure the endpoint?');
      await Promise.all([page.waitForNavigation(), page.locator('.anchored-answer .anchored-chip', { hasText: new RegExp(`^${c.n}$`) }).first().click()]);
      await page.waitForSelector('mark.anchored-hl');
      await page.waitForSelector('.anchored-pill');
      await settled(page);
      const [pill, marks, inView] = await page.evaluate(() => {
        const p = document.querySelector('.anchored-pill').getBoundingClientRect();
        const m = [...document.querySelectorAll('mark.anchored-hl')].map((x) => x.getBoundingClientRect());
        return [p.toJSON(), m.map((r) => r.toJSON()), m.some((r) => r.top >= 0 && r.bottom <= innerHeight)];
      });
      assert.ok(inView, `[${c.n}] passage in view`);
      const covered = marks.filter((m) => m.bottom > 0 && m.top < (width < 500 ? 720 : 800) && overlap(m, pill));
      assert.deepEqual(covered, [], `[${c.n}] at ${width} px the pill ${JSON.stringify(pill)} covers marks`);
      if (width < 500) assert.ok(pill.height < 60, `one compact row on a phone: ${pill.height} px`);
      await page.screenshot({ path: join(SHOTS, `pill-${width}-${c.n}.png`) });
      await page.context().close();
    }
  });
}

test('Back after a citation to another page returns with the conversation showing', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  await Promise.all([page.waitForNavigation(), page.locator('.anchored-answer .anchored-chip').nth(2).click()]);
  await page.waitForSelector('mark.anchored-hl');
  await page.goBack();
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-turn .anchored-chip');
  assert.ok(new URL(page.url()).pathname.endsWith('/' + OTHER));
  assert.equal(await page.locator('.anchored-turn').count(), 1);
  // closed by the reader, a reload does not pop it up again
  await page.keyboard.press('Escape');
  await page.reload();
  await page.waitForSelector('.anchored-open');
  await page.waitForTimeout(300);
  assert.ok(!(await page.$('dialog.anchored-dialog[open]')));
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('Back after a citation on the same page stays on the page and shows the conversation', async () => {
  const page = await newPage(browser);
  await open(page, PAGE);
  await ask(page, 'How do I configure the endpoint?');
  const before = page.url();
  await page.locator('.anchored-answer .anchored-chip', { hasText: /^1$/ }).first().click();
  await page.waitForSelector('mark.anchored-hl');
  assert.ok(await page.locator('dialog.anchored-dialog').evaluate((d) => !d.open));
  await page.goBack();
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-turn .anchored-chip');
  assert.equal(new URL(page.url()).pathname, new URL(before).pathname, 'still on the page');
  assert.equal(await page.locator('mark.anchored-hl').count(), 0, 'the highlight is cleared');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the conversation survives navigation: "Back to answer" reopens it', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await ask(page, 'How do I configure the endpoint?');
  await Promise.all([page.waitForNavigation(), page.locator('.anchored-answer .anchored-chip').nth(2).click()]);
  await page.click('.anchored-pill button:has-text("Back to answer")');
  await page.waitForSelector('dialog.anchored-dialog[open] .anchored-chip');
  assert.equal(await page.textContent('.anchored-q'), 'You asked: How do I configure the endpoint?');
  // "New conversation" clears it.
  await page.click('[aria-label="New conversation"]');
  assert.equal(await page.locator('.anchored-turn').count(), 0);
  assert.ok(await page.locator('.anchored-intro').isVisible());
  await page.context().close();
});
