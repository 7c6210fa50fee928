// Lazarus keyboard triage on a list of dead letters: j and k move the
// current row (it takes the focus, so a screen reader reads it), Enter
// opens it, x selects it, r and d replay and delete the selection (or the
// current row) through the same confirmations as the buttons, and "?"
// opens the list of keys. None of them acts while the focus is in a field
// (typing a filter), with a modifier held, or under an open dialog.
(function () {
  "use strict";

  // The current row is a dead letter of a group: the same message can be
  // a dead letter of two groups, two rows.
  let currentID = null;
  let currentGroup = null;
  let currentIndex = 0; // where it was: when it goes (replayed), the row now there is current
  // keep: the person is triaging from the keyboard, so the current row
  // keeps the focus whatever swaps the list (an action's answer, the
  // stream's update, the message of what was done): app.js's focus after
  // an action is for the mouse. It lasts until the person takes the focus
  // elsewhere (a click outside the current row, Tab, a text field).
  let keep = false;

  function typing(t) {
    return t instanceof Element && (t.closest("input, textarea, select, [contenteditable]") !== null || t.isContentEditable);
  }

  function rows() {
    const list = document.getElementById("dl");
    return list ? Array.from(list.querySelectorAll("tr[data-id]")) : [];
  }

  function current(all) {
    return all.find((r) => r.getAttribute("data-id") === currentID && r.getAttribute("data-group") === currentGroup) || null;
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
    currentGroup = row.getAttribute("data-group");
    currentIndex = rows().indexOf(row);
    if (focus && document.activeElement !== row) {
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
    keep = true;
    mark(all[i], true);
  }

  function checkbox(row) {
    return row ? row.querySelector("input[data-row]") : null;
  }

  // act opens the confirmation of a bulk action ("replay", "delete") for
  // the selected rows, or for the current row when none is selected.
  // The current row it selected for want of a selection is unselected
  // again when its confirmation closes without the action (Cancel,
  // Escape): it was never the person's selection, and would hold the
  // live list still.
  let ticked = null;
  function act(action) {
    const button = document.querySelector('[data-testid="bulk-' + action + '"]');
    if (!button) return; // a viewer's list: no actions
    const picked = document.querySelectorAll("#dl input[data-row]:checked");
    if (picked.length === 0) {
      const box = checkbox(current(rows()));
      if (!box) return;
      box.click(); // selected as by hand: the bulk buttons follow
      ticked = box;
    }
    if (!button.disabled) button.click();
  }

  // The action done (its dialog closes after): the row is the action's.
  document.addEventListener("dlq-changed", function () {
    ticked = null;
  });
  document.addEventListener("close", function (ev) {
    if (!(ev.target instanceof HTMLDialogElement) || !ev.target.closest("#dialog")) return;
    const box = ticked;
    ticked = null;
    if (box && box.isConnected && box.checked) box.click();
  }, true);

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

  // The person takes the focus elsewhere: a click outside the current
  // row, Tab, a text field ("/" to the search box). Inside a dialog
  // (the confirmation of r or d) the focus comes back to the row after.
  function inDialog(t) {
    return t instanceof Element && t.closest("dialog") !== null;
  }
  document.addEventListener("pointerdown", function (ev) {
    const t = ev.target;
    if (!keep || inDialog(t)) return;
    const row = current(rows());
    keep = row !== null && t instanceof Node && row.contains(t);
  }, true);
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Tab" && !inDialog(ev.target)) keep = false;
  }, true);
  document.addEventListener("focusin", function (ev) {
    if (typing(ev.target) && !inDialog(ev.target)) keep = false;
  });

  // restore puts the current row back after the list changed: the same
  // dead letter where it still is, or, gone (replayed, deleted), the row
  // now in its place; with the focus when the person is triaging from
  // the keyboard or the focus was lost (its element swapped out), never
  // from under an open dialog.
  function restore() {
    if (!currentID) return;
    const all = rows();
    const row = current(all) || all[Math.min(currentIndex, all.length - 1)];
    if (!row) {
      currentID = null;
      currentGroup = null;
      keep = false;
      return;
    }
    const lost = document.activeElement === null || document.activeElement === document.body;
    mark(row, (keep || lost) && !document.querySelector("dialog[open]"));
  }

  // Any swap (the list's own, the stream's, the message of what an action
  // did) settles after app.js's focus after an action (its listener comes
  // first), so the keyboard's row has the last word.
  document.addEventListener("htmx:afterSettle", restore);
  // A dialog closed (a confirmation answered or cancelled): the browser
  // gives the focus back to what had it, the row, unless that row was
  // swapped meanwhile.
  document.addEventListener("close", function (ev) {
    if (ev.target instanceof HTMLDialogElement) restore();
  }, true);
})();
