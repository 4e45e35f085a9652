// Multilingual docs (mkdocs-static-i18n): the reader's language is the page's
// (<html lang>); answers come from pages in it unless the reader includes the others.
import { el } from './dom.js';

const TAG = /^[a-z]{2,3}(-[a-z0-9]{1,8}){0,3}$/;

/** The reader's language: this page's `<html lang>`, lower case ("zh-CN" → "zh-cn"), or "". */
export function readerLanguage(doc = document) {
  const tag = String((doc.documentElement && doc.documentElement.lang) || '').trim().toLowerCase().replace(/_/g, '-');
  return TAG.test(tag) ? tag : '';
}

/** Whether the site is in more than one language: the plugin's `languages` setting, else
 * alternate-language links on the page (`hreflang`, as Material's language selector has). */
export function isMultilingual(cfg, doc = document) {
  if (Array.isArray(cfg.languages)) return cfg.languages.length > 1;
  const langs = new Set();
  for (const a of doc.querySelectorAll('link[rel="alternate"][hreflang], a[hreflang]')) {
    const tag = String(a.getAttribute('hreflang') || '').toLowerCase();
    if (tag && tag !== 'x-default') langs.add(tag);
  }
  return langs.size > 1;
}

/**
 * The "Include other languages" choice in the dialog (a checkbox, shown on a multilingual
 * site only). `apply(body)` adds `lang` and, when checked, `other_languages` to a request.
 */
export function languageControl(cfg, uid, doc = document) {
  const box = el('input', { type: 'checkbox', class: 'anchored-lang__box', id: uid + '-lang' });
  const element = el('label', { class: 'anchored-scope anchored-lang', for: uid + '-lang' }, box, ' Include other languages');
  element.hidden = !isMultilingual(cfg, doc);
  return {
    element,
    checkbox: box,
    apply(body) {
      const lang = readerLanguage(doc);
      if (lang) body.lang = lang;
      if (lang && box.checked && !element.hidden) body.other_languages = true;
      return body;
    },
  };
}

/** The reply's note that its sources are in another language (a paragraph), or null. */
export function languageNote(reply) {
  if (!reply || !reply.note) return null;
  return el('p', { class: 'anchored-lang-note', role: 'note', text: reply.note });
}
