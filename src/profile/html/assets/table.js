// Sortable tables: click a column's header to sort by it (numbers by the
// cell's data-v, text otherwise); click again to reverse. Runs last, and
// marks the page ready.
(function () {
  "use strict";
  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = table.querySelectorAll("thead th");
    heads.forEach((th, column) => {
      th.addEventListener("click", () => {
        const body = table.tBodies[0];
        const descending = !th.classList.contains("sorted-desc");
        heads.forEach((h) => h.classList.remove("sorted-asc", "sorted-desc"));
        th.classList.add(descending ? "sorted-desc" : "sorted-asc");
        const key = (row) => {
          const cell = row.cells[column];
          if (!cell) return "";
          if (cell.dataset.v !== undefined) {
            const v = Number(cell.dataset.v);
            return Number.isNaN(v) ? -Infinity : v;
          }
          return cell.textContent;
        };
        const rows = Array.from(body.rows).sort((a, b) => {
          const x = key(a), y = key(b);
          const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return descending ? -order : order;
        });
        for (const row of rows) body.appendChild(row);
      });
    });
  }
  window.ipubReport.ready = true;
})();
