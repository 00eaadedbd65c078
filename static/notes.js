// Keyboard shortcuts on every page, loaded by templates/base.html:
//   /                 focuses the search box (on a page without one: opens the search page),
//                     unless you are typing in a field;
//   Ctrl/Cmd+Enter    in a text field of a form: submits that form (saves the note, asks the
//                     question), through requestSubmit so the browser's checks and htmx run;
//   Esc               in a field: leaves it; elsewhere: closes the <details> (a menu, an
//                     "Advanced" box) that holds the focus, else the one opened last.
// An external same-origin file: the Content-Security-Policy forbids inline scripts.
(function () {
  "use strict";

  var script = document.currentScript;
  var searchUrl = script ? script.getAttribute("data-search-url") : null;
  var lastOpened = null; // the <details> opened most recently, for Esc

  var TEXT_INPUTS = ["text", "search", "email", "url", "password", "number", "tel"];

  function isTextField(element) {
    if (!element || !element.tagName) {
      return false;
    }
    var tag = element.tagName.toLowerCase();
    if (tag === "textarea" || tag === "select" || element.isContentEditable) {
      return true;
    }
    return tag === "input" && TEXT_INPUTS.indexOf((element.type || "text").toLowerCase()) >= 0;
  }

  function searchBox() {
    return document.querySelector('input[type="search"][name="q"]');
  }

  function focusSearch(event) {
    var box = searchBox();
    if (box) {
      event.preventDefault();
      box.focus();
      box.select();
    } else if (searchUrl) {
      event.preventDefault();
      window.location.assign(searchUrl);
    }
  }

  function submitForm(event) {
    var field = event.target;
    var form = field.form;
    if (!form) {
      return;
    }
    event.preventDefault();
    if (typeof form.requestSubmit === "function") {
      form.requestSubmit();
    } else {
      form.submit();
    }
  }

  function closeDetails(event) {
    var active = document.activeElement;
    var details = active && active.closest ? active.closest("details[open]") : null;
    if (!details && lastOpened && lastOpened.open && lastOpened.isConnected) {
      details = lastOpened;
    }
    if (!details) {
      return;
    }
    event.preventDefault();
    details.open = false;
    var summary = details.querySelector("summary");
    if (summary) {
      summary.focus();
    }
  }

  document.addEventListener(
    "toggle",
    function (event) {
      var target = event.target;
      if (target && target.tagName === "DETAILS" && target.open) {
        lastOpened = target;
      }
    },
    true // toggle does not bubble
  );

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing) {
      return;
    }
    var target = event.target;
    var typing = isTextField(target);
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.altKey) {
      if (typing && target.tagName.toLowerCase() !== "select") {
        submitForm(event);
      }
      return;
    }
    if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey && !event.altKey) {
      focusSearch(event);
      return;
    }
    if (event.key === "Escape") {
      if (typing) {
        target.blur();
      } else {
        closeDetails(event);
      }
    }
  });
})();
