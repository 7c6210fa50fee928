// Lazarus live pages: a part of a page marked data-live-part (inside a
// views.Live wrapper, whose event stream htmx's SSE extension follows)
// asks for itself again at each "changed" event. It holds still while the
// person is in the middle of something there (rows selected, a dialog
// open): the wrapper's marker then says what changed ("12 new"), and
// updates the part when pressed, the selection kept. (The keyboard's
// current row needs no holding: keys.js keeps it on its dead letter.)
(function () {
  "use strict";

  // holding reports whether moving what is under the person's mouse or
  // focus now would disturb them.
  function holding(live) {
    if (document.querySelector("dialog[open]")) return true;
    return live.querySelector("input[data-row]:checked") !== null;
  }

  function markerOf(live) {
    return live.querySelector("[data-live-marker]");
  }

  function showMarker(live, text, offline) {
    const m = markerOf(live);
    if (!m) return;
    m.textContent = text;
    m.classList.toggle("offline", !!offline);
    m.hidden = false;
  }

  function hideMarker(live) {
    const m = markerOf(live);
    if (m) {
      m.hidden = true;
      m.textContent = "";
      m.removeAttribute("data-count");
    }
  }

  function rowIDs(root) {
    return Array.from(root.querySelectorAll("tr[data-id]")).map((r) => r.getAttribute("data-id"));
  }

  // looks counts a part's rows that are new since it was shown, by asking
  // for the part as the page would (the same filter and page): only its
  // newest look counts.
  let looks = 0;
  // keep is the rows selected when an update was asked for, selected
  // again once it is shown.
  let keep = null;
  function pending(live, part) {
    const mine = ++looks;
    const url = part.getAttribute("hx-get");
    if (!url || !part.querySelector("tr[data-id]")) {
      showMarker(live, "Updated: show the latest");
      return;
    }
    fetch(url, { headers: { "HX-Request": "true", "HX-Current-URL": location.href }, credentials: "same-origin" })
      .then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
      .then((html) => {
        if (mine !== looks || !document.body.contains(part)) return;
        if (!holding(live)) {
          // Let go meanwhile (the dialog closed): update now.
          refresh(live, part);
          return;
        }
        const doc = new DOMParser().parseFromString(html, "text/html");
        const fresh = doc.getElementById(part.id) || doc.body;
        const shown = new Set(rowIDs(part));
        const ids = rowIDs(fresh);
        const added = ids.filter((id) => !shown.has(id)).length;
        const gone = Array.from(shown).filter((id) => !ids.includes(id)).length;
        const m = markerOf(live);
        if (added > 0) {
          showMarker(live, "↑ " + added + " new" + (added === 1 ? " dead letter" : " dead letters") + ": show");
          if (m) m.setAttribute("data-count", String(added));
        } else if (gone > 0) {
          showMarker(live, gone + " gone from this page: update");
        }
      })
      .catch(() => {
        if (mine === looks) showMarker(live, "Updated: show the latest");
      });
  }

  // refresh updates a part now, the rows selected kept.
  function refresh(live, part) {
    keep = Array.from(part.querySelectorAll("input[data-row]:checked")).map((b) => b.value);
    looks++;
    live.removeAttribute("data-live-held");
    hideMarker(live);
    if (typeof htmx !== "undefined") htmx.trigger(part, "live-refresh");
  }

  // inFlight holds the parts asking for themselves now. htmx queues a
  // trigger that comes meanwhile on the element, and forgets it when the
  // answer replaces that element (the parts swap themselves, outerHTML):
  // a change the stream tells of while an update is on its way (asked
  // for before the change, by an action's dlq-changed) would be lost, the
  // list left without it. It is noted on the wrapper instead
  // (data-live-missed) and asked for once the update is in.
  const inFlight = new WeakSet();
  document.addEventListener("htmx:beforeRequest", function (ev) {
    const elt = ev.detail.elt;
    if (elt instanceof Element && elt.hasAttribute("data-live-part")) inFlight.add(elt);
  });
  // An answer that swapped nothing (an error): the part is still the one
  // that asked.
  document.addEventListener("htmx:afterRequest", function (ev) {
    const elt = ev.detail.elt;
    if (!(elt instanceof Element) || !inFlight.has(elt)) return;
    inFlight.delete(elt);
    const live = elt.closest("[data-live]");
    if (live && elt.isConnected) caughtUp(live, elt);
  });

  // caughtUp asks for a part again when the stream told of a change while
  // it was on its way.
  function caughtUp(live, part) {
    if (!live.hasAttribute("data-live-missed")) return;
    live.removeAttribute("data-live-missed");
    if (holding(live)) {
      live.setAttribute("data-live-held", "");
      pending(live, part);
    } else if (typeof htmx !== "undefined") {
      htmx.trigger(part, "live-refresh");
    }
  }

  // An update the stream asked for waits while the part holds still.
  document.addEventListener("htmx:confirm", function (ev) {
    const elt = ev.detail.elt;
    const trigger = ev.detail.triggeringEvent;
    if (!(elt instanceof Element) || !elt.hasAttribute("data-live-part")) return;
    if (!trigger || trigger.type !== "sse:changed") return;
    const live = elt.closest("[data-live]");
    if (!live) return;
    if (inFlight.has(elt) && elt.isConnected) {
      ev.preventDefault();
      live.setAttribute("data-live-missed", "");
      return;
    }
    if (!holding(live)) return;
    ev.preventDefault();
    live.setAttribute("data-live-held", "");
    pending(live, elt);
  });

  // A dialog closed (a confirmation answered or cancelled): an update
  // held for it alone is made now; rows still selected hold it further.
  document.addEventListener("close", function (ev) {
    if (!(ev.target instanceof HTMLDialogElement)) return;
    document.querySelectorAll("[data-live][data-live-held]").forEach((live) => {
      const part = live.querySelector("[data-live-part]");
      if (part && !holding(live)) refresh(live, part);
    });
  }, true);

  // The marker pressed: the part updates, with the rows that were
  // selected still selected (those still in it).
  document.addEventListener("click", function (ev) {
    const t = ev.target;
    if (!(t instanceof Element)) return;
    const m = t.closest("[data-live-marker]");
    if (!m) return;
    const live = m.closest("[data-live]");
    const part = live && live.querySelector("[data-live-part]");
    if (part) refresh(live, part);
  });

  document.addEventListener("htmx:afterSwap", function (ev) {
    const target = ev.detail.target;
    if (!(target instanceof Element)) return;
    document.querySelectorAll("[data-live]").forEach((live) => {
      const part = live.querySelector("[data-live-part]");
      // The part swapped itself (outerHTML: the target is the old one,
      // out of the page now), or what holds it was.
      if (!part || (target.isConnected && !live.contains(target) && !target.contains(live))) return;
      // Until the swap has settled, htmx has not made the new part
      // listen to the stream (its extension does so as it processes it,
      // a settle task): a change told meanwhile reaches the old part,
      // out of the page, and nothing else. It is noted instead (the
      // source's own listener, below) and asked for once settled.
      live.setAttribute("data-live-settling", "");
      const m = markerOf(live);
      if (m && !m.classList.contains("offline")) hideMarker(live);
      live.removeAttribute("data-live-held");
      if (keep) {
        const ids = new Set(keep);
        keep = null;
        // A click, as the person's, so that the counts and buttons follow.
        part.querySelectorAll("input[data-row]").forEach((b) => {
          if (ids.has(b.value) && !b.checked) b.click();
        });
      }
    });
  });

  // Once a swap has settled (the new part listens to its triggers by
  // then), a change the stream told of while the part was on its way is
  // asked for.
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("[data-live][data-live-settling]").forEach((live) => live.removeAttribute("data-live-settling"));
    document.querySelectorAll("[data-live][data-live-missed]").forEach((live) => {
      const part = live.querySelector("[data-live-part]");
      if (part && !inFlight.has(part)) caughtUp(live, part);
    });
  });

  // The stream lost: the page says it no longer updates itself (htmx's
  // extension tries again, less and less often); back: it catches up.
  document.addEventListener("htmx:sseError", function (ev) {
    const live = ev.target instanceof Element ? ev.target.closest("[data-live]") : null;
    const source = ev.detail && ev.detail.source;
    if (!live || !source) return;
    live.removeAttribute("data-live-open");
    live.setAttribute("data-live-lost", "");
    if (source.readyState !== 2) return; // 2: CLOSED; otherwise the browser opens it again by itself
    showMarker(live, "Not updating by itself: press to update", true);
  });

  const sources = new WeakSet(); // the streams listened to (below)
  document.addEventListener("htmx:sseOpen", function (ev) {
    const live = ev.target instanceof Element ? ev.target.closest("[data-live]") : null;
    if (!live) return;
    const source = ev.detail && ev.detail.source;
    if (source && !sources.has(source)) {
      sources.add(source);
      // A change told while the part is between its swap and its
      // settle (not listening yet) is asked for once it has settled.
      source.addEventListener("changed", function () {
        if (live.hasAttribute("data-live-settling")) live.setAttribute("data-live-missed", "");
      });
    }
    live.setAttribute("data-live-open", ""); // following its stream (the browser tests wait for it)
    const m = markerOf(live);
    if (m && m.classList.contains("offline")) hideMarker(live);
    if (live.hasAttribute("data-live-lost")) {
      // What changed meanwhile was not said: look now.
      live.removeAttribute("data-live-lost");
      const part = live.querySelector("[data-live-part]");
      if (part && typeof htmx !== "undefined") {
        if (holding(live)) pending(live, part);
        else htmx.trigger(part, "live-refresh");
      }
    }
  });
})();
