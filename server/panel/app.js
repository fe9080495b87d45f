// headroom's panel: the machine's memory domains, one model's assessment
// drawn per domain, and the catalog ranked for this machine. Everything
// comes from this server's API; nothing is fetched from elsewhere.
// instances.js, loaded after this file, adds the provider's running models.
"use strict";

const KINDS = ["model", "context", "compute", "auxiliary"];
const page = new URLSearchParams(location.search);
const machine = page.get("machine") || "";
// A server listening beyond loopback wants its token on every API request;
// it prints the panel's address with the token in the fragment, which the
// browser never sends anywhere.
const token = new URLSearchParams(location.hash.slice(1)).get("token") || "";

const el = (id) => document.getElementById(id);

const state = {
  rows: [],          // /api/recommend configurations
  model: "",         // ENTRY/QUANT
  profile: null,     // cache types and flash attention kept from the plan
  inflight: null,    // AbortController of the fit being fetched
  timer: 0,
};

// call sends one request to this server with the token, and turns the
// API's error object into an Error with its message (and the status, so
// that a caller can tell a server without a provider, 501).
async function call(url, init = {}) {
  const headers = { Accept: "application/json", ...init.headers };
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(url, { ...init, headers });
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const err = new Error(body && body.error ? body.error.message : `${res.status} ${res.statusText}`);
    err.status = res.status;
    throw err;
  }
  return body;
}

// api fetches an endpoint of this server with the machine added.
async function api(path, params = {}, signal) {
  const q = new URLSearchParams();
  if (machine) q.set("machine", machine);
  for (const [k, v] of Object.entries(params)) {
    if (v !== "" && v !== undefined && v !== null) q.set(k, String(v));
  }
  return call(`${path}?${q}`, { signal });
}

// post sends a JSON body: the server refuses a POST of any other type, so
// that no form on another site can reach it.
async function post(path, body) {
  return call(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

// bytes says a size in GiB with two decimals, as fit and plan print
// their verdicts: one unit across the page, so figures compare at a glance.
function bytes(n) {
  return `${(n / 2 ** 30).toFixed(2)} GiB`;
}

// inGiB rewrites the MiB figures of an API sentence (an assessment's
// reason, a warning) in the page's unit.
function inGiB(s) {
  return s.replace(/(-?\d+(?:\.\d+)?) MiB\b/g, (_, n) => bytes(Number(n) * 2 ** 20));
}

function node(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "style") Object.assign(e.style, v);
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}

function showError(err) {
  const p = el("error");
  p.textContent = err ? String(err.message || err) : "";
  p.hidden = !err;
}

// available mirrors hw.Domain.Available: the usable share, or less when
// less was free.
function available(d) {
  let n = d.capacity_bytes;
  if (d.usable_bytes > 0 && d.usable_bytes < n) n = d.usable_bytes;
  if (d.free_bytes !== undefined && d.free_bytes < n) n = d.free_bytes;
  return Math.max(n, 0);
}

function renderMachine(snap) {
  el("machine-name").textContent = snap.preset
    ? `preset ${snap.preset}` : `this machine${snap.host ? ` (${snap.host})` : ""}`;
  const largest = Math.max(...snap.domains.map((d) => d.capacity_bytes), 1);
  const box = el("domains");
  box.replaceChildren();
  for (const d of snap.domains) {
    const avail = available(d);
    const views = snap.devices.filter((v) => v.domain === d.id).map((v) => v.name);
    const track = node("div", { class: "track capacity", style: { width: `${(100 * d.capacity_bytes) / largest}%` } },
      node("div", { class: "avail", "data-domain": d.id, "data-bytes": avail, style: { width: `${(100 * avail) / d.capacity_bytes}%` } }));
    const facts = [`${bytes(d.capacity_bytes)} capacity`, `${bytes(avail)} available`];
    if (d.reserved_bytes) facts.push(`${bytes(d.reserved_bytes)} held by the desktop`);
    if (d.bandwidth_gbps) facts.push(`${d.bandwidth_gbps} GB/s`);
    box.append(node("div", { class: "domain" },
      node("div", { class: "label" },
        node("strong", {}, d.id), " ", node("span", { class: "kind" }, d.kind),
        node("span", { class: "desc" }, ` ${d.description || ""}${views.length ? ` · ${views.join(", ")}` : ""}`)),
      track,
      node("div", { class: "facts" }, facts.join(" · "))));
  }
}

function rowID(r) { return `${r.entry}/${r.quant}`; }

function why(r) {
  if (r.verdict === "incompatible") return `incompatible: ${inGiB(r.reason)}`;
  if (r.limiting && r.limiting.shortfall_bytes > 0) return `${r.limiting.domain} short by ${bytes(r.limiting.shortfall_bytes)}`;
  return inGiB(r.reason);
}

function fillSelect(rows, want) {
  const sel = el("model");
  sel.replaceChildren();
  const fit = node("optgroup", { label: "Fit this machine" });
  const no = node("optgroup", { label: "Do not fit (shown to see why)" });
  for (const r of rows) {
    const o = node("option", { value: rowID(r) });
    if (r.enabled) {
      o.textContent = `#${r.rank}  ${r.name} · ${r.quant}`;
      fit.append(o);
    } else {
      o.textContent = `${r.name} · ${r.quant} — ${why(r)}`;
      o.className = "disabled";
      no.append(o);
    }
  }
  // A model the catalog does not list (an hf: reference the server can
  // open) is still selectable when the address names it.
  if (want && !rows.some((r) => rowID(r) === want)) {
    fit.prepend(node("option", { value: want }, want));
  }
  sel.append(fit, no);
  const first = rows.find((r) => r.enabled) || rows[0];
  sel.value = want || (first ? rowID(first) : "");
}

// renderLegend says what the table's figures are: the slots every plan
// runs and how far the speed estimates have been from published results
// they were not fitted on.
function renderLegend(rows) {
  const fit = rows.filter((r) => r.enabled && r.plan);
  if (fit.length) el("rec-slots").textContent = String(fit[0].plan.slots);
  const cal = fit.filter((r) => r.speed && r.speed.calibrated && r.speed.decode_tokens_per_sec != null);
  const parts = ["estimated decode speed of one sequence at an empty context"];
  if (cal.length) {
    const lo = Math.min(...cal.map((r) => r.speed.error_low_pct || 0));
    const hi = Math.max(...cal.map((r) => r.speed.error_high_pct || 0));
    const pct = (x) => `${x >= 0 ? "+" : ""}${x.toFixed(0)}%`;
    parts.push(`calibrated figures were ${pct(lo)}..${pct(hi)} off published llama-bench results they were not fitted on`);
  }
  if (fit.some((r) => r.speed && !r.speed.calibrated)) parts.push("? marks an uncalibrated backend: a rough figure with no error bound");
  el("rec-speed").textContent = parts.join("; ");
}

// fillMachines offers this machine and every preset; choosing one reloads
// the page for it, keeping the selected model.
async function fillMachines() {
  const sel = el("machine-pick");
  const { presets } = await api("/api/presets");
  for (const p of presets) sel.append(node("option", { value: p.name, title: p.summary }, `${p.name} — ${p.summary}`));
  sel.value = machine;
  sel.addEventListener("change", () => {
    const q = new URLSearchParams(window.location.search);
    if (sel.value) q.set("machine", sel.value); else q.delete("machine");
    if (state.model) q.set("model", state.model);
    window.location.search = q.toString();
  });
}

function renderRecommend(rows) {
  const body = el("rec").tBodies[0];
  body.replaceChildren();
  for (const r of rows) {
    const p = r.plan;
    let tps = "–";
    if (r.speed && r.speed.decode_tokens_per_sec != null) {
      tps = r.speed.decode_tokens_per_sec.toFixed(0) + (r.speed.calibrated ? "" : "?");
    }
    const tr = node("tr", { class: r.enabled ? "fits" : "disabled", "data-model": rowID(r), title: inGiB(r.reason) },
      node("td", { class: "num" }, r.enabled ? String(r.rank) : "–"),
      node("td", {}, r.name),
      node("td", {}, r.quant),
      node("td", { class: "num" }, p ? `${p.ctx_per_slot}` : "–"),
      node("td", { class: "num" }, p ? `${p.gpu_layers}/${p.layers_total}` : "–"),
      node("td", { class: "num" }, tps),
      node("td", {}, r.enabled ? "fits" : why(r)));
    tr.addEventListener("click", () => {
      el("model").value = rowID(r);
      selectModel(rowID(r)).catch(showError);
      window.scrollTo({ top: 0, behavior: "smooth" });
    });
    body.append(tr);
  }
}

// The context slider is logarithmic: 256 tokens at the left, the trained
// context at the right, so small and large contexts are both reachable.
function ctxMax() {
  const r = state.rows.find((x) => rowID(x) === state.model);
  return Math.max(r ? r.ctx_trained : 131072, 512);
}
function sliderToCtx(v) {
  const n = 256 * (ctxMax() / 256) ** (v / 1000);
  return Math.max(256, Math.round(n / 256) * 256);
}
function ctxToSlider(n) {
  return Math.round((1000 * Math.log(Math.max(n, 256) / 256)) / Math.log(ctxMax() / 256));
}

function setControls(perSlot, slots, ngl) {
  el("ctx").max = ctxMax();
  el("ctx").value = perSlot;
  el("ctx-range").value = ctxToSlider(perSlot);
  el("slots").value = slots;
  el("ngl").value = ngl === null ? "" : ngl;
}

// selectModel presets the controls from the plan (as headroom plan would
// run it) and draws its assessment.
async function selectModel(id) {
  state.model = id;
  state.profile = null;
  // The slot count is the plan's: the API's default is the CLI's.
  let perSlot = Math.min(4096, ctxMax()), slots = parseInt(el("slots").value, 10) || 2, ngl = null;
  try {
    const p = await api("/api/plan", { model: id });
    if (p.chosen) {
      const c = p.chosen;
      perSlot = c.ctx_per_slot;
      slots = c.profile.parallel;
      ngl = c.gpu_layers;
      state.profile = c.profile;
      // The whole command, model included, as headroom plan prints it,
      // so that what is shown runs when pasted.
      el("flags").replaceChildren("plan: ", p.command
        ? node("code", { id: "command" }, p.command.join(" "))
        : `flags (add -m with the model's file): ${c.flags.join(" ")}`);
    } else {
      el("flags").textContent = inGiB(p.explain.join("; "));
    }
  } catch (err) {
    el("flags").textContent = `no plan: ${err.message}`;
  }
  setControls(perSlot, slots, ngl);
  await refit();
}

function fitParams() {
  const slots = Math.min(Math.max(parseInt(el("slots").value, 10) || 1, 1), 256);
  // Within the trained context, as headroom plan caps it.
  const perSlot = Math.min(Math.max(parseInt(el("ctx").value, 10) || 256, 256), ctxMax());
  const params = { model: state.model, ctx: Math.min(slots * perSlot, 16 << 20), parallel: slots };
  const ngl = el("ngl").value.trim();
  params.ngl = ngl === "" ? "all" : ngl;
  if (state.profile) {
    params.ctk = state.profile.cache_type_k;
    params.ctv = state.profile.cache_type_v;
    params.fa = state.profile.flash_attn;
    // the plan's layer split and MoE expert placement, as it was made
    if (state.profile.tensor_split && state.profile.tensor_split.length) params.ts = state.profile.tensor_split.join(",");
    if (state.profile.cpu_moe_layers) params.ncmoe = state.profile.cpu_moe_layers;
  }
  return params;
}

async function refit() {
  if (state.inflight) state.inflight.abort();
  const ctl = new AbortController();
  state.inflight = ctl;
  const params = fitParams();
  try {
    const a = await api("/api/fit", params, ctl.signal);
    if (ctl.signal.aborted) return;
    const q = new URLSearchParams(params);
    if (machine) q.set("machine", machine);
    el("assessment").dataset.query = q.toString();
    renderAssessment(a);
    showError(null);
  } catch (err) {
    if (err.name !== "AbortError") showError(err);
  }
}

function renderAssessment(a) {
  const v = el("verdict");
  v.className = a.verdict;
  let reason = inGiB(a.reason);
  // On this machine the provider's models may be what is short: say which
  // ones a load would stop, or what keeps it from fitting beside them.
  const room = a.make_room;
  if (room && room.stop.length) {
    v.className = "makes_room";
    reason = inGiB(room.says);
  } else if (room) {
    reason = `${reason}; ${inGiB(room.says)}`;
  }
  v.textContent = a.warnings && a.warnings.length ? `${reason} (warning: ${a.warnings.map(inGiB).join("; ")})` : reason;
  const box = el("assessment");
  box.replaceChildren();
  for (const d of a.domains) {
    const scale = Math.max(d.available, d.required, 1);
    const pct = (n) => `${(100 * n) / scale}%`;
    const track = node("div", { class: "track stack" });
    for (const kind of KINDS) {
      const n = d[kind];
      track.append(node("div", {
        class: "seg", "data-kind": kind, "data-domain": d.id, "data-bytes": n,
        title: `${kind}: ${bytes(n)}`, style: { width: pct(n) },
      }));
    }
    if (d.margin < 0) {
      track.append(node("div", {
        class: "overflow", "data-kind": "overflow", "data-domain": d.id, "data-bytes": -d.margin,
        title: `short by ${bytes(-d.margin)}`, style: { left: pct(d.available), width: pct(-d.margin) },
      }));
    }
    track.append(node("div", { class: "marker", style: { left: pct(d.available) }, title: `available: ${bytes(d.available)}` }));
    const parts = KINDS.filter((k) => d[k] > 0).map((k) => `${k} ${bytes(d[k])}`);
    const margin = d.margin >= 0
      ? node("span", { class: "margin ok" }, `margin ${bytes(d.margin)}`)
      : node("span", { class: "margin short" }, `short by ${bytes(-d.margin)}`);
    box.append(node("div", { class: "domain", "data-domain": d.id },
      node("div", { class: "label" }, node("strong", {}, d.id), " ", node("span", { class: "kind" }, d.kind),
        node("span", { class: "desc" }, ` ${d.views.join(", ")}`)),
      track,
      node("div", { class: "facts" }, `${bytes(d.required)} of ${bytes(d.available)} available`,
        parts.length ? ` (${parts.join(", ")}) · ` : " · ", margin)));
  }
}

function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(() => refit(), 150);
}

function wire() {
  el("model").addEventListener("change", (e) => selectModel(e.target.value).catch(showError));
  el("ctx-range").addEventListener("input", (e) => {
    el("ctx").value = sliderToCtx(Number(e.target.value));
    schedule();
  });
  el("ctx").addEventListener("input", (e) => {
    el("ctx-range").value = ctxToSlider(parseInt(e.target.value, 10) || 256);
    schedule();
  });
  el("slots").addEventListener("input", schedule);
  el("ngl").addEventListener("input", schedule);
}

async function main() {
  wire();
  try {
    const [snap, rec] = await Promise.all([api("/api/hw"), api("/api/recommend"), fillMachines()]);
    state.rows = rec.configurations;
    renderMachine(snap);
    renderRecommend(state.rows);
    renderLegend(state.rows);
    fillSelect(state.rows, page.get("model"));
    if (el("model").value) await selectModel(el("model").value);
  } catch (err) {
    showError(err);
  }
  document.body.dataset.ready = "1";
}

main();
