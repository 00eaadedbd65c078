// Annotating a snapshot (templates/externals/external_detail.html#annotations).
//
// The snapshot body is one escaped text node inside #snapshot-text, so the text the browser
// shows is exactly Version.body. The server stores offsets in CODE POINTS (Python str
// indices) while JavaScript strings count UTF-16 units, in which an astral character
// (an emoji, a CJK extension ideograph) is two; every offset is converted here and the
// server re-checks body[start:end] == quote, so a wrong conversion is refused, not stored.
(function () {
  "use strict";

  // The number of code points in the first `units` UTF-16 units of `text`.
  function codePointsBefore(text, units) {
    var count = 0;
    var i = 0;
    while (i < units && i < text.length) {
      var code = text.charCodeAt(i);
      i += code >= 0xd800 && code <= 0xdbff && i + 1 < text.length ? 2 : 1;
      count += 1;
    }
    return count;
  }

  // The UTF-16 offset of code point number `points` in `text`.
  function unitsBefore(text, points) {
    var i = 0;
    for (var n = 0; n < points && i < text.length; n += 1) {
      i += text.codePointAt(i) > 0xffff ? 2 : 1;
    }
    return i;
  }

  function isLowSurrogate(text, i) {
    var code = text.charCodeAt(i);
    return code >= 0xdc00 && code <= 0xdfff;
  }

  // The selection as UTF-16 offsets into root's text, or null when it is empty or not
  // entirely inside root. Never splits a surrogate pair.
  function selectionUnits(root, selection) {
    if (!selection || selection.rangeCount === 0 || selection.isCollapsed) {
      return null;
    }
    var range = selection.getRangeAt(0);
    if (!root.contains(range.startContainer) || !root.contains(range.endContainer)) {
      return null;
    }
    var before = document.createRange();
    before.selectNodeContents(root);
    before.setEnd(range.startContainer, range.startOffset);
    var start = before.toString().length;
    var end = start + range.toString().length;
    var text = root.textContent;
    if (start > 0 && isLowSurrogate(text, start)) {
      start -= 1;
    }
    if (end < text.length && isLowSurrogate(text, end)) {
      end += 1;
    }
    return end > start ? { start: start, end: end } : null;
  }

  // {start, end, quote} in code points for the current selection inside root.
  function selectionSpan(root, selection) {
    var units = selectionUnits(root, selection);
    if (!units) {
      return null;
    }
    var text = root.textContent;
    var start = codePointsBefore(text, units.start);
    return {
      start: start,
      end: start + codePointsBefore(text.slice(units.start, units.end), units.end - units.start),
      quote: text.slice(units.start, units.end),
    };
  }

  // Mark anchored annotations in the text without touching the DOM (CSS Custom Highlight
  // API where the browser has it), so the text stays one node and offsets stay exact.
  function highlight(root) {
    if (!window.CSS || !CSS.highlights || typeof Highlight === "undefined") {
      return;
    }
    var node = root.firstChild;
    if (!node || node.nodeType !== Node.TEXT_NODE) {
      return;
    }
    var text = node.data;
    var ranges = [];
    document.querySelectorAll("[data-annotation-list] [data-start]").forEach(function (item) {
      var range = document.createRange();
      try {
        range.setStart(node, unitsBefore(text, Number(item.dataset.start)));
        range.setEnd(node, unitsBefore(text, Number(item.dataset.end)));
        ranges.push(range);
      } catch (error) {
        // An offset past the text: leave that one unmarked.
      }
    });
    if (ranges.length) {
      CSS.highlights.set("lode-annotation", new Highlight(...ranges));
    }
  }

  function setUp() {
    var root = document.getElementById("snapshot-text");
    var form = document.querySelector("[data-annotate-form]");
    if (!root || !form) {
      return;
    }
    var quoteBox = form.querySelector("[data-annotate-quote]");
    var hint = form.querySelector("[data-annotate-hint]");
    var submit = form.querySelector("[data-annotate-submit]");

    function capture() {
      var span = selectionSpan(root, document.getSelection());
      if (!span) {
        return; // keep the last selection: clicking into the textarea must not lose it
      }
      form.querySelector("[data-annotate-start]").value = String(span.start);
      form.querySelector("[data-annotate-end]").value = String(span.end);
      form.querySelector("[data-annotate-quote-field]").value = span.quote;
      quoteBox.textContent = span.quote; // textContent: never parsed as HTML
      quoteBox.hidden = false;
      hint.textContent = "Selected " + (span.end - span.start) + " characters.";
      submit.disabled = false;
    }

    document.addEventListener("selectionchange", capture);
    root.addEventListener("mouseup", capture);
    root.addEventListener("keyup", capture);
    highlight(root);
  }

  window.lodeAnnotate = {
    codePointsBefore: codePointsBefore,
    unitsBefore: unitsBefore,
    selectionSpan: selectionSpan,
  };

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
