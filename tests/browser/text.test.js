// plugin/assets/text.js and markdown.js are plain logic: tested in Node without a browser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { answerBlocks, inlineText, itemText, parseFence, parseInline, siteLink, toMarkdown } from '../../plugin/assets/markdown.js';
import {
  citationHref,
  citationPath,
  decodeSpec,
  encodeSpec,
  findSpan,
  groupByPage,
  readParam,
  resolveUrl,
  sectionPrefix,
  specFor,
  stripParam,
  toKey,
} from '../../plugin/assets/text.js';

const ROOT = new URL('https://docs.example.com/proj/');

test('the matching key ignores case, whitespace, pilcrows and table separators', () => {
  assert.equal(toKey('Option | Default\n  endpoint ¶'), 'optiondefaultendpoint');
  assert.equal(toKey('a\u00a0b\u200bc'), 'abc');
});

test('short passages are kept whole, long ones by their ends plus the matching length', () => {
  assert.deepEqual(specFor('Add anchored to the plugins list.'), { start: 'Add anchored to the plugins list.' });
  const long = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen';
  const spec = specFor(long);
  assert.equal(spec.start, 'one two three four five six');
  assert.equal(spec.end, 'nine ten eleven twelve thirteen fourteen');
  assert.equal(spec.len, toKey(long).length);
  // Table text: separators never reach the link.
  assert.equal(specFor('a | b\nc | d').start, 'a b c d');
});

test('passages without spaces (CJK, long code) are cut by characters without overlap', () => {
  const cjk = '配置文件中的端点选项决定了查询接口的基础地址'.repeat(8);
  const spec = specFor(cjk);
  assert.ok(spec.start.length <= 60 && spec.end.length <= 60);
  const [a, b] = findSpan(toKey(cjk), spec);
  assert.equal(b - a, toKey(cjk).length);
});

test('specs survive the round trip through a URL, including ~ and + in the text', () => {
  for (const text of ['a~b c+d e', 'plugins:\n  - anchored: {endpoint: https://x.y/}', 'x '.repeat(30) + 'end~~', 'Ünïcode ß straße']) {
    const spec = specFor(text);
    const value = encodeSpec(spec);
    assert.doesNotMatch(value, /[\s#&]/);
    const url = new URL(`https://h/p/?a=1&anchored-hl=${value}#frag`);
    assert.deepEqual(decodeSpec(readParam(url.search)), spec);
  }
});

test('the highlight parameter is read and stripped, other parameters kept', () => {
  assert.equal(readParam('?q=1&anchored-hl=abc~def~12'), 'abc~def~12');
  assert.equal(readParam('?q=1'), null);
  assert.equal(stripParam('?q=1&anchored-hl=abc&h=x'), '?q=1&h=x');
  assert.equal(stripParam('?anchored-hl=abc'), '');
  assert.equal(decodeSpec('%E0%A4%A'), null); // broken escapes do not throw
});

test('the length picks the right pair when the start words repeat in the section', () => {
  const section = toKey(
    'The default value is used when nothing is set. The cache is rebuilt when the model changes. ' +
      'The default value is used when nothing is set. The index is rebuilt when any page changes.',
  );
  const passage = 'The default value is used when nothing is set. The index is rebuilt when any page changes.';
  const [a, b] = findSpan(section, specFor(passage));
  assert.equal(section.slice(a, b), toKey(passage));
});

test('a search starts at the anchored section and returns null when absent', () => {
  const text = toKey('alpha beta gamma. section two: alpha beta gamma.');
  const [a] = findSpan(text, { start: 'alpha beta' }, text.indexOf('two'));
  assert.ok(a > text.indexOf('two'));
  assert.equal(findSpan(text, { start: 'not there' }), null);
});

test('citation links stay on http(s) and carry the highlight', () => {
  const href = citationHref({ url: 'user-guide/config/#endpoint', highlight: 'Set the endpoint option.' }, ROOT);
  assert.equal(href, 'https://docs.example.com/proj/user-guide/config/?anchored-hl=Set+the+endpoint+option.#endpoint');
  assert.equal(citationHref({ url: 'javascript:alert(1)//#x', highlight: 'x' }, ROOT), null);
  assert.equal(resolveUrl('data:text/html,hi', ROOT), null);
  assert.equal(resolveUrl(' JAVASCRIPT:alert(1)', ROOT), null);
});

test('section prefix, citation path and grouping by page', () => {
  assert.equal(sectionPrefix('user-guide/config/'), 'user-guide/');
  assert.equal(sectionPrefix(''), '');
  assert.equal(sectionPrefix('index.html'), '');
  // The API: title = the section, heading_path = page title … section.
  assert.equal(citationPath({ title: 'Endpoint', heading_path: ['Config', 'Endpoint'] }), 'Config › Endpoint');
  assert.equal(citationPath({ title: 'Config', heading_path: ['Config', 'Endpoint'] }), 'Config › Endpoint');
  assert.equal(citationPath({ title: 'Config', heading_path: ['Endpoint'] }), 'Config › Endpoint');
  assert.equal(citationPath({ title: 'Config', heading_path: [] }), 'Config');
  assert.equal(groupByPage([{ n: 1, url: 'a/#x', title: 'X', heading_path: ['Page A', 'X'] }])[0].title, 'Page A');
  const groups = groupByPage([{ n: 1, url: 'a/#x', title: 'A' }, { n: 2, url: 'b/#y', title: 'B' }, { n: 3, url: 'a/#z', title: 'A' }]);
  assert.deepEqual(groups.map((g) => [g.page, g.items.map((c) => c.n)]), [['a/', [1, 3]], ['b/', [2]]]);
});

test('copy as Markdown: sentences with [n] references and absolute link definitions', () => {
  const md = toMarkdown(
    {
      answer: [{ text: 'Use `endpoint` <here>.', citations: [1, 2] }, { text: 'Done.', citations: [] }],
      citations: [
        { n: 1, url: 'a/#x', title: 'A', heading_path: ['A', 'X'], highlight: 'hello world' },
        { n: 2, url: 'javascript:x', title: 'B', heading_path: [], highlight: 'y' },
      ],
    },
    (c) => citationHref(c, ROOT),
  );
  assert.equal(md, 'Use `endpoint` \\<here\\>. [1] [2] Done.\n\n[1]: https://docs.example.com/proj/a/?anchored-hl=hello+world#x "A › X"\n');
});

test('copy as Markdown keeps lists, code blocks, emphasis and site links; other links become text', () => {
  const link = (h) => (siteLink(h, ROOT) || {}).href || null;
  const md = toMarkdown(
    {
      answer: [
        { text: 'Add **this** to [the config](a/#x):', citations: [1] },
        { text: '```yaml\nplugins:\n  - anchored\n```', citations: [1] },
        { text: '1. one *step*', citations: [1] },
        { text: '2. [two](https://evil.example/)', citations: [] },
      ],
      citations: [],
    },
    () => null,
    link,
  );
  assert.equal(
    md,
    'Add **this** to [the config](https://docs.example.com/proj/a/#x): [1]\n\n```yaml\nplugins:\n  - anchored\n```\n\n1. one *step* [1]\n2. \\[two\\](https://evil.example/)\n',
  );
});

const T = (v) => ({ t: 'text', v });

test('inline Markdown: code, bold, italic, nesting, escapes; stray markers stay text', () => {
  assert.deepEqual(parseInline('Use `a*b` and **bold *it* x**'), [
    T('Use '), { t: 'code', v: 'a*b' }, T(' and '), { t: 'strong', kids: [T('bold '), { t: 'em', kids: [T('it')] }, T(' x')] },
  ]);
  assert.deepEqual(parseInline('*it **b** i*'), [{ t: 'em', kids: [T('it '), { t: 'strong', kids: [T('b')] }, T(' i')] }]);
  assert.deepEqual(parseInline('***both***'), [{ t: 'em', kids: [{ t: 'strong', kids: [T('both')] }] }]);
  assert.deepEqual(parseInline('2 * 3 * 4'), [T('2 * 3 * 4')]);
  assert.deepEqual(parseInline('**unclosed and `open'), [T('**unclosed and `open')]);
  assert.deepEqual(parseInline('\\*not em\\* snake_case_name'), [T('*not em* snake_case_name')]);
  assert.deepEqual(parseInline('``a `tick` b``'), [{ t: 'code', v: 'a `tick` b' }]);
  assert.deepEqual(parseInline('`**not bold**`'), [{ t: 'code', v: '**not bold**' }]);
  assert.deepEqual(parseInline('<b>x</b>'), [T('<b>x</b>')]);
  // deep nesting pairs up in linear-ish time; unpaired runs keep every character
  const deep = '*a '.repeat(50) + 'x' + ' a*'.repeat(50);
  assert.equal(itemText(deep), 'a '.repeat(50) + 'x' + ' a'.repeat(50));
  // CPU time, not the wall clock: the bound is on the parser's work (a quadratic or worse
  // pairing takes seconds), and a busy machine stretches the wall clock, not the work.
  const t0 = process.cpuUsage();
  const hostile = '*a **b '.repeat(400) + '[x]('.repeat(200) + '`'.repeat(300);
  assert.equal(itemText(hostile), hostile);
  const { user, system } = process.cpuUsage(t0);
  const ms = (user + system) / 1000;
  assert.ok(ms < 500, `${ms} ms of CPU for a hostile line`);
});

test('links: [text](url) parsed; only links that stay under the site root are links', () => {
  const [link] = parseInline('[the **config**](a/(b)#x)');
  assert.equal(link.t, 'link');
  assert.equal(link.href, 'a/(b)#x');
  assert.deepEqual(link.kids, [T('the '), { t: 'strong', kids: [T('config')] }]);
  assert.equal(siteLink('user-guide/#x', ROOT).href, 'https://docs.example.com/proj/user-guide/#x');
  assert.equal(siteLink('/proj/a/', ROOT).href, 'https://docs.example.com/proj/a/');
  for (const bad of ['javascript:alert(1)', 'JaVaScRiPt:alert(1)', ' javascript:alert(1)', 'java\tscript:x', 'data:text/html,x',
    '//evil.example/x', 'https://evil.example/', 'https://docs.example.com/other/', '/other/', 'vbscript:x', '\\\\evil/x', '']) {
    assert.equal(siteLink(bad, ROOT), null, bad);
  }
  assert.equal(itemText('see [x](javascript:alert(1)) now', (h) => !!siteLink(h, ROOT)), 'see [x](javascript:alert(1)) now');
  assert.equal(itemText('see [x](a/) now', (h) => !!siteLink(h, ROOT)), 'see x now');
});

test('blocks: code fences with a language, list runs, paragraphs; citations stay with their item', () => {
  assert.deepEqual(parseFence('```yaml\na: 1\n```'), { lang: 'yaml', title: '', code: 'a: 1' });
  assert.deepEqual(parseFence('~~~ {.python}\nx\n~~~'), { lang: 'python', title: '', code: 'x' });
  assert.deepEqual(parseFence('```<img src=x>\nx\n```'), { lang: '', title: '', code: 'x' });
  assert.deepEqual(parseFence('````md\n```\ninner\n```\n````'), { lang: 'md', title: '', code: '```\ninner\n```' });
  const blocks = answerBlocks([
    { text: 'Intro:', citations: [1] },
    { text: '1. one', citations: [1] },
    { text: '2. two', citations: [] },
    { text: '- dash', citations: [2] },
    { text: '```sh\npip install x\n```', citations: [2] },
    { text: 'First.\n\nSecond.', citations: [3] },
  ]);
  assert.deepEqual(blocks.map((b) => [b.type, b.ordered, b.items ? b.items.length : b.lang]), [
    ['p', undefined, 1], ['list', true, 2], ['list', false, 1], ['code', undefined, 'sh'], ['p', undefined, 1], ['p', undefined, 1],
  ]);
  assert.deepEqual(blocks[4].items[0].item.citations, []);
  assert.deepEqual(blocks[5].items[0].item.citations, [3]);
  assert.equal(answerBlocks([{ text: '3. three', citations: [] }])[0].start, 3);
  assert.equal(itemText('```yaml\na: 1\n```'), 'a: 1');
  assert.equal(itemText('- **bold** `x`'), 'bold x');
});

test('tables: a header, a rule and rows make one table block; cells keep their inline Markdown', () => {
  const item = {
    text: '| option | default | meaning |\n|---|---|---|\n| `widget_shortcut` | / | Key that opens the dialog; `a\\|b` is one cell. |',
    citations: [2],
  };
  const [b] = answerBlocks([item]);
  assert.equal(b.type, 'table');
  assert.equal(b.item, item);
  assert.equal(b.header.length, 3);
  assert.equal(b.rows.length, 1);
  assert.deepEqual(b.rows[0][0], [{ t: 'code', v: 'widget_shortcut' }]);
  assert.equal(inlineText(b.rows[0][2]), 'Key that opens the dialog; a|b is one cell.');
  // A short row is filled to the header's width; a missing rule is not a table.
  const [short] = answerBlocks([{ text: '| a | b |\n|---|---|\n| 1 |', citations: [] }]);
  assert.deepEqual(short.rows[0].map(inlineText), ['1', '']);
  assert.equal(answerBlocks([{ text: '| a | b |\n| 1 | 2 |', citations: [] }])[0].type, 'p');
  // What a reader sees (the drawn table's text) and the Markdown copy.
  assert.equal(itemText(item.text), 'optiondefaultmeaningwidget_shortcut/Key that opens the dialog; a|b is one cell.');
  const md = toMarkdown({ answer: [item], citations: [{ n: 2, url: 'configuration/#options', title: 'Options' }] }, () => 'https://x/');
  assert.ok(md.startsWith('| option | default | meaning |\n|---|---|---|\n| `widget_shortcut` | / | Key that opens the dialog; `a\\|b` is one cell. |\n\n[2]'), md);
});

test('a code block title in the fence info is the block caption, kept in the Markdown copy', () => {
  const item = { text: '```yaml title="mkdocs.yml"\nplugins:\n  - anchored\n```', citations: [1] };
  const [b] = answerBlocks([item]);
  assert.equal(b.type, 'code');
  assert.equal(b.lang, 'yaml');
  assert.equal(b.title, 'mkdocs.yml');
  assert.equal(b.code, 'plugins:\n  - anchored');
  assert.equal(itemText(item.text), 'plugins:\n  - anchored');
  const md = toMarkdown({ answer: [item], citations: [] }, () => null);
  assert.ok(md.startsWith('```yaml title="mkdocs.yml"\nplugins:'), md);
  assert.equal(parseFence('```bash\nls\n```').title, '');
});
