// Lazarus dashboard behaviour: row selection with shift-click ranges, copy
// buttons, the payload raw/pretty toggle and the confirmation dialog. No
// inline scripts anywhere: the Content-Security-Policy forbids them.
(function () {
  "use strict";

  let lastChecked = null;

  function rows() {
    return Array.from(document.querySelectorAll("input[data-row]"));
  }

  // updateSelection shows how many rows are selected and enables the
  // selection's buttons.
  function updateSelection() {
    const boxes = rows();
    const picked = boxes.filter((b) => b.checked);
    boxes.forEach((b) => b.closest("tr")?.classList.toggle("selected", b.checked));
    document.querySelectorAll("[data-selected-count]").forEach((el) => {
      el.textContent = picked.length === 1 ? "1 selected" : picked.length + " selected";
    });
    document.querySelectorAll("[data-needs-selection]").forEach((el) => {
      el.disabled = picked.length === 0;
    });
    const all = document.querySelector("input[data-select-page]");
    if (all) {
      all.checked = boxes.length > 0 && picked.length === boxes.length;
      all.indeterminate = picked.length > 0 && picked.length < boxes.length;
    }
  }

  document.addEventListener("click", function (ev) {
    const t = ev.target;
    if (!(t instanceof Element)) return;

    // Shift-click on a row checkbox selects the range from the last one.
    if (t.matches("input[data-row]")) {
      const boxes = rows();
      if (ev.shiftKey && lastChecked && lastChecked !== t) {
        const a = boxes.indexOf(lastChecked);
        const b = boxes.indexOf(t);
        if (a >= 0 && b >= 0) {
          const [lo, hi] = a < b ? [a, b] : [b, a];
          for (let i = lo; i <= hi; i++) boxes[i].checked = t.checked;
        }
      }
      lastChecked = t;
      updateSelection();
      return;
    }
    if (t.matches("input[data-select-page]")) {
      rows().forEach((b) => (b.checked = t.checked));
      updateSelection();
      return;
    }

    const copy = t.closest("[data-copy]");
    if (copy) {
      ev.preventDefault();
      const text = copy.getAttribute("data-copy");
      const done = () => {
        const old = copy.textContent;
        copy.textContent = "Copied";
        setTimeout(() => (copy.textContent = old), 1200);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
      } else {
        fallbackCopy(text, done);
      }
      return;
    }

    const view = t.closest("[data-show]");
    if (view) {
      const want = view.getAttribute("data-show");
      const box = view.closest("[data-views]");
      box.querySelectorAll("[data-view]").forEach((el) => {
        el.hidden = el.getAttribute("data-view") !== want;
      });
      box.querySelectorAll("[data-show]").forEach((b) => {
        b.setAttribute("aria-pressed", String(b === view));
      });
      return;
    }

    if (t.closest("[data-close-dialog]")) {
      t.closest("dialog")?.close();
    }
  });

  function fallbackCopy(text, done) {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    try {
      document.execCommand("copy");
      done();
    } finally {
      area.remove();
    }
  }

  // A typed confirmation: the button stays disabled until the queue name
  // is typed exactly.
  document.addEventListener("input", function (ev) {
    const t = ev.target;
    if (t instanceof HTMLInputElement && t.hasAttribute("data-confirm-text")) {
      const form = t.closest("form");
      const ok = t.value === t.getAttribute("data-confirm-text");
      form.querySelectorAll("[data-needs-confirm]").forEach((b) => (b.disabled = !ok));
    }
  });

  // The server sends a confirmation into #dialog: open it as a modal.
  document.addEventListener("htmx:afterSwap", function (ev) {
    const target = ev.detail.target;
    if (target && target.id === "dialog") {
      const d = target.querySelector("dialog");
      if (d && !d.open) {
        d.showModal();
        d.querySelector("[autofocus], input:not([type=hidden]), button")?.focus();
      }
    }
    updateSelection();
  });

  // Moving to another view clears the last action's message.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    const target = ev.detail.target;
    if (target && target.id === "page") {
      const flash = document.getElementById("flash");
      if (flash) flash.replaceChildren();
    }
  });

  // A finished action closes its dialog.
  document.addEventListener("dlq-changed", function () {
    document.querySelectorAll("#dialog dialog[open]").forEach((d) => d.close());
  });

  document.addEventListener("DOMContentLoaded", updateSelection);
})();
