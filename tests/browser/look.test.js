// How it looks: both Material palettes, the default theme, a phone. Screenshots go to
// the screenshots folder (helpers.js: SHOTS); the assertions check the highlight is visible.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { FIXTURES, MKDOCS_SITE, OTHER, PAGE, SHOTS, ask, fileBrowser, newPage, open } from './helpers.js';

const browser = await fileBrowser();

async function dark(page) {
  // Use Material's own palette toggle, as a reader would.
  await page.evaluate(() => document.querySelector('label[for="__palette_1"]').click());
  await page.waitForFunction(() => document.body.getAttribute('data-md-color-scheme') === 'slate');
}

/** Colours of the first mark: text contrast on the blended highlight, and how far the highlight is from the page. */
function markColours(page) {
  return page.evaluate(() => {
    const rgba = (s) => {
      const m = s.match(/[\d.]+/g).map(Number);
      return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 };
    };
    const over = (top, under) => ({
      r: top.r * top.a + under.r * (1 - top.a),
      g: top.g * top.a + under.g * (1 - top.a),
      b: top.b * top.a + under.b * (1 - top.a),
      a: 1,
    });
    const lum = (c) => {
      const f = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
    };
    const mark = document.querySelector('mark.anchored-hl');
    let page = { r: 255, g: 255, b: 255, a: 1 };
    for (let n = mark.parentElement; n; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor);
      if (c.a > 0) {
        page = c;
        break;
      }
    }
    const bg = over(rgba(getComputedStyle(mark).backgroundColor), page);
    const fg = over(rgba(getComputedStyle(mark).color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    return {
      contrast: (hi + 0.05) / (lo + 0.05),
      distance: Math.hypot(bg.r - page.r, bg.g - page.g, bg.b - page.b),
    };
  });
}

for (const scheme of ['light', 'dark']) {
  test(`Material ${scheme} palette: the highlight is clearly visible and readable; screenshots`, async () => {
    const page = await newPage(browser);
    await open(page, OTHER);
    if (scheme === 'dark') await dark(page);
    await ask(page, 'How do I configure the endpoint?');
    await page.locator('.anchored-answer .anchored-chip').nth(1).hover();
    await page.locator('.anchored-tip').waitFor();
    await page.screenshot({ path: join(SHOTS, `material-${scheme}-answer.png`) });
    await Promise.all([page.waitForNavigation(), page.locator('.anchored-answer .anchored-chip').first().click()]);
    if (scheme === 'dark') {
      assert.equal(await page.getAttribute('body', 'data-md-color-scheme'), 'slate', 'palette kept across pages');
    }
    await page.waitForSelector('mark.anchored-hl');
    await page.mouse.move(0, 400);
    // Let the highlight's flash animation finish.
    await page.$$eval('mark.anchored-hl', (m) => Promise.all(m.flatMap((x) => x.getAnimations().map((a) => a.finished))));
    const c = await markColours(page);
    assert.ok(c.contrast >= 4.5, `text contrast on the highlight ${c.contrast.toFixed(2)}`);
    assert.ok(c.distance >= 60, `highlight too close to the page colour (${c.distance.toFixed(0)})`);
    await page.screenshot({ path: join(SHOTS, `material-${scheme}-highlight.png`) });
    await page.context().close();
  });
}

test('Material dark palette: the dialog uses the palette colours', async () => {
  const page = await newPage(browser);
  await open(page, OTHER);
  await dark(page);
  await page.click('.anchored-open');
  await page.waitForSelector('dialog.anchored-dialog[open]');
  const [dialogBg, pageBg] = await page.evaluate(() => [
    getComputedStyle(document.querySelector('dialog.anchored-dialog')).backgroundColor,
    getComputedStyle(document.body).getPropertyValue('--md-default-bg-color').trim(),
  ]);
  assert.ok(pageBg.startsWith('hsla') || pageBg.startsWith('rgb'));
  const [r, g, b] = dialogBg.match(/\d+/g).map(Number);
  assert.ok(r + g + b < 200, `dialog background is dark in slate: ${dialogBg}`);
  await page.context().close();
});

test("MkDocs' default theme and a 375 px phone: screenshots", async (t) => {
  const phone = await newPage(browser, { viewport: { width: 375, height: 720 }, isMobile: true, hasTouch: true });
  await open(phone, OTHER);
  await ask(phone, 'How do I configure the endpoint?');
  await phone.screenshot({ path: join(SHOTS, 'material-375px.png') });
  await phone.context().close();
  if (!MKDOCS_SITE) return t.skip('ANCHORED_TEST_MKDOCS_SITE is empty');
  const page = await newPage(browser);
  await open(page, OTHER, { site: MKDOCS_SITE });
  await ask(page, 'How do I configure the endpoint?');
  await page.screenshot({ path: join(SHOTS, 'mkdocs-answer.png') });
  await open(page, PAGE, { site: MKDOCS_SITE, query: '?anchored-hl=' + encodeURIComponent(FIXTURES.default.citations[2].highlight.split(/\s+/).slice(0, 5).join(' ')) + '#install-steps' });
  await page.waitForSelector('mark.anchored-hl');
  await page.screenshot({ path: join(SHOTS, 'mkdocs-highlight.png') });
  await page.context().close();
});

/** Text contrast of `sel` on its own (or the nearest painted) background. */
function contrastOf(page, sel) {
  return page.$eval(sel, (el) => {
    const rgba = (s) => {
      const m = s.match(/[\d.]+/g).map(Number);
      return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 };
    };
    const over = (t, u) => ({ r: t.r * t.a + u.r * (1 - t.a), g: t.g * t.a + u.g * (1 - t.a), b: t.b * t.a + u.b * (1 - t.a), a: 1 });
    const lum = (c) => {
      const f = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
    };
    const layers = [];
    for (let n = el; n; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor);
      if (c.a > 0) layers.push(c);
      if (c.a === 1) break;
    }
    const bg = layers.reverse().reduce((u, t) => over(t, u), { r: 255, g: 255, b: 255, a: 1 });
    const fg = over(rgba(getComputedStyle(el).color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    return (hi + 0.05) / (lo + 0.05);
  });
}

// Code in answers (the docs' pictures): both palettes, desktop and phone.
for (const [scheme, width] of [['light', 1280], ['dark', 1280], ['light', 375], ['dark', 375]]) {
  test(`Material ${scheme} ${width} px: an answer with a code block, list and emphasis is readable; screenshot`, async () => {
    const page = await newPage(browser, { viewport: { width, height: width < 500 ? 720 : 800 }, isMobile: width < 500, hasTouch: width < 500 });
    await open(page, OTHER);
    if (scheme === 'dark') await dark(page);
    await ask(page, 'Show me the markdown example');
    const code = page.locator('.anchored-turn .anchored-code').last();
    await code.scrollIntoViewIfNeeded();
    for (const sel of ['.anchored-turn pre code', '.anchored-turn .anchored-code__lang', '.anchored-turn code.anchored-code-inline', '.anchored-turn .anchored-list li']) {
      const c = await contrastOf(page, sel);
      assert.ok(c >= 4.5, `${sel}: contrast ${c.toFixed(2)} in ${scheme}`);
    }
    const box = await code.boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= width, `code block fits the screen: ${JSON.stringify(box)}`);
    await page.locator('.anchored-body').evaluate((b) => (b.scrollTop = 0));
    await page.screenshot({ path: join(SHOTS, `code-${scheme}-${width}.png`) });
    await page.context().close();
  });
}
