// The page menu's addresses, no DOM (tested in Node too): a page's Markdown twin, the
// assistants' "open in" links, the MCP install snippets, a question's own link (?ask=).

/** The page menu's entries, in the order shown (the `widget_page_menu` option's values). */
export const MENU_ENTRIES = ['copy', 'view', 'chatgpt', 'claude', 'mcp'];

/** Query parameter of a question asked from a link. */
export const ASK_PARAM = 'ask';

/**
 * The Markdown twin of a page, by the page's URL relative to the site root (the build
 * writes it beside the page's HTML): "foo/bar/" → "foo/bar/index.md", "foo.html" →
 * "foo.md", the home page "" → "index.md".
 */
export function twinPath(page) {
  const p = String(page || '')
    .split(/[?#]/)[0]
    .replace(/^\/+/, '');
  if (p === '' || p.endsWith('/')) return p + 'index.md';
  if (/\.html?$/i.test(p)) return p.replace(/\.html?$/i, '.md');
  return p + '/index.md'; // a folder named without its slash
}

// Plain links: nothing is asked of these hosts until the reader follows one.
const ASSISTANTS = {
  chatgpt: 'https://chatgpt.com/?q=',
  claude: 'https://claude.ai/new?q=',
};

/** What the assistant is told: read the page's Markdown (an absolute URL). */
export const assistantPrompt = (twinUrl) => `Read ${twinUrl} and answer questions about it.`;

/** "Open in ChatGPT / Claude": a new chat whose prompt points at the page's Markdown. */
export function assistantLink(which, twinUrl) {
  return ASSISTANTS[which] + encodeURIComponent(assistantPrompt(twinUrl));
}

/** A short name for the MCP server in the reader's editor: the site's name, else its host. */
export function serverName(siteName, host) {
  const slug = (s) =>
    String(s || '')
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '') // accents, apart after NFKD
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40)
      .replace(/-+$/, '');
  return slug(siteName) || slug(host) || 'docs';
}

// A word the shell passes as it is, else single-quoted.
const shellWord = (s) => (/^[\w@%+=:,./~-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** The MCP install snippets (as site/mcp.md gives them) for the server at `url`, named `name`. */
export function mcpSnippets(url, name) {
  const json = (o) => JSON.stringify(o, null, 2);
  return [
    { label: 'Claude Code', lang: 'sh', text: `claude mcp add --transport http ${shellWord(name)} ${shellWord(url)}` },
    { label: 'Cursor: .cursor/mcp.json', lang: 'json', text: json({ mcpServers: { [name]: { url } } }) },
    { label: 'VS Code: .vscode/mcp.json', lang: 'json', text: json({ servers: { [name]: { type: 'http', url } } }) },
  ];
}

/** The link to a question: the page (`href`, without its query and fragment) with `?ask=`. */
export function questionLink(href, question) {
  const u = new URL(href);
  u.search = '';
  u.hash = '';
  u.searchParams.set(ASK_PARAM, String(question));
  return u.href;
}

/** The question a page's query asks (`?ask=`), trimmed and capped as the box caps it; null when none. */
export function readAsk(search) {
  const params = new URLSearchParams(search);
  if (!params.has(ASK_PARAM)) return null;
  return String(params.get(ASK_PARAM) || '')
    .trim()
    .slice(0, 1000);
}

/** The query without `?ask=` ("" or "?…"), the rest as it was written. */
export function stripAsk(search) {
  const kept = String(search || '')
    .replace(/^\?/, '')
    .split('&')
    .filter((p) => p && p.split('=')[0] !== ASK_PARAM);
  return kept.length ? '?' + kept.join('&') : '';
}
