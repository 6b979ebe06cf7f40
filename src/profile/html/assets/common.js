// Shared helpers of the ipub profile report: the embedded data, number
// formatting, colours, the tooltip, canvas set-up and tile selection.
"use strict";

const R = JSON.parse(document.getElementById("report-data").textContent);
// What the page drew, for tests and for anyone poking at it in a console.
window.ipubReport = { ready: false };

const $ = (id) => document.getElementById(id);
const fmt = (n) => Math.round(n).toLocaleString("en-US");
const hex = (n) => "0x" + n.toString(16);

function fmtBytes(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(2) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
  return fmt(n) + " B";
}

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

const KIND_COLORS = { compute: "#3f9b6e", exchange: "#4a78b5", sync: "#d08a2e", host: "#9aa1ad" };
// Operation colours come with the data (by kind of operation, shaded per
// operation); `opColors` is the timeline's table of them.
const opColor = (i) => (i >= 0 && R.timeline && R.timeline.opColors[i]) || KIND_COLORS.compute;

function micros(cycles) {
  return (cycles * 1e6) / R.clockHz;
}

// Cycles with their time at the clock.
function cyclesText(cycles) {
  const us = micros(cycles);
  return fmt(cycles) + " cycles (" + (us >= 100 ? us.toFixed(0) : us.toFixed(2)) + " µs)";
}

const tooltip = $("tooltip");
function showTip(event, html) {
  tooltip.innerHTML = html;
  tooltip.hidden = false;
  const pad = 14;
  const w = tooltip.offsetWidth, h = tooltip.offsetHeight;
  let x = event.clientX + pad, y = event.clientY + pad;
  if (x + w > window.innerWidth - 4) x = event.clientX - w - pad;
  if (y + h > window.innerHeight - 4) y = event.clientY - h - pad;
  tooltip.style.left = Math.max(4, x) + "px";
  tooltip.style.top = Math.max(4, y) + "px";
}
function hideTip() {
  tooltip.hidden = true;
}

// Sizes `canvas` to `width` x `height` CSS pixels at the screen's pixel
// density and returns its 2D context in CSS pixels.
function setupCanvas(canvas, width, height) {
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(width * ratio));
  canvas.height = Math.max(1, Math.round(height * ratio));
  canvas.style.width = width + "px";
  canvas.style.height = height + "px";
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return ctx;
}

// A round step for about `count` ticks over `range`: 1, 2 or 5 times a
// power of ten.
function niceStep(range, count) {
  const raw = range / Math.max(1, count);
  const power = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-9))));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

// Every view that shows one tile listens for this.
function selectTile(tile) {
  document.dispatchEvent(new CustomEvent("ipub-select-tile", { detail: tile }));
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("[data-tile]");
  if (link) selectTile(Number(link.dataset.tile));
});

function legendItem(color, text) {
  return '<span><i style="background:' + color + '"></i>' + esc(text) + "</span>";
}
