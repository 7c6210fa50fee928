// Lazarus charts: a legend entry is a toggle that shows or hides its
// line (aria-pressed says which). The charts are drawn on the server;
// without this script the legend is a list and every line is shown.
(function () {
  "use strict";

  document.addEventListener("click", function (ev) {
    const t = ev.target;
    if (!(t instanceof Element)) return;
    const button = t.closest("[data-series-toggle]");
    if (!button) return;
    const figure = button.closest("figure");
    if (!figure) return;
    const key = button.getAttribute("data-series-toggle");
    const on = button.getAttribute("aria-pressed") !== "true";
    button.setAttribute("aria-pressed", String(on));
    figure.querySelectorAll("g.series").forEach((g) => {
      if (g.getAttribute("data-series") === key) g.classList.toggle("off", !on);
    });
  });
})();
