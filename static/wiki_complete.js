// `[[` title completion in the note editor, loaded by templates/notes/form.html.
//
// Typing "[[" and at least one character before the caret asks notes:complete (through htmx,
// so the CSRF header and the 503 handling of base.html apply) for up to 10 titles of documents
// you can see; the list appears under the text box. Choosing one (click, or ArrowDown then
// Enter) replaces the "[[prefix" before the caret with "[[Title]]". Esc or moving on closes it.
// Without JavaScript, or without htmx, nothing happens: the textarea stays a plain textarea.
// An external same-origin file: the Content-Security-Policy forbids inline scripts.
(function () {
  "use strict";

  var box = document.querySelector("[data-wiki-complete]");
  if (!box || !window.htmx) {
    return;
  }
  var area = document.getElementById(box.getAttribute("data-for"));
  if (!area) {
    return;
  }
  var url = box.getAttribute("data-url");
  // "[[" then the title typed so far: no brackets, "|" or line break in it.
  var OPEN = /\[\[([^\[\]|\n]{1,200})$/;
  var timer = null;
  var asked = "";

  function typed() {
    if (area.selectionStart !== area.selectionEnd) {
      return null;
    }
    var before = area.value.slice(0, area.selectionStart);
    var match = OPEN.exec(before);
    return match && match[1].trim() ? match : null;
  }

  function close() {
    box.innerHTML = "";
    asked = "";
  }

  function options() {
    return Array.prototype.slice.call(box.querySelectorAll("button[data-wiki-title]"));
  }

  function ask() {
    var match = typed();
    if (!match) {
      close();
      return;
    }
    if (match[1] === asked) {
      return;
    }
    asked = match[1];
    window.htmx.ajax("GET", url, { target: box, swap: "innerHTML", values: { q: match[1] } });
  }

  function choose(button) {
    var match = typed();
    var title = button.getAttribute("data-wiki-title");
    if (!match || !title) {
      close();
      area.focus();
      return;
    }
    var caret = area.selectionStart;
    var start = caret - match[0].length;
    var after = area.value.slice(caret);
    // A "]]" already typed right after the caret is the end of this link: do not double it.
    var closing = after.slice(0, 2) === "]]" ? "" : "]]";
    var inserted = "[[" + title + closing;
    area.setRangeText(inserted, start, caret, "end");
    if (!closing) {
      area.setSelectionRange(start + inserted.length + 2, start + inserted.length + 2);
    }
    area.dispatchEvent(new Event("input", { bubbles: true }));
    close();
    area.focus();
  }

  area.addEventListener("input", function () {
    window.clearTimeout(timer);
    timer = window.setTimeout(ask, 150);
  });
  area.addEventListener("blur", function () {
    // Leave the list while the focus moves into it; close it when the focus went elsewhere.
    window.setTimeout(function () {
      if (!box.contains(document.activeElement) && document.activeElement !== area) {
        close();
      }
    }, 150);
  });
  area.addEventListener("keydown", function (event) {
    var buttons = options();
    if (!buttons.length) {
      return;
    }
    if (event.key === "ArrowDown") {
      event.preventDefault();
      buttons[0].focus();
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      close();
    }
  });
  // Remember the caret while the focus is in the list (a textarea keeps its selection).
  box.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-wiki-title]");
    if (button) {
      event.preventDefault();
      area.focus();
      choose(button);
    }
  });
  box.addEventListener("keydown", function (event) {
    var buttons = options();
    var index = buttons.indexOf(document.activeElement);
    if (index < 0) {
      return;
    }
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      var next = index + (event.key === "ArrowDown" ? 1 : -1);
      if (next < 0) {
        area.focus();
      } else {
        buttons[Math.min(next, buttons.length - 1)].focus();
      }
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      close();
      area.focus();
    }
  });
  box.addEventListener("focusout", function () {
    window.setTimeout(function () {
      if (!box.contains(document.activeElement) && document.activeElement !== area) {
        close();
      }
    }, 150);
  });
})();
