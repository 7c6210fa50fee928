// Lazarus keyboard triage on a list of dead letters: j and k move the
// current row (it takes the focus, so a screen reader reads it), Enter
// opens it, x selects it, r and d replay and delete the selection (or the
// current row) through the same confirmations as the buttons, and "?"
// opens the list of keys. None of them acts while the focus is in a field
// (typing a filter), with a modifier held, or under an open dialog.
(function () {
  "use strict";

  let currentID = null;
  let currentIndex = 0; // where it was: when it goes (replayed), the row now there is current

  function typing(t) {
    return t instanceof Element && (t.closest("input, textarea, select, [contenteditable]") !== null || t.isContentEditable);
  }

  function rows() {
    const list = document.getElementById("dl");
    return list ? Array.from(list.querySelectorAll("tr[data-id]")) : [];
  }

  function current(all) {
    return all.find((r) => r.getAttribute("data-id") === currentID) || null;
  }

  function mark(row, focus) {
    rows().forEach((r) => {
      r.classList.remove("cursor");
      r.removeAttribute("aria-current");
    });
    row.classList.add("cursor");
    row.setAttribute("aria-current", "true");
    row.tabIndex = -1;
    currentID = row.getAttribute("data-id");
    currentIndex = rows().indexOf(row);
    if (focus) {
      row.focus({ preventScroll: true });
      row.scrollIntoView({ block: "nearest" });
    }
  }

  function move(by) {
    const all = rows();
    if (all.length === 0) return;
    const now = current(all);
    let i = now ? all.indexOf(now) + by : 0;
    i = Math.max(0, Math.min(all.length - 1, i));
    mark(all[i], true);
  }

  function checkbox(row) {
    return row ? row.querySelector("input[data-row]") : null;
  }

  // act opens the confirmation of a bulk action ("replay", "delete") for
  // the selected rows, or for the current row when none is selected.
  function act(action) {
    const button = document.querySelector('[data-testid="bulk-' + action + '"]');
    if (!button) return; // a viewer's list: no actions
    const picked = document.querySelectorAll("#dl input[data-row]:checked");
    if (picked.length === 0) {
      const box = checkbox(current(rows()));
      if (!box) return;
      box.click(); // selected as by hand: the bulk buttons follow
    }
    if (!button.disabled) button.click();
  }

  function openHelp() {
    const d = document.querySelector("[data-keys-help]");
    if (!d || d.open) return;
    d.showModal();
    d.querySelector("[data-close-dialog]")?.focus();
  }

  document.addEventListener("click", function (ev) {
    const t = ev.target;
    if (t instanceof Element && t.closest("[data-keys-help-open]")) openHelp();
  });

  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing) return;
    if (typing(ev.target)) return;
    if (document.querySelector("dialog[open]")) return;
    if (ev.key === "?") {
      if (!document.querySelector("[data-keys-help]")) return;
      ev.preventDefault();
      openHelp();
      return;
    }
    if (!document.getElementById("dl")) return;
    switch (ev.key) {
      case "j":
        ev.preventDefault();
        move(1);
        break;
      case "k":
        ev.preventDefault();
        move(-1);
        break;
      case "x": {
        const box = checkbox(current(rows()));
        if (!box) return;
        ev.preventDefault();
        box.click();
        break;
      }
      case "r":
        ev.preventDefault();
        act("replay");
        break;
      case "d":
        ev.preventDefault();
        act("delete");
        break;
      case "Enter": {
        // On the row itself only: Enter on its buttons and links does
        // what they do.
        const t = ev.target;
        if (!(t instanceof Element) || !t.matches("tr[data-id]")) return;
        const link = t.querySelector('[data-testid="dl-link"]');
        if (link) {
          ev.preventDefault();
          link.click();
        }
        break;
      }
    }
  });

  // The list updated (an action, the stream, a filter): the current row
  // stays current where it still is, or, gone (replayed, deleted), the
  // row now in its place is; with the focus if the focus was lost.
  document.addEventListener("htmx:afterSettle", function () {
    if (!currentID) return;
    const all = rows();
    const row = current(all) || all[Math.min(currentIndex, all.length - 1)];
    if (!row) {
      currentID = null;
      return;
    }
    const lost = document.activeElement === null || document.activeElement === document.body;
    mark(row, lost);
  });
})();
