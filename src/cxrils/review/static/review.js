// cxrils review page: one sampled record at a time, decided with the keyboard.
// Every decision is saved by the server before the next record is shown, so a closed tab
// or a stopped server loses nothing; reopening the page resumes at the first record the
// reviewer has not decided. window.reviewTimings holds, per decision, the milliseconds
// from the key press to the next record drawn (benchmarks/review.py reads them).
"use strict";
const $ = (id) => document.getElementById(id);
const S = { reviewer: "", rec: null, img: null, mask: null, zoom: 1, panX: 0, panY: 0, busy: false,
            revisit: false, reasons: [] };
window.reviewTimings = [];
let t0 = null;

function showError(msg) { $("error").textContent = msg || ""; }

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const r = await fetch(path, opts);
  let data = null;
  try { data = await r.json(); } catch (e) { data = null; }
  if (!r.ok) throw new Error((data && data.detail) || `The server answered ${r.status}.`);
  return data;
}

function loadImage(url) {
  return new Promise((resolve, reject) => {
    const im = new Image();
    im.onload = () => resolve(im);
    im.onerror = () => reject(new Error(`The image ${url} could not be loaded.`));
    im.src = url;
  });
}

function requestId() {
  const a = new Uint8Array(12); crypto.getRandomValues(a);
  return Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
}

// ------------------------------------------------------------------ drawing

function keptBoxes() {
  if (!S.rec || !S.rec.chain) return [];
  return S.rec.chain.findings.flatMap((f) => f.boxes.filter((b) => b.kept));
}

function fit() {
  const wrap = $("view-wrap");
  return S.img ? Math.min(wrap.clientWidth / S.img.width, wrap.clientHeight / S.img.height) : 1;
}

function place() {
  const c = $("view"), s = fit() * S.zoom;
  c.style.transform = `translate(${S.panX}px, ${S.panY}px) scale(${s})`;
  $("zoom-value").textContent = `${Math.round(S.zoom * 100)}%`;
}

function draw() {
  const c = $("view"), ctx = c.getContext("2d");
  if (!S.img) { ctx.clearRect(0, 0, c.width, c.height); return; }
  if (c.width !== S.img.width || c.height !== S.img.height) { c.width = S.img.width; c.height = S.img.height; }
  ctx.globalAlpha = 1;
  ctx.drawImage(S.img, 0, 0);
  if ($("show-mask").checked && S.mask) {
    ctx.globalAlpha = Number($("opacity").value) / 100;
    ctx.drawImage(S.mask, 0, 0);
    ctx.globalAlpha = 1;
  }
  if ($("show-boxes").checked) {
    ctx.strokeStyle = "#3f6"; ctx.lineWidth = Math.max(1, c.width / 400);
    for (const b of keptBoxes()) ctx.strokeRect(b.box[0], b.box[1], b.box[2] - b.box[0], b.box[3] - b.box[1]);
  }
  place();
}

function setZoom(z) { S.zoom = Math.min(8, Math.max(1, z)); if (S.zoom === 1) { S.panX = 0; S.panY = 0; } place(); }

// ------------------------------------------------------------------ the record

function text(id, value) { $(id).textContent = value === null || value === undefined || value === "" ? "—" : value; }

function li(parent, html) { const el = document.createElement("li"); el.innerHTML = html; parent.appendChild(el); return el; }

function esc(s) {
  return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[ch]));
}

function list(xs) { return xs && xs.length ? xs.map(esc).join(", ") : "none"; }

// c1's IoU; with grounding.c1_bilateral = "per_lung" also the parts over each lung (patient sides).
function c1Value(b) {
  const v = b.c1_iou_anatomy ?? "—";
  return b.c1_iou_right_part === undefined ? v : `${v} (right ${b.c1_iou_right_part}, left ${b.c1_iou_left_part})`;
}

function boxTable(boxes) {
  if (!boxes.length) return "";
  const cell = (ok) => `<td class="${ok ? "pass" : "fail"}">${ok ? "pass" : "fail"}</td>`;
  const rows = boxes.map((b, i) => `<tr class="${b.kept ? "kept" : ""}"><td>${i + 1}</td><td>${esc(b.class_name)}</td>` +
    `<td>${b.box.map((v) => v.toFixed(0)).join(", ")}</td><td>${c1Value(b)}</td>${cell(b.c1)}` +
    `<td>${b.c2_confidence ?? "—"}</td>${cell(b.c2)}<td>${b.c3_signal ?? "—"}</td>${cell(b.c3)}${cell(b.c4)}` +
    `<td>${b.kept ? "kept" : "dropped"}</td></tr>`).join("");
  return `<table class="boxes"><tr><th>#</th><th>class</th><th>x0, y0, x1, y1 (px)</th><th>c1 IoU</th><th>c1</th>` +
    `<th>c2 conf.</th><th>c2</th><th>c3 signal</th><th>c3</th><th>c4</th><th></th></tr>${rows}</table>`;
}

function renderChain(chain) {
  const ol = $("chain"); ol.innerHTML = "";
  $("chain-note").textContent = chain.note || "";
  $("report").textContent = chain.report ? `${chain.report.section_used || ""}: ${chain.report.section_text || ""}` : "—";
  for (const f of chain.findings) {
    const type = f.predicted_lesion_type ? `${esc(f.entity_lesion_type || f.entity)} → predicted ${esc(f.predicted_lesion_type)}`
      : esc(f.lesion_type || "not one of the seven types");
    li(ol, `<b>Structured finding</b>: “${esc(f.entity)}”, ${esc(f.presence)}, ${esc(f.certainty)}; ${type}` +
      ` (sentence ${esc(f.sentence_index)})`);
    li(ol, `<b>Location labels</b>: report words ${list(f.report_locations)} → labels ${list(f.labels)}; ` +
      `reported lung regions ${list(f.reported)}${f.reported_implied ? " (implied: no region named)" : ""}`);
    const kept = f.boxes.filter((b) => b.kept).length;
    li(ol, `<b>Lesion boxes and Algorithm 1</b>: ${f.boxes.length} candidates, ${kept} kept (passed c1-c4)` +
      boxTable(f.boxes));
    li(ol, `<b>Grounded</b>: ${list(f.grounded)}; mask ${esc(f.mask_area)} px` +
      (f.drop_reason ? `; not grounded: ${esc(f.drop_reason)}` : ""));
  }
  if (chain.recorded) {
    li(ol, `<b>Empty locations of the study</b>: ${list(chain.empty_locations)}` +
      (chain.ctr !== null && chain.ctr !== undefined ? `; cardiothoracic ratio ${Number(chain.ctr).toFixed(3)}` : ""));
    const th = Object.entries(chain.thresholds || {}).map(([k, v]) => `${esc(k)} ${esc(v)}`).join(", ");
    if (th) li(ol, `<b>Thresholds</b>: ${th}. ${Object.entries(chain.conditions).map(([k, v]) => `${k}: ${esc(v)}`).join("; ")}`);
  }
}

function showProgress(p) {
  if (!p) return;
  $("progress").textContent = `${S.reviewer}: ${p.decided} of ${p.total} decided · accepted ${p.accept} · ` +
    `rejected ${p.reject} · skipped ${p.skip}`;
}

function clearRecord(state, message) {
  S.rec = null; S.img = null; S.mask = null;
  for (const id of ["meta", "instruction", "answer", "sentence", "current"]) text(id, "");
  $("current").textContent = message || "";
  $("chain").innerHTML = ""; $("chain-note").textContent = ""; $("report").textContent = "";
  draw();
  document.body.dataset.state = state;
  delete document.body.dataset.position;
}

async function show(rec, progress, upcoming) {
  showProgress(progress);
  if (!rec) {
    clearRecord("done", S.revisit ? "No skipped record left." : "Every record of the sample is decided. " +
      "See the statistics, undo (U), or revisit skipped records.");
    return;
  }
  const [img, mask] = await Promise.all([loadImage(rec.image_url), loadImage(rec.mask_url)]);
  S.rec = rec; S.img = img; S.mask = mask; S.zoom = 1; S.panX = 0; S.panY = 0;
  const facts = [`record ${rec.position + 1} of ${rec.total}`, rec.record_id, rec.lesion_type, rec.polarity,
                 rec.instruction_type.replace("_", " "), rec.certainty, rec.split,
                 rec.mask_area ? `mask ${rec.mask_area} px` : "empty mask"].filter(Boolean);
  text("meta", facts.join(" · "));
  text("instruction", rec.instruction);
  text("answer", rec.answer);
  text("sentence", rec.sentence || (rec.chain.findings.length ? "" : "no finding of this type in the report"));
  $("current").textContent = rec.current ? `Your decision: ${rec.current.decision}` +
    (rec.current.reason ? ` (${S.reasons.find((r) => r[0] === rec.current.reason)?.[1] || rec.current.reason})` : "") : "";
  renderChain(rec.chain);
  draw();
  document.body.dataset.position = String(rec.position);
  await new Promise((r) => requestAnimationFrame(() => r()));
  if (t0 !== null) { window.reviewTimings.push(performance.now() - t0); t0 = null; }
  if (upcoming !== null && upcoming !== undefined) {  // warm the cache for the likely next record
    loadImage(`/api/records/${upcoming}/image.png`).catch(() => {});
    loadImage(`/api/records/${upcoming}/mask.png`).catch(() => {});
  }
}

// ------------------------------------------------------------------ actions

// One action at a time: keys pressed while the next record loads are dropped (never applied
// to a record not yet on screen). data-state is "ready" only when a key press will be taken.
async function run(action) {
  if (S.busy) return;
  S.busy = true; showError("");
  const before = document.body.dataset.state;
  document.body.dataset.state = "busy";
  try { await action(); } catch (e) { t0 = null; showError(e.message); } finally {
    S.busy = false;
    if (document.body.dataset.state !== "done") document.body.dataset.state = S.rec ? "ready" : before;
  }
}

function start() {
  const name = $("reviewer").value.trim();
  if (!$("reviewer").checkValidity() || !name) {
    showError("Type your name: 1-64 letters, digits, spaces or ._@-, starting with a letter or digit.");
    return;
  }
  S.reviewer = name;
  localStorage.setItem("cxrils-reviewer", name);
  $("reviewer").blur();
  run(async () => {
    const res = await api(`/api/next?reviewer=${encodeURIComponent(name)}&skipped=${S.revisit ? 1 : 0}`);
    await show(res.record, res.progress, res.upcoming);
  });
}

function decide(decision, reason) {
  if (!S.rec || S.busy) return;
  t0 = performance.now();
  const rec = S.rec;
  run(async () => {
    const res = await api("/api/decisions", { reviewer: S.reviewer, position: rec.position, record_id: rec.record_id,
      decision, reason: reason || null, request_id: requestId(), revisit: S.revisit });
    await show(res.record, res.progress, res.upcoming);
  });
}

function undo() {
  if (!S.reviewer || S.busy) return;
  t0 = performance.now();
  run(async () => {
    const res = await api("/api/undo", { reviewer: S.reviewer });
    if (!res.undone) { showProgress(res.progress); t0 = null; showError("Nothing to undo."); return; }
    await show(res.record, res.progress, null);
  });
}

function exportAccepted() {
  run(async () => {
    $("current").textContent = "Exporting the accepted records…";
    const res = await api("/api/export", {});
    $("current").textContent = `Exported ${res.records} accepted records of ${res.images} images to ${res.out}` +
      " (cxrils/ and mimic-ils/).";
    document.body.dataset.exported = String(res.records);
  });
}

// ------------------------------------------------------------------ wiring

document.addEventListener("keydown", (ev) => {
  if (ev.target.matches && ev.target.matches("input[type=text]")) return;  // typing a name
  // letters whatever the case (Caps Lock or Shift held): the docs name them A, S, U, M, B
  const k = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
  if ((ev.ctrlKey || ev.metaKey) && !ev.shiftKey && k === "z") { ev.preventDefault(); undo(); return; }  // not redo
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const r = "12345".indexOf(k);
  if (k === "a") decide("accept");
  else if (k === "s") decide("skip");
  else if (k === "u") undo();
  else if (r >= 0 && k.length === 1 && S.reasons[r]) decide("reject", S.reasons[r][0]);
  else if (k === "m") { $("show-mask").checked = !$("show-mask").checked; draw(); }
  else if (k === "b") { $("show-boxes").checked = !$("show-boxes").checked; draw(); }
  else if (k === "[" || k === "]") {
    const o = $("opacity"); o.value = String(Math.min(100, Math.max(0, Number(o.value) + (k === "]" ? 10 : -10))));
    o.dispatchEvent(new Event("input"));
  } else if (k === "+" || k === "=") setZoom(S.zoom * 1.25);
  else if (k === "-") setZoom(S.zoom / 1.25);
  else if (k === "0") setZoom(1);
  else return;
  ev.preventDefault();
});

$("who").addEventListener("submit", (ev) => { ev.preventDefault(); start(); });
$("opacity").addEventListener("input", () => { $("opacity-value").textContent = `${$("opacity").value}%`; draw(); });
$("show-mask").addEventListener("change", draw);
$("show-boxes").addEventListener("change", draw);
$("export").addEventListener("click", exportAccepted);
$("revisit").addEventListener("click", () => {
  S.revisit = !S.revisit;
  $("revisit").setAttribute("aria-pressed", String(S.revisit));
  $("revisit").textContent = S.revisit ? "Back to undecided" : "Revisit skipped";
  if (S.reviewer) start();
});
document.querySelector(".decide").addEventListener("click", (ev) => {
  const b = ev.target.closest("button");
  if (!b) return;
  if (b.dataset.decision === "undo") undo();
  else decide(b.dataset.decision, b.dataset.reason);
});
const wrap = $("view-wrap");
wrap.addEventListener("wheel", (ev) => { ev.preventDefault(); setZoom(S.zoom * (ev.deltaY < 0 ? 1.25 : 0.8)); },
                      { passive: false });
wrap.addEventListener("pointerdown", (ev) => {
  const x0 = ev.clientX - S.panX, y0 = ev.clientY - S.panY;
  const move = (e) => { if (S.zoom > 1) { S.panX = e.clientX - x0; S.panY = e.clientY - y0; place(); } };
  const up = () => { window.removeEventListener("pointermove", move); window.removeEventListener("pointerup", up); };
  window.addEventListener("pointermove", move); window.addEventListener("pointerup", up);
});

(async function init() {
  try {
    const info = await api("/api/info");
    $("dataset").textContent = `${info.dataset} · ${info.total} records sampled`;
    S.reasons = Object.entries(info.reasons);
    $("reasons").innerHTML = S.reasons.map(([key, words], i) =>
      `<button type="button" data-decision="reject" data-reason="${esc(key)}">Reject: ${esc(words)} (${i + 1})</button>`).join("");
  } catch (e) { showError(e.message); return; }
  const saved = localStorage.getItem("cxrils-reviewer");
  if (saved) { $("reviewer").value = saved; start(); } else { $("reviewer").focus(); }
})();
