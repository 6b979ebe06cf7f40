// Heatmaps of the chip: every tile as a cell, 64 to a row, coloured by a
// metric; hover for figures, click to select a tile.
(function () {
  "use strict";
  const H = R.heatmap;
  if (!H) return;
  const cols = H.columns, rowsCount = Math.ceil(H.tiles / cols);
  const CELL = 10;
  // A perceptually even ramp from pale to dark (viridis-like, reversed so
  // busy reads dark), and a diverging one: green faster, red slower.
  const RAMP = [[253, 231, 37], [94, 201, 98], [33, 145, 140], [59, 82, 139], [68, 1, 84]];
  const DIVERGING = [[47, 143, 78], [246, 246, 246], [194, 65, 59]];
  function mix(stops, t) {
    t = Math.min(1, Math.max(0, t));
    const x = t * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), f = x - i;
    const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
    return "rgb(" + c.join(",") + ")";
  }
  function gradient(stops) {
    return "linear-gradient(to right," + stops.map((_, i) => mix(stops, i / (stops.length - 1))).join(",") + ")";
  }
  const value = (m, v) => (m.unit === "bytes" ? fmtBytes(v) : fmt(v) + " " + m.unit);

  let selected = -1;
  const drawn = [];

  function draw(m) {
    const canvas = $("heat-" + m.id);
    if (!canvas) return;
    const ctx = setupCanvas(canvas, cols * CELL + 1, rowsCount * CELL + 1);
    let lo = Infinity, hi = -Infinity;
    for (let t = 0; t < H.tiles; t++) {
      if (!H.used[t]) continue;
      lo = Math.min(lo, m.values[t]);
      hi = Math.max(hi, m.values[t]);
    }
    if (!isFinite(lo)) { lo = 0; hi = 0; }
    const bound = Math.max(Math.abs(lo), Math.abs(hi), 1);
    let cells = 0;
    for (let t = 0; t < H.tiles; t++) {
      const x = (t % cols) * CELL, y = Math.floor(t / cols) * CELL;
      if (!H.used[t]) ctx.fillStyle = "#e9ecf1";
      else if (m.diverging) ctx.fillStyle = mix(DIVERGING, 0.5 + m.values[t] / (2 * bound));
      else ctx.fillStyle = mix(RAMP, hi > lo ? (m.values[t] - lo) / (hi - lo) : 0.5);
      ctx.fillRect(x + 1, y + 1, CELL - 1, CELL - 1);
      cells++;
    }
    if (selected >= 0 && selected < H.tiles) {
      ctx.strokeStyle = "#e0245e";
      ctx.lineWidth = 2;
      ctx.strokeRect((selected % cols) * CELL + 1, Math.floor(selected / cols) * CELL + 1, CELL - 1, CELL - 1);
    }
    canvas.dataset.cells = cells;
    const scale = $("heat-" + m.id + "-scale");
    if (scale) {
      const low = m.diverging ? -bound : lo, high = m.diverging ? bound : hi;
      scale.innerHTML = "<span>" + value(m, low) + '</span><span class="ramp" style="background:' +
        gradient(m.diverging ? DIVERGING : RAMP) + '"></span><span>' + value(m, high) + "</span>";
    }
    return cells;
  }

  function drawAll() {
    drawn.length = 0;
    for (const m of H.metrics) drawn.push({ id: m.id, cells: draw(m) || 0 });
    window.ipubReport.heatmaps = drawn.slice();
  }

  function tileAt(canvas, e) {
    const rect = canvas.getBoundingClientRect();
    const col = Math.floor((e.clientX - rect.left - 1) / CELL), row = Math.floor((e.clientY - rect.top - 1) / CELL);
    const t = row * cols + col;
    return col >= 0 && col < cols && row >= 0 && t < H.tiles ? t : -1;
  }

  for (const m of H.metrics) {
    const canvas = $("heat-" + m.id);
    if (!canvas) continue;
    canvas.addEventListener("mousemove", (e) => {
      const t = tileAt(canvas, e);
      if (t < 0) return hideTip();
      let html = "<b>tile " + t + "</b>";
      if (!H.used[t]) html += '<br><span class="dim">not used by the program</span>';
      else for (const other of H.metrics) {
        html += "<br>" + esc(other.title.toLowerCase()) + ": " + value(other, other.values[t]);
      }
      if (H.memoryBytes && H.used[t] && m.id === "memory") {
        html += " (" + ((100 * m.values[t]) / H.memoryBytes).toFixed(1) + " % of memory)";
      }
      showTip(e, html);
    });
    canvas.addEventListener("mouseleave", hideTip);
    canvas.addEventListener("click", (e) => {
      const t = tileAt(canvas, e);
      if (t >= 0 && H.used[t]) {
        selectTile(t);
        const memory = $("memory");
        if (memory) memory.scrollIntoView({ behavior: "smooth" });
      }
    });
  }
  document.addEventListener("ipub-select-tile", (e) => {
    selected = e.detail;
    drawAll();
  });
  drawAll();
})();
