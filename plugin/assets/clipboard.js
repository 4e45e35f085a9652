// The clipboard, for the answer's copy buttons and the page menu (both loaded on first use).
import { el } from './dom.js';

/**
 * Put text on the clipboard; true when it is there. `text` may be a promise (text still
 * arriving): it is handed to the clipboard as one, which Safari needs to copy after the
 * click, and a promise that rejects makes this reject. `host` holds the fallback's
 * textarea: inside a modal dialog, the rest of the page is inert.
 */
export async function copyText(text, host = document.body) {
  if (typeof text !== 'string' && window.ClipboardItem && navigator.clipboard && navigator.clipboard.write) {
    try {
      const blob = Promise.resolve(text).then((t) => new Blob([t], { type: 'text/plain' }));
      await navigator.clipboard.write([new ClipboardItem({ 'text/plain': blob })]);
      return true;
    } catch {
      /* the text's own failure (re-raised below) or no permission: the plain way */
    }
  }
  const value = await text;
  try {
    await navigator.clipboard.writeText(value);
    return true;
  } catch {
    const ta = el('textarea', { class: 'anchored-sr' });
    ta.value = value;
    host.append(ta);
    ta.select();
    let ok = false;
    try {
      ok = document.execCommand('copy');
    } catch {
      ok = false;
    }
    ta.remove();
    return ok;
  }
}
