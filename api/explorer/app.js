// The plan explorer: a page over the service's public API (what it does, a scheduler can do).
// No framework and no build step; charts are SVG drawn here. The API token, when the service
// asks for one, stays in this tab's sessionStorage and goes only into Authorization headers.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const SVG = "http://www.w3.org/2000/svg";
const STEP_PARTS = [
  ["compute", "compute", "#4c78a8"], ["recompute", "recompute", "#9ecae9"],
  ["tp_comm", "TP", "#f58518"], ["cp_comm", "CP", "#ffbf79"], ["ep_comm", "EP", "#b279a2"],
  ["pp_comm", "PP", "#e45756"], ["pipeline_bubble", "bubble", "#bab0ac"],
  ["dp_comm", "DP", "#54a24b"], ["zero_comm", "ZeRO", "#88d27a"],
  ["optimizer", "optimizer", "#72b7b2"], ["overhead", "overhead", "#79706e"],
  ["offload", "CPU offload", "#9d7660"],
];
const MEMORY_PARTS = [
  ["weights_gib", "weights", "#4c78a8"], ["gradients_gib", "gradients", "#f58518"],
  ["optimizer_gib", "optimizer", "#54a24b"], ["activations_gib", "activations", "#e45756"],
  ["zero_buffers_gib", "ZeRO buffers", "#72b7b2"], ["reserved_gib", "reserved", "#bab0ac"],
];
const LAUNCH_FORMATS = ["megatron", "torchtitan", "deepspeed", "torchrun", "sbatch", "kubernetes",
                        "hostfile"];
const state = { token: sessionStorage.getItem("planner-token") || "", result: null,
                sort: { key: "rank", dir: 1 }, selected: 0, shown: 0 };

// -- API ---------------------------------------------------------------------------------------

async function api(path, options = {}) {
  const headers = { Accept: "application/json, application/problem+json" };
  if (options.body) headers["Content-Type"] = "application/json";
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const r = await fetch(path, { method: options.method, body: options.body, headers });
  const type = r.headers.get("content-type") || "";
  const body = type.includes("json") && !(options.raw && r.ok) ? await r.json() : await r.text();
  if (!r.ok) {
    if (r.status === 401) showTokenForm();
    const err = new Error((body && body.detail) || `${r.status} ${r.statusText}`);
    err.problem = typeof body === "object" ? body : null;
    throw err;
  }
  return body;
}

function showTokenForm() {
  const form = $("#token-form");
  form.hidden = false;
  $("#token").focus();
}

// -- small DOM helpers -------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

const fmt = (x, digits = 3) => (x === null || x === undefined ? "-" : Number(x).toPrecision(digits));
const pct = (x) => `${(100 * x).toFixed(1)}%`;

function legend(parts) {
  const box = el("div", { class: "legend", "aria-hidden": "true" });
  for (const [, label, color] of parts) {
    const s = el("span", { text: label });
    s.style.setProperty("--c", color);
    box.append(s);
  }
  return box;
}

// -- Ask ---------------------------------------------------------------------------------------

// A restriction field: empty (any), a whole number or a list of them; anything else is
// refused next to its field before any request is sent.
function choice(text, field) {
  const t = text.trim();
  if (!t) return undefined;
  const values = t.split(/[\s,]+/).map(Number);
  if (!values.every(Number.isInteger)) {
    const detail = `"${t}" is not a whole number or a comma-separated list of them`;
    throw Object.assign(new Error(`${field}: ${detail}`),
                        { problem: { errors: [{ field, detail }] } });
  }
  return values.length === 1 ? values[0] : values;
}

function formRequest() {
  const raw = $("#request-json").value.trim();
  if (raw) {
    let doc;
    try { doc = JSON.parse(raw); } catch (e) {
      throw Object.assign(new Error(`the request JSON does not parse: ${e.message}`),
                          { field: "" });
    }
    // A Hugging Face config.json: plan it on the form's cluster and training.
    if (doc && (doc.model_type || doc.architectures)) {
      const req = formRequestFromFields();
      req.model = { hf_config: doc };
      return req;
    }
    return doc;
  }
  return formRequestFromFields();
}

function formRequestFromFields() {
  const num = (id) => { const v = $(id).value.trim(); return v === "" ? undefined : Number(v); };
  const search = { top_k: num("#top_k"), space_sample: 400 };
  for (const k of ["tp", "pp", "dp", "cp", "dp_replicate"]) {
    const v = choice($(`#r-${k}`).value, `search.${k}`);
    if (v !== undefined) search[k] = v;
  }
  if ($("#r-zero").value !== "") search.zero_stage = Number($("#r-zero").value);
  if ($("#r-recompute").value !== "") search.recompute = $("#r-recompute").value;
  const training = { global_batch_size: num("#global_batch_size"), seq_length: num("#seq_length") };
  // How context parallelism runs (training.ring_attention; the hierarchy's group size,
  // training.cp_a2a_size): sent only when chosen, so the service's defaults stand otherwise.
  if ($("#ring_attention").value !== "") training.ring_attention = $("#ring_attention").value;
  if (num("#cp_a2a_size") !== undefined) training.cp_a2a_size = num("#cp_a2a_size");
  // TP communication overlap (training.tp_comm_overlap), likewise only when chosen.
  if ($("#tp_comm_overlap").value !== "") training.tp_comm_overlap = $("#tp_comm_overlap").value;
  const req = {
    model: { preset: $("#model").value },
    cluster: { preset: $("#cluster").value, num_nodes: num("#num_nodes") },
    training,
    search,
  };
  // The stack's speeds (efficiency.compute_scale, network_scale), typed or fitted below.
  const efficiency = {};
  if (num("#compute_scale") !== undefined) efficiency.compute_scale = num("#compute_scale");
  if (num("#network_scale") !== undefined) efficiency.network_scale = num("#network_scale");
  if (Object.keys(efficiency).length) req.efficiency = efficiency;
  return req;
}

// One measured run of an anchor, before and after (AnchoredRun).
const anchoredRun = (r) =>
  `${r.name}: measured ${fmt(r.measured_step_time_s)} s, the model ${fmt(r.predicted_step_time_s)} s ` +
  `(${r.error_pct.toFixed(1)}%), anchored ${fmt(r.anchored_step_time_s)} s ` +
  `(${r.anchored_error_pct.toFixed(1)}%)`;

// The lines of a Megatron-LM log the service reads (planner/calibration/megatron_log.py
// essential): its last arguments block, the padded vocabulary, the iteration lines; a log of
// any length is sent as those.
function megatronEssential(text) {
  const lines = text.split("\n");
  let start = 0;
  lines.forEach((line, i) => { if (/-{8,} arguments -{8,}/.test(line)) start = i; });
  const keep = [];
  let inside = true;
  for (const line of lines.slice(start)) {
    if (inside) {
      keep.push(line);
      inside = !/-{8,} end of arguments -{8,}/.test(line);
    } else if (/> padded vocab \(size: |elapsed time per iteration \(ms\): /.test(line)) {
      keep.push(line);
    }
  }
  return keep.join("\n") + "\n";
}

// The lines of a torchtitan log the service reads (planner/calibration/torchtitan_run.py
// essential): the device mesh and the steps, recognised with their colour codes removed.
const TITAN_MESH = /Building device mesh with parallelism: pp=\d+, dp_replicate=\d+, /;
const TITAN_STEP = /step:\s*\d+\s.*?tps:\s*\d[\d,]*/;
function torchtitanEssential(text) {
  const keep = text.split("\n").filter((line) => {
    const plain = line.replace(/\x1b\[[0-9;]*m/g, "");
    return TITAN_MESH.test(plain) || TITAN_STEP.test(plain);
  });
  return keep.join("\n") + "\n";
}

// Fit the stack's speeds to measured runs (POST /v1/anchors) and fill the two fields.
async function fitAnchor() {
  const out = $("#anchor-result");
  const text = $("#anchor-json").value;
  let body;
  const isLog = !text.trimStart().startsWith("{");
  if (isLog && /-{8,} arguments -{8,}/.test(text)) {
    // Rank 0's Megatron-LM log: the service reads the run from it, on the chosen cluster.
    body = { runs: [{ megatron_log: megatronEssential(text),
                      cluster: { preset: $("#cluster").value } }] };
  } else if (isLog && TITAN_MESH.test(text.replace(/\x1b\[[0-9;]*m/g, ""))) {
    // Rank 0's torchtitan log and the job config it ran: read on the chosen cluster, with the
    // chosen model (the reader refuses one of another shape than a Llama 3 config's flavor).
    const config = $("#anchor-config").value;
    if (!config.trim()) {
      out.textContent = "A torchtitan log needs the job config (TOML) the run started with, " +
        "in the box below it.";
      return;
    }
    body = { runs: [{ torchtitan_config: config, torchtitan_log: torchtitanEssential(text),
                      model: { preset: $("#model").value },
                      cluster: { preset: $("#cluster").value } }] };
  } else {
    try { body = JSON.parse(text); } catch (e) {
      out.textContent = `The runs JSON does not parse: ${e.message}`;
      return;
    }
  }
  $("#anchor-button").disabled = true;
  out.textContent = "Fitting...";
  try {
    const fit = await api("/v1/anchors", { method: "POST", body: JSON.stringify(body) });
    $("#compute_scale").value = fit.compute_scale;
    $("#network_scale").value = fit.network_fitted ? fit.network_scale : "";
    const runs = fit.runs.map((r) => el("li", { text: anchoredRun(r) }));
    out.replaceChildren(
      el("p", { text: `Kernel speed ${fit.compute_scale}` +
        (fit.network_fitted ? `, network speed ${fit.network_scale}` : "") +
        ": filled in above; plans asked now are predicted with them." }),
      el("ul", {}, ...runs),
      ...fit.notes.map((n) => el("p", { text: `Note: ${n}` })));
  } catch (e) {
    out.textContent = `The runs were refused: ${e.message}`;
  } finally {
    $("#anchor-button").disabled = false;
  }
}

function clearErrors() {
  $("#form-error").textContent = "";
  for (const node of document.querySelectorAll(".field-error")) node.remove();
  for (const node of document.querySelectorAll("[aria-invalid]")) {
    node.removeAttribute("aria-invalid");
    node.removeAttribute("aria-describedby");
  }
}

// The form field that best matches a problem's field path: the longest data-field prefix.
function fieldFor(path) {
  let best = null;
  for (const box of document.querySelectorAll("#ask-form .field[data-field]")) {
    const f = box.dataset.field;
    if (f && (path === f || path.startsWith(`${f}.`)) && (!best || f.length > best.dataset.field.length)) {
      best = box;
    }
  }
  return best;
}

function showProblem(err) {
  const usingJson = $("#request-json").value.trim() !== "";
  const items = (err.problem && err.problem.errors) || [];
  let placed = 0;
  items.forEach((item, i) => {
    const box = usingJson ? $("#request-json").closest(".field") : fieldFor(item.field || "");
    if (!box) return;
    const input = box.querySelector("input, select, textarea");
    const id = `err-${i}`;
    box.append(el("p", { class: "field-error", id, text: `${item.field}: ${item.detail}` }));
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", id);
    }
    placed += 1;
  });
  if (usingJson && items.length) $("#json-details").open = true;
  $("#form-error").textContent = placed ? `The request was refused: ${err.message}` : err.message;
}

async function submitPlan(event) {
  event.preventDefault();
  clearErrors();
  let req;
  try { req = formRequest(); } catch (e) { showProblem(e); return; }
  $("#plan-button").disabled = true;
  $("#job-state").textContent = "Searching...";
  try {
    const result = await api("/v1/plans", { method: "POST", body: JSON.stringify(req) });
    $("#job-state").textContent = "";
    history.pushState({}, "", `/plans/${result.id}`);
    showResult(result);
    loadStored();
  } catch (e) {
    $("#job-state").textContent = "";
    showProblem(e);
  } finally {
    $("#plan-button").disabled = false;
  }
}

async function submitJob() {
  clearErrors();
  let req;
  try { req = formRequest(); } catch (e) { showProblem(e); return; }
  const bar = $("#job-progress");
  try {
    let job = await api("/v1/jobs", { method: "POST",
                                       body: JSON.stringify({ kind: "plan", request: req }) });
    bar.hidden = false;
    while (job.state === "queued" || job.state === "running") {
      bar.value = job.progress || 0;
      $("#job-state").textContent = `Job ${job.id}: ${job.state}`;
      await new Promise((r) => setTimeout(r, 500));
      job = await api(`/v1/jobs/${job.id}`);
    }
    bar.hidden = true;
    $("#job-state").textContent = `Job ${job.id}: ${job.state}`;
    if (job.state === "succeeded") {
      history.pushState({}, "", `/plans/${job.result.id}`);
      showResult(job.result);
      loadStored();
    } else if (job.error) {
      $("#form-error").textContent = job.error.detail;
    }
  } catch (e) {
    bar.hidden = true;
    showProblem(e);
  }
}

async function loadFile(event) {
  const file = event.target.files[0];
  if (file) $("#request-json").value = await file.text();
}

// -- Compare -----------------------------------------------------------------------------------

const COLUMNS = [
  ["rank", "#", (p) => p.rank], ["dp", "DP", (p) => p.dp], ["tp", "TP", (p) => p.tp],
  ["pp", "PP", (p) => p.pp], ["cp", "CP", (p) => p.cp], ["ep", "EP", (p) => p.ep],
  ["vpp", "VPP", (p) => p.vpp], ["mbs", "micro-batch", (p) => p.micro_batch_size],
  ["zero", "ZeRO", (p) => p.zero_stage], ["replicas", "replicas", (p) => p.dp_replicate ?? 1],
  ["recompute", "recompute", (p) => p.recompute],
  ["step", "step (s)", (p) => p.step_time_s], ["mfu", "MFU", (p) => p.mfu],
  ["memory", "memory (GiB)", (p) => p.memory_per_gpu_gib],
];

function showResult(result) {
  state.result = result;
  state.selected = 0;
  $("#result").hidden = false;
  const s = result.search || {};
  $("#result-summary").textContent =
    `${s.status} in ${fmt(s.solve_ms, 3)} ms over ${s.space_size} plans ` +
    `(${s.memory_feasible} fit in memory). Result ${result.id}.`;
  const reasons = $("#infeasible");
  reasons.replaceChildren(...(result.infeasible_reasons || []).map((r) => el("li", { text: r })));
  // Training settings outside the searched space under which the best plan is faster.
  $("#settings-hints").replaceChildren(...(result.settings_hints || []).map((h) => el("li", {
    text: `With training ${Object.entries(h.changes).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")}, ` +
      `the best plan (${["dp", "tp", "pp", "cp", "ep", "vpp"].map((k) => `${k}${h.plan[k]}`).join(" ")}) ` +
      `takes ${fmt(h.step_time_s, 4)} s, ${fmt(h.faster_pct, 2)}% faster: ${h.reason}.`,
  })));
  renderTable();
  drawBreakdown(result.plans);
  drawMemory(result.plans);
  drawSpace(result);
  if (result.plans.length) showDetail(0);
  else $("#detail").hidden = true;
}

function renderTable() {
  const plans = state.result.plans.map((p, i) => ({ ...p, rank: i + 1 }));
  const col = COLUMNS.find((c) => c[0] === state.sort.key);
  plans.sort((a, b) => (col[2](a) > col[2](b) ? 1 : col[2](a) < col[2](b) ? -1 : 0) * state.sort.dir);
  const head = el("tr");
  for (const [key, label] of COLUMNS) {
    const th = el("th", { scope: "col" });
    if (key === state.sort.key) th.setAttribute("aria-sort", state.sort.dir > 0 ? "ascending" : "descending");
    th.append(el("button", { type: "button", text: label, onclick: () => {
      state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
      renderTable();
      $(`#plans-table th[aria-sort] button`).focus();
    } }));
    head.append(th);
  }
  head.append(el("th", { scope: "col", text: "details" }));
  $("#plans-table thead").replaceChildren(head);
  const rows = plans.map((p) => {
    const tr = el("tr", p.rank - 1 === state.selected ? { class: "selected" } : {});
    for (const [key, , get] of COLUMNS) {
      const v = get(p);
      const text = key === "mfu" ? pct(v) : typeof v === "number" && !Number.isInteger(v) ? fmt(v) : String(v);
      tr.append(key === "rank" ? el("th", { scope: "row", text }) : el("td", { text }));
    }
    tr.append(el("td", {}, el("button", { type: "button", class: "link",
      text: `Open plan ${p.rank}`, onclick: () => showDetail(p.rank - 1) })));
    return tr;
  });
  $("#plans-table tbody").replaceChildren(...rows);
}

function stackedBars(container, plans, parts, valueOf, unit, capacityOf) {
  const rowH = 26, left = 70, width = 820, chartW = width - left - 90;
  const totals = plans.map((p) => parts.reduce((s, [k]) => s + (valueOf(p, k) || 0), 0));
  const caps = capacityOf ? plans.map(capacityOf) : [];
  const max = Math.max(...totals, ...caps, 1e-12);
  const height = rowH * plans.length + 24;
  const desc = plans.map((p, i) => `plan ${i + 1}: ${fmt(totals[i])} ${unit}`).join("; ");
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
                           "aria-label": desc });
  plans.forEach((p, i) => {
    const y = i * rowH + 4;
    root.append(svg("text", { x: 0, y: y + 15, "font-size": 12 }, `plan ${i + 1}`));
    let x = left;
    for (const [key, label, color] of parts) {
      const v = valueOf(p, key) || 0;
      if (v <= 0) continue;
      const w = (v / max) * chartW;
      const r = svg("rect", { x, y, width: Math.max(w, 0.5), height: rowH - 8, fill: color,
                             "data-part": key });
      r.append(svg("title", {}, `${label}: ${fmt(v)} ${unit}`));
      root.append(r);
      x += w;
    }
    if (capacityOf) {
      const cx = left + (caps[i] / max) * chartW;
      root.append(svg("line", { x1: cx, x2: cx, y1: y - 2, y2: y + rowH - 6, stroke: "#a4161a",
                               "stroke-width": 2, "data-part": "capacity" }));
    }
    root.append(svg("text", { x: x + 6, y: y + 15, "font-size": 12 },
                    `${fmt(totals[i])} ${unit}`));
  });
  container.replaceChildren(legend(parts), root);
}

function drawBreakdown(plans) {
  stackedBars($("#breakdown-chart"), plans, STEP_PARTS, (p, k) => p.breakdown[k], "s");
}

function drawMemory(plans) {
  stackedBars($("#memory-chart"), plans, MEMORY_PARTS, (p, k) => p.memory[k], "GiB",
              (p) => p.memory_capacity_gib);
  $("#memory-chart").append(el("p", { class: "note",
    text: "The red mark is each GPU's memory capacity; bars are the most loaded stage." }));
}

function drawSpace(result) {
  const box = $("#space-chart");
  const points = result.space_sample || [];
  if (!points.length) {
    box.replaceChildren(el("p", { text: "No sample of the searched space in this result " +
      "(ask with search.space_sample, as this page does)." }));
    return;
  }
  const chosen = result.plans.map((p) => ({ x: p.memory_per_gpu_gib, y: p.step_time_s }));
  const xs = points.map((p) => p.memory_gib).concat(chosen.map((c) => c.x));
  const ys = points.map((p) => p.step_time_s).concat(chosen.map((c) => c.y));
  const cap = result.plans.length ? result.plans[0].memory_capacity_gib : Math.max(...xs);
  const width = 820, height = 360, left = 60, bottom = 40, top = 10, right = 20;
  const x0 = 0, x1 = Math.max(...xs, cap) * 1.05;
  const y0 = Math.min(...ys) * 0.95, y1 = Math.max(...ys) * 1.05;
  const X = (v) => left + ((v - x0) / (x1 - x0)) * (width - left - right);
  const Y = (v) => height - bottom - ((v - y0) / (y1 - y0)) * (height - bottom - top);
  const front = points.filter((p) => p.frontier).sort((a, b) => a.memory_gib - b.memory_gib);
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${points.length} plans of ${result.search.space_size} searched, ` +
                  `${front.length} on the step-time/memory frontier; the chosen plans marked` });
  root.append(svg("line", { x1: X(cap), x2: X(cap), y1: top, y2: height - bottom,
                            stroke: "#a4161a", "stroke-dasharray": "4 3" }));
  root.append(svg("text", { x: X(cap) - 4, y: top + 12, "font-size": 11, "text-anchor": "end" },
                  "GPU memory"));
  for (const p of points) {
    const c = svg("circle", { cx: X(p.memory_gib), cy: Y(p.step_time_s), r: 2.5,
      fill: p.fits ? "#4c78a8" : "none", stroke: p.fits ? "none" : "#e45756",
      class: p.frontier ? "point frontier" : "point" });
    c.append(svg("title", {}, `${fmt(p.step_time_s)} s, ${fmt(p.memory_gib)} GiB` +
                              `${p.fits ? "" : " (does not fit)"}`));
    root.append(c);
  }
  if (front.length > 1) {
    root.append(svg("polyline", { fill: "none", stroke: "#54a24b", "stroke-width": 1.5,
      points: front.map((p) => `${X(p.memory_gib)},${Y(p.step_time_s)}`).join(" ") }));
  }
  chosen.forEach((c, i) => {
    const g = svg("g", { class: "chosen" });
    g.append(svg("circle", { cx: X(c.x), cy: Y(c.y), r: 7, fill: "#f58518", stroke: "#1b1f24" }),
             svg("text", { x: X(c.x) + 9, y: Y(c.y) - 6, "font-size": 11 }, `${i + 1}`),
             svg("title", {}, `plan ${i + 1}: ${fmt(c.y)} s, ${fmt(c.x)} GiB`));
    root.append(g);
  });
  root.append(svg("text", { x: left, y: height - 8, "font-size": 11 }, "memory per GPU (GiB)"),
              svg("text", { x: width - right, y: height - 8, "font-size": 11, "text-anchor": "end" },
                  `${fmt(x1, 3)} GiB`),
              svg("text", { x: 4, y: top + 10, "font-size": 11 }, `${fmt(y1)} s`),
              svg("text", { x: 4, y: height - bottom, "font-size": 11 }, `${fmt(y0)} s`));
  box.replaceChildren(legend([["", "fits", "#4c78a8"], ["", "does not fit", "#e45756"],
    ["", "frontier", "#54a24b"], ["", "chosen plans", "#f58518"]]), root);
}

// -- One plan ----------------------------------------------------------------------------------

// A cluster of pools: "0-3 on pool 1 (a100-80gb), 4-5 on pool 0 (h100-sxm)".
function stageRuns(stages) {
  const runs = [];
  for (const s of stages) {
    const last = runs[runs.length - 1];
    if (last && last.pool === s.pool) last.to = s.stage;
    else runs.push({ from: s.stage, to: s.stage, pool: s.pool, gpu: s.gpu, layers: [] });
    runs[runs.length - 1].layers.push(s.layers);
  }
  return runs.map((r) => `${r.from === r.to ? r.from : `${r.from}-${r.to}`} on pool ` +
                  `${r.pool} (${r.gpu}, layers ${r.layers.join(", ")})`).join("; ");
}

async function showDetail(index) {
  state.selected = index;
  renderTable();
  const result = state.result, p = result.plans[index];
  $("#detail").hidden = false;
  $("#detail-title").textContent = `Plan ${index + 1}: dp${p.dp} tp${p.tp} pp${p.pp} cp${p.cp}` +
    `${p.ep > 1 ? ` ep${p.ep}` : ""}${p.vpp > 1 ? ` vpp${p.vpp}` : ""}, micro-batch ` +
    `${p.micro_batch_size}, ZeRO-${p.zero_stage}` +
    `${p.dp_replicate > 1 ? ` over ${p.dp_replicate} replicas` : ""}, recompute ${p.recompute}`;
  const why = [`${fmt(p.step_time_s)} s per step, MFU ${pct(p.mfu)}, ` +
               `${fmt(p.memory_per_gpu_gib)} of ${fmt(p.memory_capacity_gib)} GiB per GPU`];
  if (index === 0 && result.plans.length > 1) {
    const gap = result.plans[1].step_time_s / p.step_time_s - 1;
    why.push(`the runner-up is ${(100 * gap).toFixed(gap < 0.01 ? 2 : 1)}% slower`);
  }
  // The model's track record on the class (PlanEstimate.step_time_band).
  const band = p.step_time_band;
  // An anchored request (efficiency.compute_scale fitted to a measured run) has its own band.
  const kind = band && band.model_class === "anchored"
    ? "runs predicted from another run of their stack on their GPU"
    : band && `${band.model_class.replaceAll("_", "-").replace("moe", "MoE")} runs` +
      (band.gpu ? ` on ${band.gpu.toUpperCase()}` : "");
  if (band) why.push(`8 in 10 of the ${band.runs} held-out published ${kind} ` +
                     `(${band.sources} sources, each weighing the same) ` +
                     `would have measured ${fmt(band.low_s)} to ${fmt(band.high_s)} s` +
                     (band.anchor ? ` (speeds from anchor ${band.anchor})` : ""));
  if (p.stages) why.push(`stages ${stageRuns(p.stages)}`);
  const headroom = 1 - p.memory_per_gpu_gib / p.memory_capacity_gib;
  if (headroom < 0.1) why.push("memory is the binding constraint (under 10% headroom)");
  $("#detail-why").textContent = why.join("; ") + ".";
  // Where published runs do not back the prediction (PlanEstimate.caveats), verbatim.
  $("#detail-caveats").replaceChildren(...(p.caveats || []).map((c) => el("li", { text: `Caveat: ${c}` })));
  $("#timeline").replaceChildren(el("p", { text: "Loading the predicted timeline..." }));
  $("#launch").replaceChildren();
  // Another plan opened while these requests run makes their answers stale: drop them.
  const shown = ++state.shown;
  const current = () => shown === state.shown;
  try {
    const trace = await api(`/v1/plans/${result.id}/trace?rank=${index + 1}`);
    if (current()) drawTimeline(trace);
  } catch (e) {
    if (current()) $("#timeline").replaceChildren(el("p", { class: "error", text: e.message }));
  }
  if (current()) showLaunch(result.id, index, current);
}

function laneColor(name) {
  if (name.startsWith("forward")) return "#4c78a8";
  if (name.startsWith("backward")) return "#f58518";
  if (name.startsWith("recompute")) return "#9ecae9";
  if (name.includes("send") || name.includes("recv")) return "#e45756";
  if (name.includes("optimizer")) return "#72b7b2";
  return "#54a24b";
}

function drawTimeline(trace) {
  const events = trace.traceEvents || [];
  const names = {};
  for (const e of events) {
    if (e.ph === "M" && e.name === "process_name") names[`${e.pid}`] = e.args.name;
    if (e.ph === "M" && e.name === "thread_name") names[`${e.pid}/${e.tid}`] = e.args.name;
  }
  const spans = events.filter((e) => e.ph === "X");
  const lanes = [...new Set(spans.map((e) => `${e.pid}/${e.tid}`))].sort((a, b) => {
    const [pa, ta] = a.split("/").map(Number), [pb, tb] = b.split("/").map(Number);
    return pa - pb || ta - tb;
  });
  const end = Math.max(...spans.map((e) => e.ts + e.dur), 1);
  const laneH = 18, left = 240, width = 1150, chartW = width - left - 10;
  const height = lanes.length * laneH + 30;
  const stages = new Set(spans.map((e) => e.pid)).size;
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `Predicted step of ${(end / 1e6).toPrecision(3)} s: ${stages} pipeline ` +
                  `stage(s), ${spans.length} operations on compute and communication lanes` });
  lanes.forEach((lane, i) => {
    const [pid] = lane.split("/");
    root.append(svg("text", { x: 0, y: i * laneH + 13, "font-size": 11 },
                    `${names[pid] || `stage ${pid}`}: ${names[lane] || lane}`));
  });
  const index = Object.fromEntries(lanes.map((l, i) => [l, i]));
  for (const e of spans) {
    const i = index[`${e.pid}/${e.tid}`];
    const r = svg("rect", { x: left + (e.ts / end) * chartW, y: i * laneH + 2,
                           width: Math.max((e.dur / end) * chartW, 0.4), height: laneH - 4,
                           fill: laneColor(e.name), class: "span" });
    r.append(svg("title", {}, `${e.name}: ${(e.dur / 1e3).toFixed(2)} ms at ${(e.ts / 1e3).toFixed(2)} ms`));
    root.append(r);
  }
  const axisY = lanes.length * laneH + 20;
  for (let k = 0; k <= 4; k++) {
    root.append(svg("text", { x: left + (k / 4) * chartW - (k === 4 ? 40 : 0), y: axisY,
                             "font-size": 11 }, `${((k / 4) * end / 1e6).toPrecision(3)} s`));
  }
  $("#timeline").replaceChildren(legend([["", "forward", "#4c78a8"], ["", "backward", "#f58518"],
    ["", "recompute", "#9ecae9"], ["", "send/recv", "#e45756"], ["", "collectives", "#54a24b"],
    ["", "optimizer", "#72b7b2"]]), root);
}

async function showLaunch(planId, index, current) {
  const box = $("#launch");
  for (const f of LAUNCH_FORMATS) {
    let text;
    try {
      text = await api(`/v1/plans/${planId}/launch/${f}?rank=${index + 1}`, { raw: true });
      if (!current()) return;
    } catch (e) {
      if (!current()) return;
      box.append(el("details", {}, el("summary", { text: `${f}: not available` }),
                    el("p", { text: e.message })));
      continue;
    }
    const id = `launch-${f}`;
    const copy = el("button", { type: "button", text: `Copy ${f}`, onclick: async () => {
      try { await navigator.clipboard.writeText(text); copy.textContent = "Copied"; }
      catch { copy.textContent = "Copy failed: select the text"; }
    } });
    box.append(el("details", {}, el("summary", { text: f }), copy,
                  el("pre", { id, tabindex: "0", "aria-label": `${f} launch artifact`, text })));
  }
}

// -- Validation --------------------------------------------------------------------------------

const CHECK_PARTS = ["compute", "tp_comm", "cp_comm", "pp_comm", "dp_comm", "pipeline_bubble",
                     "communication", "step_time_s"];

async function showValidation(id) {
  $("#validation").hidden = false;
  const body = await api(`/v1/validations/${id}`);
  $("#validation-summary").textContent = `Validation ${id}: ${body.state}` +
    (body.result && body.result.kendall_tau !== null && body.result.kendall_tau !== undefined
      ? `; Kendall tau between predicted and measured order ${fmt(body.result.kendall_tau, 2)}` +
        `; measured order ${body.result.reranked.map((i) => i + 1).join(", ")}` : "");
  if (!body.result) {
    if (body.state === "queued" || body.state === "running") setTimeout(() => showValidation(id), 1000);
    return;
  }
  const box = $("#validation-chart");
  box.replaceChildren();
  body.result.plans.forEach((p, i) => {
    if (!p.measured) { box.append(el("p", { text: `plan ${i + 1}: ${p.note || "not measured"}` })); return; }
    const parts = CHECK_PARTS.filter((k) => k in p.measured.breakdown);
    const max = Math.max(...parts.map((k) => Math.max(p.predicted.breakdown[k] || 0, p.measured.breakdown[k] || 0)), 1e-12);
    const rowH = 30, left = 120, width = 700, chartW = width - left - 120;
    const root = svg("svg", { width, height: rowH * parts.length + 10, role: "img",
      "aria-label": `plan ${i + 1}: predicted ${fmt(p.predicted.step_time_s)} s, measured ${fmt(p.measured.step_time_s)} s per step` });
    parts.forEach((k, j) => {
      const y = j * rowH + 4, pv = p.predicted.breakdown[k] || 0, mv = p.measured.breakdown[k] || 0;
      root.append(svg("text", { x: 0, y: y + 15, "font-size": 12 }, k));
      const a = svg("rect", { x: left, y, width: (pv / max) * chartW, height: 11, fill: "#4c78a8", class: "predicted" });
      a.append(svg("title", {}, `${k} predicted ${fmt(pv)} s`));
      const b = svg("rect", { x: left, y: y + 12, width: (mv / max) * chartW, height: 11, fill: "#f58518", class: "measured" });
      b.append(svg("title", {}, `${k} measured ${fmt(mv)} s`));
      root.append(a, b, svg("text", { x: left + chartW + 6, y: y + 15, "font-size": 11 },
                             `${fmt(pv)} / ${fmt(mv)} s`));
    });
    box.append(el("h3", { text: `Plan ${i + 1}: dp${p.plan.dp} tp${p.plan.tp} pp${p.plan.pp}` }),
               legend([["", "predicted", "#4c78a8"], ["", "measured", "#f58518"]]), root);
  });
}

// -- Stored ------------------------------------------------------------------------------------

async function loadStored() {
  const list = (id, items) => $(id).replaceChildren(...(items.length ? items : [el("li", { text: "none yet" })]));
  try {
    const [plans, jobs, clusters] = await Promise.all([
      api("/v1/plans?limit=20"), api("/v1/jobs?limit=100"), api("/v1/clusters?limit=20")]);
    list("#stored-plans", plans.data.map((p) => el("li", {},
      el("a", { href: `/plans/${p.id}`, text: `${p.model} on ${p.cluster}` }),
      ` ${p.status}${p.best ? `, best dp${p.best.dp} tp${p.best.tp} pp${p.best.pp}, ` +
        `${fmt(p.best.step_time_s)} s, MFU ${pct(p.best.mfu)}` : ""} (${p.created_at.slice(0, 19)})`)));
    list("#stored-validations", jobs.data.filter((j) => j.kind === "validation").map((j) =>
      el("li", {}, el("a", { href: `/validations/${j.id}`, text: j.id }),
         ` ${j.state} (${j.created_at.slice(0, 19)})`)));
    const items = await Promise.all(clusters.data.map(async (c) => {
      const cals = await api(`/v1/clusters/${c.id}/calibrations?limit=10`);
      const sub = el("ul", {}, ...cals.data.map((cal) => el("li", {},
        el("a", { href: `/calibrations/${cal.id}`, text: cal.id }),
        ` ${cal.source}${cal.stack ? ` (${cal.stack})` : ""}`)));
      return el("li", { text: `${c.name} (${c.id}, ${c.spec.num_nodes} x ${c.spec.gpus_per_node} ` +
                               `${c.spec.gpu.name})` }, sub);
    }));
    list("#stored-clusters", items);
  } catch (e) {
    $("#stored-plans").replaceChildren(el("li", { class: "error", text: e.message }));
  }
}

async function showCalibration(id) {
  $("#calibration").hidden = false;
  const cal = await api(`/v1/calibrations/${id}`);
  if (cal.source === "anchor") {
    // An anchor: the stack's speeds and its measured runs, before and after (no fits to draw).
    // An anchor of a named stack serves the requests naming it (cluster.stack).
    const who = cal.stack ? `that name the stack "${cal.stack}"` : "that name no stack";
    $("#calibration-summary").textContent = `Anchor ${id}: kernel speed ${cal.compute_scale}` +
      (cal.network_scale ? `, network speed ${cal.network_scale}` : "") +
      `, taken by plans and estimates on this cluster ${who} and set neither.`;
    $("#calibration-plot").replaceChildren(
      el("ul", {}, ...cal.runs.map((r) => el("li", { text: anchoredRun(r) }))));
    return;
  }
  const fits = (cal.fits || []).map((f) => `${f.op} (${f.tier}, ${f.group_size} ranks): ` +
    `R^2 ${fmt(f.r2, 2)}`).join("; ");
  $("#calibration-summary").textContent = `Calibration ${id} from ${cal.source}` +
    `${cal.backend ? ` (${cal.backend})` : ""}. ${fits}`;
  // The service draws the plot; fetched with the token, shown from memory.
  const text = await api(`/v1/calibrations/${id}/plot`, { raw: true });
  const url = URL.createObjectURL(new Blob([text], { type: "image/svg+xml" }));
  $("#calibration-plot").replaceChildren(el("img", { src: url, class: "plot",
    alt: `Measured points and fitted lines of calibration ${id}: ${fits}` }));
}

async function loadPresets() {
  const [models, clusters] = await Promise.all([api("/v1/presets/models"), api("/v1/presets/clusters")]);
  $("#model").replaceChildren(...models.data.map((m) => el("option", { value: m.preset, text: m.preset })));
  $("#cluster").replaceChildren(...clusters.data.map((c) => el("option", { value: c.preset, text: c.preset })));
  if (models.data.some((m) => m.preset === "llama3-8b")) $("#model").value = "llama3-8b";
  if (clusters.data.some((c) => c.preset === "dgx-h100")) $("#cluster").value = "dgx-h100";
}

async function route() {
  const m = location.pathname.match(/^\/(plans|validations|calibrations)\/([^/]+)$/);
  if (!m) return;
  const id = encodeURIComponent(m[2]);
  try {
    if (m[1] === "plans") showResult(await api(`/v1/plans/${id}`));
    else if (m[1] === "validations") await showValidation(id);
    else await showCalibration(id);
  } catch (e) {
    $("#form-error").textContent = e.message;
  }
}

async function start() {
  $("#ask-form").addEventListener("submit", submitPlan);
  $("#job-button").addEventListener("click", submitJob);
  $("#request-file").addEventListener("change", loadFile);
  $("#anchor-button").addEventListener("click", fitAnchor);
  $("#token-button").addEventListener("click", showTokenForm);
  $("#token").value = state.token;
  $("#token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("#token").value;
    sessionStorage.setItem("planner-token", state.token);
    $("#token-form").hidden = true;
    loadPresets().then(loadStored).then(route).catch((err) => { $("#form-error").textContent = err.message; });
  });
  window.addEventListener("popstate", route);
  try {
    await loadPresets();
  } catch (e) {
    $("#form-error").textContent = e.message;
  }
  await Promise.all([loadStored(), route()]);
  document.body.dataset.ready = "true";
}

start();
