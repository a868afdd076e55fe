"""Words broken in the middle by a line break, as the browser laid them out (the crawl:
tests/browser/test_crawl.py): "Marketplac / eRejected", "shippi / ng", "no samples / yet" on three lines.

``BROKEN_WORDS_JS`` walks every visible text node of the page and, for each run of letters and digits (a
word, or one part of an id between its separators ``-``, ``:``, ``.``, ``_``, ``/``), asks a DOM Range for
its client rectangles: a word drawn on two lines has rectangles at two heights. An id may wrap at its
separators (``queues_tags.wrap_id`` puts a ``<wbr>`` after each), never inside a part. Text inside ``<pre>``
and ``<textarea>`` (payloads and tracebacks: they scroll, or wrap long tokens by design) is left out, and so is a
random token of 16 or more hex digits (a uuid, a worker's name: no word in it), which the pages put in a
``span.rq-token`` that may break anywhere (``queues_wrap.TOKEN``).
"""

BROKEN_WORDS_JS = r"""
(limit) => {
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  const where = (el) => {
    const cell = el.closest("td, th, li, p, h1, h2, h3, dd, dt, label, a, span, div") || el;
    const id = cell.id ? `#${cell.id}` : "";
    const cls = typeof cell.className === "string" && cell.className.trim()
      ? "." + cell.className.trim().split(/\s+/).join(".") : "";
    return `${cell.tagName.toLowerCase()}${id}${cls}`;
  };
  for (let node = walker.nextNode(); node && found.length < limit; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || !el.offsetParent && getComputedStyle(el).position !== "fixed") continue;
    if (el.closest("pre, textarea, script, style, svg, [hidden]")) continue;
    const text = node.textContent;
    for (const m of text.matchAll(/[\p{L}\p{N}]{2,}/gu)) {
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      if (/^[0-9a-f]{16,}$/i.test(m[0])) continue;  // a random token, no word (queues_wrap.TOKEN)
      const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
      if (rects.length < 2) continue;
      const tops = rects.map((r) => r.top), height = Math.min(...rects.map((r) => r.height));
      if (Math.max(...tops) - Math.min(...tops) < height / 2) continue;
      // the text of the word as drawn, line by line
      const lines = [];
      for (let i = 0; i < m[0].length; i++) {
        range.setStart(node, m.index + i);
        range.setEnd(node, m.index + i + 1);
        const r = range.getBoundingClientRect();
        if (!lines.length || Math.abs(r.top - lines[lines.length - 1].top) >= height / 2) {
          lines.push({ top: r.top, text: "" });
        }
        lines[lines.length - 1].text += m[0][i];
      }
      found.push(`the word "${m[0]}" is broken over ${lines.length} lines ` +
                 `("${lines.map((l) => l.text).join(" / ")}") in ${where(el)}`);
      if (found.length >= limit) break;
    }
  }
  return found;
}
"""
