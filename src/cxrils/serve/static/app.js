// cxrils page: upload an image, send an instruction, draw the mask over the image.
// Every new request and every error clears the previous result first, so nothing shown
// can belong to another image or instruction.
"use strict";
const $ = (id) => document.getElementById(id);
let file = null, baseImg = null, maskImg = null, maskPng = null, segDcm = null;

function showError(msg) { $("error").textContent = msg || ""; }

// What an HTTP status means, in words a user can act on (the server's detail follows).
const STATUS_WORDS = {
  400: "The file could not be read as a chest X-ray image.",
  413: "The file is too large.",
  422: "The request could not be answered.",
};

function plainError(status, detail) {
  const head = STATUS_WORDS[status] || (status >= 500
    ? "The server failed while answering; try again, and see the server's log if it keeps failing."
    : "The request was refused.");
  if (!detail) return head;
  const sentence = `${detail.charAt(0).toUpperCase()}${detail.slice(1)}`;
  // The server's detail often starts with the same sentence: say it once.
  const stem = head.replace(/\.$/, "").toLowerCase();
  return detail.toLowerCase().startsWith(stem) ? sentence : `${head} ${sentence}`;
}

function clearResult(state) {
  baseImg = null; maskImg = null; maskPng = null; segDcm = null;
  const c = $("view");
  c.getContext("2d").clearRect(0, 0, c.width, c.height);
  $("answer").textContent = state === "running" ? "…" : "—";
  $("answered").textContent = "—";
  $("score").textContent = "—";
  $("area").textContent = "—";
  $("notes").textContent = "";
  $("download").disabled = true;
  $("download-seg").disabled = true;
  $("download-seg").hidden = true;
  $("markers").hidden = true;
  document.body.dataset.state = state;
}

function chooseFile(f) {
  file = f;
  $("drop-text").textContent = f ? `Selected: ${f.name} (${Math.round(f.size / 1024)} kB)` : "No file";
  showError("");
  clearResult("idle");
}

function loadImage(b64) {
  return new Promise((resolve, reject) => {
    const im = new Image();
    im.onload = () => resolve(im);
    im.onerror = () => reject(new Error("The server returned an image the browser cannot show."));
    im.src = "data:image/png;base64," + b64;
  });
}

function draw() {
  const c = $("view"), ctx = c.getContext("2d");
  if (!baseImg) return;
  c.width = baseImg.width; c.height = baseImg.height;
  ctx.globalAlpha = 1; ctx.drawImage(baseImg, 0, 0);
  if (!maskImg) return;
  // Tint the mask: draw it on an offscreen canvas, keep white pixels as red.
  const off = document.createElement("canvas"); off.width = c.width; off.height = c.height;
  const octx = off.getContext("2d"); octx.drawImage(maskImg, 0, 0);
  const d = octx.getImageData(0, 0, off.width, off.height);
  for (let i = 0; i < d.data.length; i += 4) {
    const on = d.data[i] > 127;
    d.data[i] = 255; d.data[i + 1] = 64; d.data[i + 2] = 32; d.data[i + 3] = on ? 255 : 0;
  }
  octx.putImageData(d, 0, 0);
  ctx.globalAlpha = Number($("opacity").value) / 100;
  ctx.drawImage(off, 0, 0);
  ctx.globalAlpha = 1;
}

async function run() {
  showError("");
  const instruction = $("instruction").value.trim();
  if (!file) { clearResult("error"); showError("Choose an image first."); return; }
  if (!instruction) {
    clearResult("error");
    showError("Type an instruction, e.g. 'Segment the pneumonia in the right lung.'");
    return;
  }
  const form = new FormData();
  form.append("image", file);
  form.append("instruction", instruction);
  clearResult("running");
  $("run").disabled = true;
  try {
    let r;
    try {
      r = await fetch("/v1/segment", { method: "POST", body: form });
    } catch (e) {
      throw new Error("The server could not be reached. Is cxrils serve still running?");
    }
    const body = await r.json().catch(() => ({}));
    if (!r.ok) {
      throw new Error(plainError(r.status, typeof body.detail === "string" ? body.detail : ""));
    }
    baseImg = await loadImage(body.image_png);
    maskImg = await loadImage(body.display_mask_png);  // drawn over image_png (display frame)
    maskPng = body.mask_png;  // downloaded: the source's frame, what a viewer overlays on the file
    segDcm = body.dicom_seg || null;
    $("answer").textContent = body.answer + (body.note ? " (" + body.note + ")" : "");
    $("answered").textContent = body.instruction_answered;
    const overruled = body.presence_threshold != null && body.note &&
      (body.presence_score >= body.presence_threshold) !== (body.mask_area > 0);
    $("score").textContent = body.presence_score.toFixed(3) +
      (body.presence_threshold == null ? "" : " (a mask from " + body.presence_threshold.toFixed(3) +
        (overruled ? "; answered otherwise, as the note says" : "") + ")");
    $("area").textContent = body.mask_area;
    $("notes").textContent = (body.notes || []).join(" ");
    $("download").disabled = false;
    $("download-seg").hidden = !segDcm;
    $("download-seg").disabled = !segDcm;
    $("markers").hidden = false;
    draw();
    document.body.dataset.state = "done";
  } catch (e) {
    clearResult("error");
    showError(e.message);
  } finally {
    $("run").disabled = false;
  }
}

function save(href, name) {
  const a = document.createElement("a");
  a.href = href;
  a.download = name;
  a.click();
}

function download() { if (maskPng) save("data:image/png;base64," + maskPng, "mask.png"); }
function downloadSeg() { if (segDcm) save("data:application/dicom;base64," + segDcm, "mask.seg.dcm"); }

async function loadExamples() {
  try {
    const info = await (await fetch("/v1/info")).json();
    if (info.keeps_uploads) {
      $("drop-help").textContent = "The image is sent to this server only; this server keeps a copy of each upload " +
        "(its operator started it with --keep-uploads).";
    }
    const dl = $("examples"), sel = $("lesion-type");
    for (const [type, list] of Object.entries(info.examples)) {
      const o = document.createElement("option"); o.value = type; o.textContent = type; sel.appendChild(o);
      for (const ex of list) { const e = document.createElement("option"); e.value = ex; dl.appendChild(e); }
    }
    sel.addEventListener("change", () => { if (sel.value) $("instruction").value = info.examples[sel.value][0]; });
  } catch (e) { showError("The example instructions could not be loaded from the server."); }
}

const drop = $("drop");
drop.addEventListener("click", () => $("file").click());
drop.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); $("file").click(); } });
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); chooseFile(e.dataTransfer.files[0]); });
$("file").addEventListener("change", (e) => chooseFile(e.target.files[0]));
$("run").addEventListener("click", run);
$("instruction").addEventListener("keydown", (e) => { if (e.key === "Enter") run(); });
$("opacity").addEventListener("input", () => { $("opacity-value").textContent = $("opacity").value + "%"; draw(); });
$("download").addEventListener("click", download);
$("download-seg").addEventListener("click", downloadSeg);
loadExamples();
