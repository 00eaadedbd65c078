// The upload form's drop zone (templates/externals/source_list.html).
// Files dropped on the zone become the file input's files, so the form posts them exactly
// as if they had been chosen in the file dialog; the list under the input names what will
// be sent. Without JavaScript the `<input type="file" multiple>` alone still works.
// Names are written with textContent, never as HTML.
(function () {
  "use strict";

  function sizeText(bytes) {
    if (bytes < 1024) {
      return bytes + " bytes";
    }
    if (bytes < 1024 * 1024) {
      return (bytes / 1024).toFixed(1) + " KB";
    }
    return (bytes / (1024 * 1024)).toFixed(1) + " MB";
  }

  function showFiles(zone, input) {
    var list = zone.querySelector("[data-drop-list]");
    if (!list) {
      return;
    }
    list.textContent = "";
    Array.prototype.forEach.call(input.files, function (file) {
      var item = document.createElement("li");
      item.textContent = file.name + " (" + sizeText(file.size) + ")";
      list.appendChild(item);
    });
    list.hidden = input.files.length === 0;
  }

  function setUp(zone) {
    var input = zone.querySelector('input[type="file"]');
    if (!input) {
      return;
    }
    var hint = zone.querySelector("[data-drop-hint]");
    if (hint) {
      hint.hidden = false;
    }
    zone.classList.add("drop-ready");
    ["dragenter", "dragover"].forEach(function (name) {
      zone.addEventListener(name, function (event) {
        event.preventDefault();
        zone.classList.add("drag-over");
      });
    });
    zone.addEventListener("dragleave", function (event) {
      if (!zone.contains(event.relatedTarget)) {
        zone.classList.remove("drag-over");
      }
    });
    zone.addEventListener("drop", function (event) {
      event.preventDefault();
      zone.classList.remove("drag-over");
      var dropped = event.dataTransfer && event.dataTransfer.files;
      if (!dropped || dropped.length === 0) {
        return;
      }
      input.files = dropped;
      showFiles(zone, input);
    });
    input.addEventListener("change", function () {
      showFiles(zone, input);
    });
    showFiles(zone, input);
  }

  function setUpAll() {
    document.querySelectorAll("[data-drop-zone]").forEach(setUp);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUpAll);
  } else {
    setUpAll();
  }
})();
