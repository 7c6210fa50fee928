// Lazarus dashboard behaviour: row selection with shift-click ranges, copy
// buttons, the payload raw/pretty toggle, the confirmation dialogs and the
// alert when Lazarus cannot be reached. No
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
      // The accessible name says what the button shows, "Copied" too.
      const done = () => {
        const old = copy.textContent;
        const label = copy.getAttribute("aria-label");
        copy.textContent = "Copied";
        if (label) copy.setAttribute("aria-label", "Copied");
        setTimeout(() => {
          copy.textContent = old;
          if (label) copy.setAttribute("aria-label", label);
        }, 1200);
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
      scrollersFocusable();
      return;
    }

    // A Hold button opens the page's Hold dialog for its queue or group,
    // the reason it suggests in the field, the focus there.
    const hold = t.closest("[data-hold-open]");
    if (hold) {
      const d = document.getElementById("hold-dialog");
      if (!d) return;
      const group = d.querySelector("[data-hold-group]");
      if (group && hold.hasAttribute("data-hold-group")) group.value = hold.getAttribute("data-hold-group");
      const reason = d.querySelector("[data-hold-reason]");
      reason.value = hold.getAttribute("data-hold-reason") || "";
      if (!d.open) d.showModal();
      reason.focus();
      reason.select();
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

  // The edit page's preview is of the text it was made from: once the
  // text changes, the preview says so until it is made again.
  document.addEventListener("input", function (ev) {
    const t = ev.target;
    if (!(t instanceof HTMLTextAreaElement) || !t.hasAttribute("data-preview")) return;
    const box = document.getElementById(t.getAttribute("data-preview"));
    if (!box || !box.firstElementChild || box.querySelector("[data-stale]")) return;
    const note = document.createElement("p");
    note.className = "flash flash-info";
    note.setAttribute("data-stale", "");
    note.setAttribute("data-testid", "edit-preview-stale");
    note.textContent = "The text has changed since this preview: press Preview to see its changes.";
    box.prepend(note);
  });

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

  // The server sends a confirmation into #dialog: open it as a modal,
  // the focus on Cancel (its autofocus), so that Enter cancels. Closed, it
  // goes: one confirmation at a time is in the page.
  document.addEventListener("htmx:afterSwap", function (ev) {
    const target = ev.detail.target;
    if (target && target.id === "dialog") {
      const d = target.querySelector("dialog");
      if (d && !d.open) {
        d.addEventListener("close", () => d.remove());
        d.showModal();
        d.querySelector("[data-close-dialog]")?.focus();
      }
    }
    updateSelection();
  });

  // Enter in a confirmation's text field (the queue name) never submits:
  // only a click on its button, or Space or Enter on the button itself.
  document.addEventListener("keydown", function (ev) {
    const t = ev.target;
    if (ev.key === "Enter" && t instanceof HTMLInputElement && t.closest("form[data-confirm-form]")) {
      ev.preventDefault();
    }
  });

  // A delete that asks first (data-confirm, its question) asks in a dialog
  // of ours, not the browser's confirm(), where Enter presses OK: here the
  // focus is on Cancel, Enter cancels, and only Delete itself deletes.
  //
  // The live list may be drawn again while the dialog is open (any change
  // of the queue), replacing the button that asked; htmx sends nothing for
  // an element that has left the page. The answer goes then through the
  // same button on the page drawn since (the same request: verb, path and
  // test id) when it asks the same question; one that asks another (a
  // breaker's hold where a person's was) asks it; when there is none,
  // nothing is sent and the page says so.
  const confirmed = new WeakSet();
  document.addEventListener("htmx:confirm", function (ev) {
    const elt = ev.detail.elt;
    const question = elt instanceof Element ? elt.getAttribute("data-confirm") : null;
    if (!question) return;
    if (confirmed.delete(elt)) return; // asked already, before the page changed
    ev.preventDefault();
    const d = ev.detail;
    const go = () => {
      if (elt.isConnected) return d.issueRequest(true);
      const again = sameRequest(elt, d.verb, d.path);
      if (!again) {
        problem("The page changed while you were asked, and what you confirmed is not on it any more: nothing was sent. Look at the page again.", "changed-meanwhile");
        return;
      }
      if (again.getAttribute("data-confirm") === question && again.getAttribute("data-confirm-action") === elt.getAttribute("data-confirm-action")) {
        confirmed.add(again);
      }
      htmx.ajax(d.verb, d.path, { source: again });
    };
    // data-confirm-action names what is asked for when it is not a
    // delete ("Replay"): the dialog's title and button say it.
    askToDelete(question, go, elt.getAttribute("data-confirm-action"));
  });

  // sameRequest finds on the page the element that sends what elt, gone
  // from it, sent: the same verb and path, and the same test id.
  function sameRequest(elt, verb, path) {
    const attr = "hx-" + verb.toLowerCase();
    for (const e of document.querySelectorAll("[" + attr + "]")) {
      if (e.getAttribute(attr) === path && e.getAttribute("data-testid") === elt.getAttribute("data-testid") && e.hasAttribute("data-confirm")) return e;
    }
    return null;
  }

  function askToDelete(question, go, action) {
    const d = document.createElement("dialog");
    d.className = "confirm";
    d.setAttribute("data-testid", "confirm-dialog");
    const h = document.createElement("h2");
    h.textContent = (action || "Delete") + "?";
    const p = document.createElement("p");
    p.setAttribute("data-testid", "confirm-summary");
    p.textContent = question;
    const actions = document.createElement("div");
    actions.className = "actions";
    const del = document.createElement("button");
    del.type = "button";
    del.className = action ? "primary" : "danger";
    del.textContent = action || "Delete";
    del.setAttribute("data-testid", "confirm-go");
    const cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = "Cancel";
    cancel.autofocus = true;
    cancel.setAttribute("data-close-dialog", "");
    cancel.setAttribute("data-testid", "confirm-cancel");
    del.addEventListener("click", () => {
      d.close();
      go();
    });
    actions.append(del, cancel);
    d.append(h, p, actions);
    d.addEventListener("close", () => d.remove());
    document.body.appendChild(d);
    d.showModal();
    cancel.focus();
  }

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

  // When Lazarus cannot be reached, htmx alone shows nothing: say so in
  // an alert. A filter that failed goes back to the values the page below
  // was made with (the form's defaults, as the server wrote them), so that
  // a list never stands under a filter it was not made with.
  function problem(text, testid) {
    const box = document.getElementById("flash") || document.querySelector("main");
    const el = document.createElement("div");
    el.className = "flash flash-error";
    el.setAttribute("role", "alert");
    el.setAttribute("data-testid", testid || "unreachable");
    el.setAttribute("data-unreachable", "");
    el.textContent = text;
    box.querySelectorAll("[data-unreachable]").forEach((e) => e.remove());
    if (box.id === "flash") box.replaceChildren(el);
    else box.prepend(el);
  }

  // failedFilter resets the filter form a failed request came from and
  // says whether there was one.
  function failedFilter(detail) {
    const elt = detail.elt;
    const verb = ((detail.requestConfig && detail.requestConfig.verb) || "").toLowerCase();
    const form = elt instanceof Element ? elt.closest("form[hx-get]") : null;
    if (verb !== "get" || !form) return false;
    form.reset();
    return true;
  }

  // A request that changes something (not a GET) may have been carried out
  // when its answer is lost: the connection dropped after it was sent, or
  // a proxy answered 502 or 504 for a Lazarus that went on with it. Only a
  // GET changed nothing for sure.
  function verbOf(detail) {
    return ((detail.requestConfig && detail.requestConfig.verb) || "get").toLowerCase();
  }

  // actionOf names what a request that changes something does, from its
  // path (.../replay, .../delete), for "the replay may or may not have
  // been done".
  function actionOf(detail) {
    const path = (detail.pathInfo && detail.pathInfo.requestPath) || (detail.requestConfig && detail.requestConfig.path) || "";
    const last = path.split("?")[0].split("/").pop();
    if (last === "replay") return "the replay";
    if (last === "delete" || verbOf(detail) === "delete") return "the deletion";
    return "the action";
  }

  function unreachable(detail, why) {
    const head = why ? "Lazarus could not be reached (" + why + ")" : "Lazarus could not be reached";
    if (failedFilter(detail)) {
      problem(head + ", so the filter was not applied: the form is back to the filter of what is shown below. Nothing was changed; try again.");
    } else if (verbOf(detail) === "get") {
      problem(head + ": what is shown was not updated. Nothing was changed; try again.");
    } else {
      problem(head + ": " + actionOf(detail) + " may or may not have been done. Reload the page to see.");
    }
  }

  // Lazarus's own error answers say what went wrong in #flash (HX-Retarget);
  // any other (a proxy's page) is not put into ours.
  // A page of Lazarus's with an error status (the 404 of a dead letter
  // that is gone) says so with Lazarus-Page.
  const fromLazarus = (xhr) => !!(xhr && (xhr.getResponseHeader("HX-Retarget") || xhr.getResponseHeader("Lazarus-Page")));

  document.addEventListener("htmx:beforeSwap", function (ev) {
    if (ev.detail.isError && !fromLazarus(ev.detail.xhr)) ev.detail.shouldSwap = false;
  });

  document.addEventListener("htmx:sendError", function (ev) {
    unreachable(ev.detail, "");
  });

  const statusOf = (xhr) => String(xhr.status) + (xhr.statusText ? " " + xhr.statusText : "");

  document.addEventListener("htmx:responseError", function (ev) {
    const xhr = ev.detail.xhr;
    if (!fromLazarus(xhr)) {
      unreachable(ev.detail, statusOf(xhr));
      return;
    }
    // Lazarus refused the filter and said why: the list is the old one.
    if (failedFilter(ev.detail)) {
      const note = document.createElement("div");
      note.className = "flash flash-error";
      note.setAttribute("role", "alert");
      note.textContent = "The filter was not applied: the form is back to the filter of what is shown below.";
      document.getElementById("flash")?.append(note);
    }
  });

  function timedOut(detail) {
    if (failedFilter(detail)) {
      problem("Lazarus did not answer in time, so the filter was not applied: the form is back to the filter of what is shown below. Try again.");
    } else if (verbOf(detail) === "get") {
      problem("Lazarus did not answer in time: what is shown was not updated. Try again.");
    } else {
      problem("Lazarus did not answer in time: " + actionOf(detail) + " may or may not have been done. Reload the page to see.");
    }
  }
  document.addEventListener("htmx:timeout", (ev) => timedOut(ev.detail));

  // htmx tells of a request's failure on the element that sent it. An
  // element no longer in the page (a row's button, once the list came
  // again on the news of the very replay whose answer is now lost) tells
  // nobody: its request's own events say it then, once htmx has had its
  // say (its handlers are the request's first).
  document.addEventListener("htmx:beforeRequest", function (ev) {
    const detail = ev.detail;
    const xhr = detail.xhr;
    if (!xhr) return;
    const gone = () => !(detail.elt instanceof Element) || !detail.elt.isConnected;
    xhr.addEventListener("error", () => gone() && unreachable(detail, ""));
    xhr.addEventListener("timeout", () => gone() && timedOut(detail));
    xhr.addEventListener("load", () => gone() && xhr.status >= 400 && !fromLazarus(xhr) && unreachable(detail, statusOf(xhr)));
  });

  // A request on its way shows it: the element that sent it is
  // aria-busy, its buttons (the button itself, or a form's) are disabled
  // and show a spinner (CSS), until the answer, an error or the timeout
  // (htmx-config's timeout, then the htmx:timeout message above).
  function buttonsOf(elt) {
    if (elt.matches("button")) return [elt];
    if (elt.matches("form")) return Array.from(elt.querySelectorAll("button[type=submit], button:not([type])"));
    return [];
  }

  document.addEventListener("htmx:beforeRequest", function (ev) {
    const elt = ev.detail.elt;
    if (!(elt instanceof Element)) return;
    elt.setAttribute("aria-busy", "true");
    buttonsOf(elt).forEach((b) => {
      if (b.disabled) return;
      b.setAttribute("data-busy", "");
      if (document.activeElement === b) b.setAttribute("data-busy-focus", "");
      b.disabled = true;
    });
  });

  function done(ev) {
    const elt = ev.detail.elt;
    if (!(elt instanceof Element)) return;
    elt.removeAttribute("aria-busy");
    buttonsOf(elt).forEach((b) => {
      if (!b.hasAttribute("data-busy")) return;
      b.removeAttribute("data-busy");
      b.disabled = false;
      // A disabled button loses the focus: it gets it back when nothing
      // else took it meanwhile.
      if (b.hasAttribute("data-busy-focus")) {
        b.removeAttribute("data-busy-focus");
        if (b.isConnected && (document.activeElement === document.body || !document.activeElement)) b.focus();
      }
    });
  }
  document.addEventListener("htmx:afterRequest", done);
  document.addEventListener("htmx:timeout", done);
  document.addEventListener("htmx:sendError", done);

  // After an action on a row of the list, the list comes again without
  // it: the focus goes to the row that took its place (the next one, or
  // the one before at the end), and to the message of what happened when
  // no row is left; after an action on a dead letter's page, or in a
  // bulk dialog, to the page's new state or that message. Never to the
  // top of the page.
  let focusAfter = null;
  document.addEventListener("htmx:beforeRequest", function (ev) {
    const elt = ev.detail.elt;
    if (!(elt instanceof Element) || verbOf(ev.detail) === "get") return;
    const row = elt.closest("tr[data-id]");
    if (row) {
      const rows = Array.from(row.parentElement.querySelectorAll("tr[data-id]"));
      const i = rows.indexOf(row);
      const key = (r) => ({ id: r.getAttribute("data-id"), group: r.getAttribute("data-group") });
      focusAfter = { row: key(row), action: elt.getAttribute("data-testid"), next: rows.slice(i + 1).map(key), prev: rows.slice(0, i).reverse().map(key) };
    } else if (elt.closest("#job-progress")) {
      focusAfter = { job: true };
    } else if (elt.closest("#deadletter, dialog, #flash, .bulkbar")) {
      focusAfter = { message: true };
    }
  });
  // An action that failed changed nothing: its button keeps the focus.
  // (A page that is gone comes as a 404 of Lazarus's: not a failure.)
  document.addEventListener("htmx:afterRequest", function (ev) {
    if (!ev.detail.successful && verbOf(ev.detail) !== "get") focusAfter = null;
  });

  function rowOf(k) {
    return Array.from(document.querySelectorAll("#dl tr[data-id]")).find((r) => r.getAttribute("data-id") === k.id && r.getAttribute("data-group") === k.group);
  }

  function focusMessage() {
    const m = document.querySelector("#flash > *");
    if (!m) return false;
    m.setAttribute("tabindex", "-1");
    m.focus();
    return true;
  }

  document.addEventListener("htmx:afterSettle", function (ev) {
    const plan = focusAfter;
    // The element swapped in (an outerHTML swap's new one), not the one
    // that asked.
    const elt = ev.target;
    if (!plan || !(elt instanceof Element)) return;
    if (elt.id === "dl") {
      focusAfter = null;
      const same = plan.row && rowOf(plan.row);
      if (same) {
        same.querySelector('[data-testid="' + plan.action + '"]')?.focus();
        return;
      }
      for (const k of plan.row ? plan.next.concat(plan.prev) : []) {
        const r = rowOf(k);
        if (r) {
          r.querySelector('[data-testid="dl-link"]')?.focus();
          return;
        }
      }
      focusMessage();
    } else if (elt.id === "deadletter") {
      focusAfter = null;
      const gone = elt.querySelector('[data-testid="gone"]');
      if (gone) gone.focus();
      else focusMessage();
    } else if (plan.job && elt.id === "job-progress") {
      focusAfter = null;
      const state = elt.querySelector('[data-testid="job-state"]');
      if (state) {
        state.setAttribute("tabindex", "-1");
        state.focus();
      }
    } else if (plan.message && elt.id === "flash" && !document.getElementById("dl") && !document.getElementById("deadletter")) {
      focusAfter = null;
      focusMessage();
    }
  });

  // Any other swap of the list (a live update, a refresh) keeps the focus
  // where the person had it: on the same control of the same row, found
  // again by its message id and group once the new list has settled.
  let keepFocus = null;
  document.addEventListener("htmx:beforeSwap", function (ev) {
    const t = ev.detail.target;
    const a = document.activeElement;
    keepFocus = null;
    if (focusAfter || !(t instanceof Element) || t.id !== "dl" || !(a instanceof Element) || !t.contains(a)) return;
    const row = a.closest("tr[data-id]");
    if (row) keepFocus = { id: row.getAttribute("data-id"), group: row.getAttribute("data-group"), testid: a.getAttribute("data-testid") };
  });
  document.addEventListener("htmx:afterSettle", function (ev) {
    const k = keepFocus;
    if (!k || !(ev.target instanceof Element) || ev.target.id !== "dl") return;
    keepFocus = null;
    const a = document.activeElement;
    if (a && a !== document.body && ev.target.contains(a)) return;
    const r = rowOf(k);
    const el = r && (k.testid ? r.querySelector('[data-testid="' + k.testid + '"]') : null);
    if (el) el.focus();
  });

  // An answer again to something the person did (a click, a submit: a
  // trusted event): the alert has done its work. A part refreshing itself
  // in the background (the list, on news that the replay whose answer was
  // lost was carried out after all) is no answer to them: it leaves the
  // alert saying what they must know.
  document.addEventListener("htmx:afterRequest", function (ev) {
    const by = ev.detail.requestConfig && ev.detail.requestConfig.triggeringEvent;
    if (!ev.detail.successful || !(by && by.isTrusted)) return;
    document.querySelectorAll("[data-unreachable]").forEach((e) => e.remove());
  });

  // A box that scrolls (a long payload, a wide table on a phone) can be
  // scrolled from the keyboard only when something in it takes the focus:
  // one with nothing focusable in it takes the focus itself.
  function scrollersFocusable() {
    document.querySelectorAll("main table, main pre").forEach((el) => {
      const scrolls = el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1;
      if (scrolls && !el.hasAttribute("tabindex") && !el.querySelector("a[href], button, input, select, textarea, [tabindex]")) {
        el.setAttribute("tabindex", "0");
      }
    });
  }
  document.addEventListener("htmx:afterSettle", scrollersFocusable);
  window.addEventListener("resize", scrollersFocusable);

  // "/" goes to the header's search box, unless the focus is where "/"
  // is typed (a field, a select, an editable element); Escape in the box
  // leaves it.
  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const box = document.querySelector("[data-search-box]");
    if (!box) return;
    const t = ev.target;
    if (ev.key === "Escape" && t === box) {
      box.blur();
      return;
    }
    if (ev.key !== "/") return;
    if (t instanceof Element && (t.closest("input, textarea, select, [contenteditable]") || t.isContentEditable)) return;
    if (document.querySelector("dialog[open]")) return;
    ev.preventDefault();
    box.focus();
    box.select();
  });

  document.addEventListener("DOMContentLoaded", updateSelection);
  document.addEventListener("DOMContentLoaded", scrollersFocusable);
})();
