// lithify ui: keyboard navigation (j/k move, Enter opens, Esc goes back). No other script runs.
"use strict";
(function () {
  let at = -1;
  const rows = () => Array.from(document.querySelectorAll("[data-nav]"));
  function select(i) {
    const all = rows();
    if (!all.length) return;
    at = Math.max(0, Math.min(i, all.length - 1));
    all.forEach((r, j) => r.classList.toggle("selected", j === at));
    all[at].scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (t instanceof HTMLElement && t.closest("input, textarea, select, [contenteditable]")) {
      if (e.key === "Escape") t.blur();
      return;
    }
    if (e.key === "Enter" && t instanceof HTMLElement && t.closest("a, button, summary")) return;
    if (e.key === "j") { select(at + 1); e.preventDefault(); }
    else if (e.key === "k") { select(at - 1); e.preventDefault(); }
    else if (e.key === "Enter" && at >= 0) {
      const link = rows()[at].querySelector("a[href]");
      if (link) { link.click(); e.preventDefault(); }
    } else if (e.key === "Escape") {
      const back = document.querySelector("[data-back]");
      if (back) { back.click(); e.preventDefault(); }
    }
  });
})();
