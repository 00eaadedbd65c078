// The evidence page's "In context" box (templates/search/evidence.html): it opens scrolled so
// the marked passage is in view, a few lines of what comes before it above. Only the box
// scrolls: Element.scrollIntoView would also scroll the page past the verification status
// and the title, which a reader must see first. Without JavaScript the box opens at the top
// and can still be scrolled (it is focusable, so also with the keyboard).
(function () {
  "use strict";

  var LEAD_LINES = 3; // lines of context kept above the passage when it fits

  function reveal(box) {
    var mark = box.querySelector("mark");
    if (!mark) {
      return;
    }
    var boxRect = box.getBoundingClientRect();
    var markRect = mark.getBoundingClientRect();
    var line = parseFloat(window.getComputedStyle(box).lineHeight) || 0;
    var room = Math.max(0, box.clientHeight - markRect.height);
    var lead = Math.min(room / 2, LEAD_LINES * line);
    box.scrollTop += markRect.top - (boxRect.top + box.clientTop) - lead;
  }

  function revealAll() {
    document.querySelectorAll("[data-scroll-to-mark]").forEach(reveal);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", revealAll);
  } else {
    revealAll();
  }
})();
