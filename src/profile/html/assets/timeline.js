// The timeline: a row of steps, then groups of tiles that expand into a
// row per tile, drawn on one canvas; an axis in cycles and microseconds;
// zoom, pan, hover and the critical path.
(function () {
  "use strict";
  const T = R.timeline;
  if (!T) return;
  const canvas = $("tl-canvas"), axis = $("tl-axis"), labels = $("tl-labels");
  const ROW = 18;
  const steps = T.steps.map((s, i) => ({
    i, kind: s[0], label: T.labels[s[1]], op: s[2], iteration: s[3],
    start: s[4], cycles: s[5], estimate: s[6], act: T.activity[i],
  }));
  const end = Math.max(R.total, ...steps.map((s) => s.start + s.cycles), 1);
  const tiles = T.tiles;

  // Groups: few enough rows to read at a glance (about 48), each a power
  // of two of consecutive used tiles; small runs show every tile.
  let size = 1;
  if (tiles.length > 24) {
    size = 4;
    while (tiles.length / size > 48) size *= 2;
  }
  const groups = [];
  for (let i = 0; i < tiles.length; i += size) {
    groups.push({ tiles: tiles.slice(i, i + size), expanded: size === 1 });
  }
  const groupOf = new Map();
  groups.forEach((g, gi) => g.tiles.forEach((t) => groupOf.set(t, gi)));

  // Per step: the longest busy time (the tiles that reach it set the
  // step's length) and, per group, the slowest tile and the mean.
  for (const s of steps) {
    const t = s.act.t, b = s.act.b;
    let max = 0, slowest = 0;
    const gmax = new Float64Array(groups.length), gsum = new Float64Array(groups.length);
    const gcount = new Uint32Array(groups.length), gslow = new Int32Array(groups.length).fill(-1);
    for (let k = 0; k < t.length; k++) {
      max = Math.max(max, b[k]);
      const g = groupOf.get(t[k]);
      gsum[g] += b[k];
      gcount[g] += 1;
      if (b[k] > gmax[g] || gslow[g] < 0) { gmax[g] = b[k]; gslow[g] = t[k]; }
    }
    for (let k = 0; k < t.length; k++) if (b[k] === max && max > 0) slowest++;
    Object.assign(s, { max, slowest, gmax, gsum, gcount, gslow });
  }

  // A tile's index in a step's columns (tiles ascending), or -1.
  function find(s, tile) {
    const t = s.act.t;
    let lo = 0, hi = t.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (t[mid] === tile) return mid;
      if (t[mid] < tile) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
  }

  let rows = [];
  function layoutRows() {
    rows = [{ type: "steps" }];
    groups.forEach((g, gi) => {
      if (size > 1) rows.push({ type: "group", g: gi });
      if (g.expanded) for (const tile of g.tiles) rows.push({ type: "tile", tile, g: gi });
    });
    let html = "";
    for (const row of rows) {
      if (row.type === "steps") html += '<div class="tl-row steps">steps</div>';
      else if (row.type === "group") {
        const g = groups[row.g];
        const last = g.tiles[g.tiles.length - 1];
        html += '<div class="tl-row group" data-group="' + row.g + '">' + (g.expanded ? "▾ " : "▸ ") +
          "tiles " + g.tiles[0] + (last !== g.tiles[0] ? "–" + last : "") +
          ' <span class="dim">(' + g.tiles.length + ")</span></div>";
      } else {
        html += '<div class="tl-row tile" data-tile="' + row.tile + '">tile ' + row.tile + "</div>";
      }
    }
    labels.innerHTML = html;
  }

  labels.addEventListener("click", (event) => {
    const el = event.target.closest("[data-group]");
    if (!el) return;
    const g = groups[Number(el.dataset.group)];
    g.expanded = !g.expanded;
    layoutRows();
    draw();
  });
  $("tl-expand").addEventListener("click", () => { groups.forEach((g) => (g.expanded = true)); layoutRows(); draw(); });
  $("tl-collapse").addEventListener("click", () => {
    if (size > 1) groups.forEach((g) => (g.expanded = false));
    layoutRows(); draw();
  });

  let x0 = 0, x1 = end;
  const critical = $("tl-critical");
  critical.addEventListener("change", () => draw());
  $("tl-reset").addEventListener("click", () => { x0 = 0; x1 = end; draw(); });

  function color(s) {
    return s.kind === "compute" ? opColor(s.op) : KIND_COLORS[s.kind];
  }

  // The first step that ends after cycle `c`.
  function firstVisible(c) {
    let lo = 0, hi = steps.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (steps[mid].start + steps[mid].cycles <= c) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  let width = 0, bars = 0;
  const px = (c) => ((c - x0) / (x1 - x0)) * width;

  function drawAxis() {
    const ctx = setupCanvas(axis, width, 36);
    ctx.clearRect(0, 0, width, 36);
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = "#667085";
    ctx.strokeStyle = "#c4cad4";
    const step = niceStep(x1 - x0, width / 110);
    for (let c = Math.ceil(x0 / step) * step; c <= x1; c += step) {
      const x = Math.round(px(c)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, 28); ctx.lineTo(x, 36); ctx.stroke();
      ctx.fillText(fmt(c), x + 3, 13);
      const us = micros(c);
      ctx.fillText((step / R.clockHz * 1e6 < 0.1 ? us.toFixed(3) : us.toFixed(1)) + " µs", x + 3, 26);
    }
  }

  function draw() {
    width = canvas.parentElement.clientWidth;
    const height = rows.length * ROW;
    const ctx = setupCanvas(canvas, width, height);
    ctx.clearRect(0, 0, width, height);
    drawAxis();
    bars = 0;
    const dim = critical.checked;
    const first = firstVisible(x0);
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r], y = r * ROW;
      if (r % 2 === 1) { ctx.fillStyle = "#fafbfc"; ctx.fillRect(0, y, width, ROW); }
      for (let k = first; k < steps.length && steps[k].start < x1; k++) {
        const s = steps[k];
        const sx = px(s.start), sw = Math.max(0.5, px(s.start + s.cycles) - sx);
        if (row.type === "steps") {
          ctx.globalAlpha = 1;
          ctx.fillStyle = color(s);
          ctx.fillRect(sx, y + 2, sw, ROW - 4);
          bars++;
          if (sw > 46) {
            ctx.save();
            ctx.beginPath(); ctx.rect(sx, y, sw, ROW); ctx.clip();
            ctx.fillStyle = "#fff";
            ctx.font = "11px system-ui, sans-serif";
            ctx.fillText(s.label, sx + 3, y + 13);
            ctx.restore();
          }
          continue;
        }
        if (s.act.t.length === 0) {
          // A sync or a host transfer: every tile waits for it.
          ctx.globalAlpha = dim ? 0.6 : 0.28;
          ctx.fillStyle = KIND_COLORS[s.kind];
          ctx.fillRect(sx, y + 6, sw, ROW - 12);
          continue;
        }
        let busy, mean = -1;
        if (row.type === "group") {
          if (s.gcount[row.g] === 0) continue;
          busy = s.gmax[row.g];
          mean = s.gsum[row.g] / s.gcount[row.g];
        } else {
          const at = find(s, row.tile);
          if (at < 0) continue;
          busy = s.act.b[at];
        }
        const slowest = s.max > 0 && busy === s.max;
        ctx.globalAlpha = 0.12;
        ctx.fillStyle = color(s);
        ctx.fillRect(sx, y + 3, sw, ROW - 6);
        const bw = Math.max(0.5, px(s.start + busy) - sx);
        ctx.globalAlpha = dim && !slowest ? 0.15 : mean >= 0 ? 0.45 : 1;
        ctx.fillRect(sx, y + 3, bw, ROW - 6);
        if (mean >= 0) {
          ctx.globalAlpha = dim && !slowest ? 0.2 : 1;
          ctx.fillRect(sx, y + 3, Math.max(0.5, px(s.start + mean) - sx), ROW - 6);
        }
        bars++;
        if (slowest) {
          ctx.globalAlpha = 1;
          ctx.fillStyle = "#c2413b";
          ctx.fillRect(sx, y + 1, bw, 2);
        }
      }
    }
    ctx.globalAlpha = 1;
    window.ipubReport.timeline = {
      rows: rows.length, groups: size > 1 ? groups.length : 0, tiles: tiles.length,
      steps: steps.length, bars, view: [x0, x1], end,
    };
  }

  // Steps by kind, then the operations by their kind (every matrix
  // product shares a hue, shaded per operation).
  function legend() {
    let html = '<span class="legend-group">';
    for (const kind of ["exchange", "sync", "host"]) html += legendItem(KIND_COLORS[kind], kind);
    html += legendItem("#c2413b", "critical path") + "</span>";
    const byKind = new Map();
    const ran = new Set(steps.map((s) => s.op));
    T.ops.forEach((op, i) => {
      if (!ran.has(i)) return;
      const kind = T.opKinds[i] || "other";
      if (!byKind.has(kind)) byKind.set(kind, []);
      byKind.get(kind).push(i);
    });
    for (const [kind, ops] of byKind) {
      html += '<span class="legend-group"><b>' + esc(kind) + "</b> ";
      for (const i of ops) html += legendItem(opColor(i), T.ops[i]);
      html += "</span>";
    }
    $("tl-legend").innerHTML = html;
  }

  function stepAt(c) {
    const k = firstVisible(c);
    return k < steps.length && steps[k].start <= c ? steps[k] : null;
  }

  function describe(s, row) {
    let html = "<b>" + esc(s.label) + "</b> <span class=\"dim\">" + s.kind +
      (s.iteration >= 0 ? ", iteration " + s.iteration : "") + "</span><br>";
    if (s.op >= 0) html += "operation " + esc(T.ops[s.op]) + "<br>";
    html += "step: " + cyclesText(s.cycles) + "<br>";
    if (s.estimate >= 0) html += "estimated: " + fmt(s.estimate) + " cycles<br>";
    html += "starts at cycle " + fmt(s.start) + "<br>";
    const act = s.act;
    const slowestText = () => (s.slowest === 1 ? "one tile" : s.slowest + " tiles") + " busy for " + fmt(s.max);
    if (row.type === "steps" && act.t.length) {
      html += act.t.length + " tiles; the step's length is set by " + slowestText();
    } else if (row.type === "group" && s.gcount[row.g]) {
      html += s.gcount[row.g] + " tiles here: slowest " + fmt(s.gmax[row.g]) + " (tile " + s.gslow[row.g] +
        "), mean " + fmt(s.gsum[row.g] / s.gcount[row.g]) + " busy cycles";
      if (s.gmax[row.g] === s.max) html += "<br><span style=\"color:#ff8a80\">on the critical path (" + slowestText() + ")</span>";
    } else if (row.type === "tile") {
      const at = find(s, row.tile);
      if (at < 0) return html + "tile " + row.tile + " takes no part";
      html += "<b>tile " + row.tile + "</b>: busy " + fmt(act.b[at]) + ", waits " + fmt(s.cycles - act.b[at]);
      if (act.k && act.k[at] >= 0) html += "<br>kernel " + esc(T.kernels[act.k[at]]);
      if (act.e && act.e[at] >= 0) html += "<br>estimated " + fmt(act.e[at]) + " cycles";
      if (act.i) html += "<br>bytes in " + fmt(act.i[at]) + ", out " + fmt(act.o[at]);
      if (act.b[at] === s.max) html += "<br><span style=\"color:#ff8a80\">sets the step's length" + (s.slowest > 1 ? " (with " + (s.slowest - 1) + " other tiles)" : "") + "</span>";
    }
    return html;
  }

  let drag = null;
  canvas.addEventListener("mousedown", (e) => {
    drag = { x: e.clientX, x0, x1 };
    canvas.classList.add("dragging");
  });
  window.addEventListener("mouseup", () => { drag = null; canvas.classList.remove("dragging"); });
  canvas.addEventListener("mousemove", (e) => {
    const rect = canvas.getBoundingClientRect();
    if (drag) {
      const shift = ((e.clientX - drag.x) / width) * (drag.x1 - drag.x0);
      const span = drag.x1 - drag.x0;
      x0 = Math.min(Math.max(0, drag.x0 - shift), end - span);
      x1 = x0 + span;
      draw();
      hideTip();
      return;
    }
    const c = x0 + ((e.clientX - rect.left) / width) * (x1 - x0);
    const row = rows[Math.floor((e.clientY - rect.top) / ROW)];
    const s = stepAt(c);
    if (!row || !s) return hideTip();
    showTip(e, describe(s, row));
  });
  canvas.addEventListener("mouseleave", hideTip);
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const rect = canvas.getBoundingClientRect();
    const at = x0 + ((e.clientX - rect.left) / width) * (x1 - x0);
    const factor = Math.exp(Math.sign(e.deltaY) * 0.18);
    const span = Math.min(end, Math.max(20, (x1 - x0) * factor));
    x0 = Math.max(0, at - ((at - x0) / (x1 - x0)) * span);
    x1 = Math.min(end, x0 + span);
    x0 = Math.max(0, x1 - span);
    draw();
  }, { passive: false });
  canvas.addEventListener("dblclick", (e) => {
    const rect = canvas.getBoundingClientRect();
    const s = stepAt(x0 + ((e.clientX - rect.left) / width) * (x1 - x0));
    if (!s) return;
    const margin = Math.max(s.cycles * 0.05, 10);
    x0 = Math.max(0, s.start - margin);
    x1 = Math.min(end, s.start + s.cycles + margin);
    draw();
  });
  window.addEventListener("resize", () => draw());

  legend();
  layoutRows();
  draw();
})();
