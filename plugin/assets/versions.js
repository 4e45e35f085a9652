// Versioned docs (mike): which version this page belongs to, which one is the latest, and
// the reader's choice of the two. Data from versions.json becomes text nodes only.
import { el } from './dom.js';

const LATEST = 'latest';

/** The mike site root: the parent of this version's root ("/1.0/" → "/"). */
function mikeRoot(root) {
  return new URL('../', root);
}

/** The version folder this page is served from ("/docs/1.0/" → "1.0"), or "". */
function folderOf(root) {
  const parts = decodeURIComponent(new URL(root).pathname).split('/').filter(Boolean);
  return parts.length ? parts[parts.length - 1] : '';
}

const clean = (v) => (typeof v === 'string' && /^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/.test(v) ? v : '');

/** mike's versions.json as [{version, title, aliases}], newest first (invalid entries dropped). */
export function readVersions(data) {
  if (!Array.isArray(data)) return [];
  return data
    .filter((v) => v && clean(v.version))
    .map((v) => ({
      version: v.version,
      title: typeof v.title === 'string' && v.title ? v.title : v.version,
      aliases: Array.isArray(v.aliases) ? v.aliases.filter(clean) : [],
    }));
}

/**
 * What the page knows about versions: {current, latest, versions} or null when the site is
 * not versioned. `current` is the version this page is (the plugin's `version` setting, else
 * the folder the page is in when versions.json names it); `latest` the version with the
 * alias "latest", else the newest.
 */
export async function detectVersion(cfg, root, { fetchImpl = fetch, timeout = 10000 } = {}) {
  const own = clean(cfg.version);
  // A build that knows it is unversioned, or a page at the host's root (mike serves each
  // version from a folder of its own): no versions.json to ask for.
  if (!own && (cfg.versioned === false || !folderOf(root))) return null;
  let versions = [];
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeout);
  try {
    const res = await fetchImpl(new URL('versions.json', mikeRoot(root)).href, { signal: ctl.signal, headers: { Accept: 'application/json' } });
    if (res.ok) versions = readVersions(await res.json());
  } catch {
    versions = [];
  } finally {
    clearTimeout(timer);
  }
  const byName = (name) => versions.find((v) => v.version === name) || versions.find((v) => v.aliases.includes(name));
  const here = byName(own || folderOf(root));
  if (!here && !own) return null;
  const latest = byName(LATEST) || versions[0] || null;
  return { current: here ? here.version : own, latest: latest ? latest.version : '', versions };
}

/**
 * The version choice in the dialog: hidden until detection says the page is an older
 * version; then a select "Version: 1.0 (this page) | 2.0 (latest)". `value()` is what the
 * request names; `adopt(reply)` points a reply's citations into the version it came from.
 */
export function versionControl(cfg, root, uid, detect = detectVersion) {
  const select = el('select', { class: 'anchored-version__select', id: uid + '-version' });
  const element = el('label', { class: 'anchored-version', for: uid + '-version' }, 'Version ', select);
  element.hidden = true;
  let info = clean(cfg.version) ? { current: cfg.version, latest: '', versions: [] } : null;
  const ready = Promise.resolve(detect(cfg, root))
    .then((found) => {
      if (found) info = found;
      if (!info || !info.latest || info.latest === info.current) return;
      select.replaceChildren(
        el('option', { value: info.current }, `${info.current} (this page)`),
        el('option', { value: info.latest }, `${info.latest} (latest)`),
      );
      element.hidden = false;
    })
    .catch(() => {});
  return {
    element,
    ready,
    value: () => (element.hidden ? (info && info.current) || '' : select.value),
    /** Citations of an answer from another version point into that version's pages. */
    adopt(reply) {
      if (!reply || !reply.version || !info || reply.version === info.current) return reply;
      const prefix = '../' + encodeURIComponent(reply.version) + '/';
      const rebase = (u) => (/^[a-z]+:|^\//i.test(u || '') ? u : prefix + (u || ''));
      for (const c of reply.citations) {
        c.url = rebase(c.url);
        if (c.link) c.link = rebase(c.link);
      }
      reply.other_version = true;
      return reply;
    },
  };
}
