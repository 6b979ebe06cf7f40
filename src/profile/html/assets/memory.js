// The memory view of one tile: an address map of its buffers over the
// run's steps, live bytes under it, its largest users and its free space.
(function () {
  "use strict";
  const M = R.memory;
  if (!M) return;
  const canvas = $("mem-canvas"), input = $("mem-tile");
  const KIND_FILL = { input: "#3a9cb1", weight: "#8e6bbf", activation: "#3f9b6e", operand: "#4a78b5", partial: "#d9773a" };
  const columns = M.columns.map((c) => ({ index: c[0], start: c[1], cycles: c[2], label: M.labels[c[3]], kind: c[4] }));
  const span = M.end - M.base;
  const capacity = M.loadableEnd - M.base;
  const LEFT = 74, TOP = 8, MAP = 430, GAP = 40, LIVE = 70, BOTTOM = 20;

  let legend = "";
  for (const kind of M.kinds) legend += legendItem(KIND_FILL[kind], kind);
  legend += legendItem("#aab1bd", "support (code, kernel code, kernel states)");
  $("mem-legend").innerHTML = legend;

  let rects = [], current = -1, colW = 1;

  function buffersOf(tile) {
    const t = M.tiles[String(tile)];
    if (!t) return null;
    return {
      support: t.support.map((s) => ({ kind: s[0], address: s[1], bytes: s[2] })),
      buffers: t.buffers.map((b) => ({
        address: b[0], bytes: b[1], kind: M.kinds[b[2]], name: M.names[b[3]],
        op: b[4] >= 0 ? M.names[b[4]] : null, first: b[5], last: b[6],
      })),
    };
  }

  const alive = (b, c) => c.index >= b.first && c.index <= b.last;

  function draw(tile) {
    current = tile;
    input.value = tile;
    const placed = buffersOf(tile);
    const title = $("mem-title");
    const width = Math.max(600, canvas.parentElement.clientWidth - 2);
    const height = TOP + MAP + GAP + LIVE + BOTTOM;
    const ctx = setupCanvas(canvas, width, height);
    ctx.clearRect(0, 0, width, height);
    rects = [];
    if (!placed) {
      title.textContent = "tile " + tile + " holds nothing in this program";
      $("mem-users").innerHTML = "";
      $("mem-free").innerHTML = "";
      window.ipubReport.memory = { tile, buffers: 0 };
      return;
    }
    const n = Math.max(1, columns.length);
    colW = (width - LEFT - 8) / n;
    const y = (address) => TOP + ((M.end - address) / span) * MAP;
    const x = (i) => LEFT + i * colW;

    // Address axis and regions.
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#667085";
    ctx.strokeStyle = "#e3e7ee";
    for (let a = M.base; a <= M.end; a += 0x10000) {
      const yy = Math.round(y(a)) + 0.5;
      ctx.beginPath(); ctx.moveTo(LEFT - 4, yy); ctx.lineTo(width - 8, yy); ctx.stroke();
      ctx.fillText(hex(a), 4, yy + 4);
    }
    ctx.fillStyle = "#f1f3f6";
    ctx.fillRect(LEFT, y(M.end), width - LEFT - 8, y(M.loadableEnd) - y(M.end));
    ctx.strokeStyle = "#1d2430";
    ctx.setLineDash([4, 3]);
    const r1 = Math.round(y(M.region1)) + 0.5;
    ctx.beginPath(); ctx.moveTo(LEFT, r1); ctx.lineTo(width - 8, r1); ctx.stroke();
    ctx.setLineDash([]);

    // Support blocks live all run long.
    for (const s of placed.support) {
      ctx.fillStyle = "#aab1bd";
      const top = y(s.address + s.bytes), h = Math.max(1, y(s.address) - top);
      ctx.fillRect(LEFT, top, width - LEFT - 8, h);
      rects.push({ x: LEFT, y: top, w: width - LEFT - 8, h, support: s });
    }
    // Buffers, in each run of consecutive steps where they are alive.
    let count = 0;
    for (const b of placed.buffers) {
      ctx.fillStyle = KIND_FILL[b.kind] || "#888";
      const top = y(b.address + b.bytes), h = Math.max(1, y(b.address) - top);
      let from = -1;
      for (let i = 0; i <= columns.length; i++) {
        const live = i < columns.length && alive(b, columns[i]);
        if (live && from < 0) from = i;
        if (!live && from >= 0) {
          const r = { x: x(from), y: top, w: Math.max(1, x(i) - x(from) - 0.5), h, buffer: b };
          ctx.fillRect(r.x, r.y, r.w, r.h);
          rects.push(r);
          from = -1;
          count++;
        }
      }
    }

    // The regions' boundary, named over whatever is drawn there.
    const note = "region 1 (interleaved) above, region 0 below";
    const noteWidth = ctx.measureText(note).width + 8;
    ctx.fillStyle = "rgba(255,255,255,0.9)";
    ctx.fillRect(width - 8 - noteWidth, r1 - 15, noteWidth, 13);
    ctx.fillStyle = "#1d2430";
    ctx.fillText(note, width - 4 - noteWidth, r1 - 5);

    // Where each operation starts, under the map, as space allows.
    ctx.font = "10px system-ui, sans-serif";
    ctx.fillStyle = "#667085";
    let free = 0;
    columns.forEach((c, i) => {
      if (c.kind !== "compute" || (i > 0 && columns[i - 1].label === c.label)) return;
      const at = x(i);
      if (at < free) return;
      ctx.fillRect(at, TOP + MAP, 1, 4);
      ctx.fillText(c.label, at + 2, TOP + MAP + 12);
      free = at + ctx.measureText(c.label).width + 10;
    });
    ctx.font = "11px system-ui, sans-serif";

    // Live bytes per step, against the tile's loadable memory.
    const supportBytes = placed.support.reduce((a, s) => a + s.bytes, 0);
    const live = columns.map((c) => supportBytes + placed.buffers.reduce((a, b) => a + (alive(b, c) ? b.bytes : 0), 0));
    let peakAt = 0;
    live.forEach((v, i) => { if (v > live[peakAt]) peakAt = i; });
    const base = TOP + MAP + GAP + LIVE;
    ctx.fillStyle = "#667085";
    ctx.fillText("live bytes (of " + fmtBytes(capacity) + ")", 4, base - LIVE - 4);
    ctx.fillStyle = "rgba(74,120,181,0.35)";
    ctx.strokeStyle = "#4a78b5";
    ctx.beginPath();
    ctx.moveTo(x(0), base);
    live.forEach((v, i) => {
      const yy = base - (v / capacity) * LIVE;
      ctx.lineTo(x(i), yy); ctx.lineTo(x(i + 1), yy);
    });
    ctx.lineTo(x(live.length), base);
    ctx.closePath(); ctx.fill(); ctx.stroke();
    if (live.length) {
      ctx.fillStyle = "#c2413b";
      ctx.fillRect(x(peakAt), base - LIVE, Math.max(1, colW), LIVE);
      ctx.fillText("peak " + fmtBytes(live[peakAt]) + " at " + (columns[peakAt].label || ""), Math.min(x(peakAt) + 4, width - 220), base - LIVE + 10);
    }
    ctx.fillStyle = "#667085";
    ctx.fillText("steps of the run →", LEFT, height - 5);

    title.textContent = "tile " + tile + ": " + placed.buffers.length + " buffers, " +
      fmtBytes(live[peakAt] || supportBytes) + " at the peak (" +
      (((live[peakAt] || supportBytes) / capacity) * 100).toFixed(1) + " % of memory)";
    tables(placed, supportBytes, live, peakAt);
    window.ipubReport.memory = { tile, buffers: placed.buffers.length, spans: count };
  }

  function tables(placed, supportBytes, live, peakAt) {
    const users = placed.buffers.concat(placed.support.map((s) => ({ ...s, name: s.kind, kind: "support", op: null })))
      .sort((a, b) => b.bytes - a.bytes).slice(0, 12);
    let html = "<thead><tr><th>what</th><th>kind</th><th>operation</th><th>bytes</th><th>address</th><th>alive in steps</th></tr></thead><tbody>";
    for (const b of users) {
      html += "<tr><td>" + esc(b.name) + "</td><td>" + b.kind + "</td><td>" + esc(b.op || "-") + "</td><td>" +
        fmt(b.bytes) + "</td><td>" + hex(b.address) + "</td><td>" +
        (b.first === undefined ? "all" : b.first + "–" + b.last) + "</td></tr>";
    }
    $("mem-users").innerHTML = html + "</tbody>";

    // Free space at the peak: the gaps between what is alive then.
    const column = columns[peakAt];
    const busy = placed.support.map((s) => [s.address, s.address + s.bytes])
      .concat(placed.buffers.filter((b) => !column || alive(b, column)).map((b) => [b.address, b.address + b.bytes]))
      .sort((a, b) => a[0] - b[0]);
    let cursor = M.base, largest = 0, highest = M.base;
    for (const [from, to] of busy) {
      largest = Math.max(largest, from - cursor);
      cursor = Math.max(cursor, to);
      highest = Math.max(highest, to);
    }
    largest = Math.max(largest, M.loadableEnd - cursor);
    const peak = live[peakAt] || supportBytes;
    const rows = [
      ["loadable memory", fmt(capacity)],
      ["support blocks", fmt(supportBytes)],
      ["peak live bytes", fmt(peak) + (column ? " at " + esc(column.label) : "")],
      ["free at the peak", fmt(capacity - peak) + " (" + (((capacity - peak) / capacity) * 100).toFixed(1) + " %)"],
      ["largest free range at the peak", fmt(largest)],
      ["highest address used", hex(highest)],
    ];
    $("mem-free").innerHTML = "<tbody>" + rows.map((r) => "<tr><td>" + r[0] + "</td><td>" + r[1] + "</td></tr>").join("") + "</tbody>";
  }

  canvas.addEventListener("mousemove", (e) => {
    const rect = canvas.getBoundingClientRect();
    const px = e.clientX - rect.left, py = e.clientY - rect.top;
    // Buffers first: they are drawn over the support bands' width.
    const hit = rects.filter((r) => px >= r.x && px <= r.x + r.w && py >= r.y - 1 && py <= r.y + r.h + 1)
      .sort((a, b) => (a.buffer ? 0 : 1) - (b.buffer ? 0 : 1) || a.h - b.h)[0];
    if (!hit) return hideTip();
    if (hit.support) {
      const s = hit.support;
      return showTip(e, "<b>" + esc(s.kind) + "</b><br>" + hex(s.address) + "–" + hex(s.address + s.bytes) + ", " + fmt(s.bytes) + " bytes<br>kept all run long");
    }
    const b = hit.buffer;
    const at = columns[Math.min(columns.length - 1, Math.max(0, Math.floor((px - LEFT) / colW)))];
    showTip(e, "<b>" + esc(b.name) + "</b> <span class=\"dim\">" + b.kind + "</span><br>" +
      (b.op ? "written by " + esc(b.op) + "<br>" : "") +
      hex(b.address) + "–" + hex(b.address + b.bytes) + ", " + fmt(b.bytes) + " bytes<br>" +
      "alive in steps " + b.first + "–" + b.last + (at ? "<br>here: " + esc(at.label) + " (step " + at.index + ")" : ""));
  });
  canvas.addEventListener("mouseleave", hideTip);

  const pick = (tile) => { if (tile !== null && tile !== undefined) draw(tile); };
  input.addEventListener("change", () => pick(Number(input.value)));
  $("mem-fullest").addEventListener("click", () => pick(M.fullest));
  $("mem-bottleneck").addEventListener("click", () => pick(R.bottleneck));
  document.addEventListener("ipub-select-tile", (e) => pick(e.detail));
  window.addEventListener("resize", () => { if (current >= 0) draw(current); });
  const first = R.bottleneck !== null && R.bottleneck !== undefined && M.tiles[String(R.bottleneck)] ? R.bottleneck : M.fullest;
  if (first !== null && first !== undefined) draw(first);
  else window.ipubReport.memory = { tile: -1, buffers: 0 };
})();
