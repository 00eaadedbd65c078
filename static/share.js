// The "copy link" control of the search and answer pages (templates/partials.html#share_link).
// The link itself is rendered server-side into a read-only field, so this script only adds
// a button: navigator.clipboard where the page is a secure context, otherwise the field is
// selected (and execCommand("copy") tried) so the user can copy it themselves.
(function () {
  "use strict";

  function reveal() {
    document.querySelectorAll("[data-copy-link][hidden]").forEach(function (button) {
      button.hidden = false;
    });
  }

  function selectField(field, status) {
    field.focus();
    field.select();
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (error) {
      copied = false;
    }
    status.textContent = copied ? "Link copied." : "Link selected: press Ctrl+C (⌘C) to copy it.";
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-link]");
    if (!button) {
      return;
    }
    var box = button.closest("[data-share]");
    var field = box.querySelector("[data-share-url]");
    var status = box.querySelector("[data-copy-status]");
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(field.value).then(
        function () {
          status.textContent = "Link copied.";
        },
        function () {
          selectField(field, status);
        }
      );
    } else {
      selectField(field, status);
    }
  });

  // Clicking into the read-only field selects the whole link, ready to copy.
  document.addEventListener("focusin", function (event) {
    if (event.target.matches && event.target.matches("[data-share-url]")) {
      event.target.select();
    }
  });

  document.addEventListener("DOMContentLoaded", reveal);
  document.addEventListener("htmx:afterSettle", reveal);
})();
