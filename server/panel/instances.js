// The provider's running models, and the buttons that drive them. It
// uses app.js's helpers (el, node, bytes, inGiB, call, post, showError,
// refit and its state), which the page loads first.
"use strict";

// A load or an eviction shows within a poll, without flooding the server.
const POLL_MS = 2000;
const EVENTS_SHOWN = 10;

const inst = {
  timer: 0,
  gen: 0,          // the latest refresh: an older answer arriving late is dropped
  listed: false,   // /api/instances answered once
  provider: true,  // false once a load was answered 501
  seen: null,      // what the last answer listed, to notice a change
  errorShown: "",  // the message an action put in #error
};

// refreshInstances lists what runs now. When what is loaded or pinned
// changed, the assessment is fetched again, since on this machine it says
// which of these models a load would stop.
async function refreshInstances() {
  const gen = ++inst.gen;
  let body;
  try {
    body = await call("/api/instances");
  } catch (err) {
    if (gen === inst.gen) el("instances-note").textContent = `cannot list the instances: ${err.message}`;
    return;
  }
  if (gen !== inst.gen) return;
  inst.listed = true;
  // A server without a provider says so; Load is then never offered.
  if (body.provider === false) inst.provider = false;
  el("instances-note").textContent = "";
  renderInstances(body.instances || []);
  renderEvents(body.events || []);
  showLoad();
  const seen = (body.instances || []).map((i) => `${i.id}:${i.model}:${i.state}:${!!i.pinned}`).sort().join(" ");
  if (inst.seen !== null && seen !== inst.seen && state.model && !machine) refit();
  inst.seen = seen;
  el("running").dataset.ready = "1";
}

function stateText(i) {
  let s = i.state;
  const p = i.progress;
  if (i.state === "loading" && p) {
    s += `: ${p.step}${p.detail ? ` (${p.detail})` : ""}`;
    if (p.percent >= 0) s += ` ${Math.round(p.percent)}%`;
  }
  if (i.stale) s += " · settings changed since it started; they apply at its next load";
  return s;
}

// memoryCell says the bytes the instance holds in each domain, carried as
// numbers too, so that what is shown can be checked against the API.
function memoryCell(i) {
  const td = node("td", { class: "memory" });
  const domains = Object.keys(i.memory || {}).sort();
  domains.forEach((d, k) => {
    if (k > 0) td.append(", ");
    td.append(node("span", { "data-domain": d, "data-bytes": i.memory[d] }, `${d} ${bytes(i.memory[d])}`));
  });
  if (!domains.length) td.textContent = "–";
  return td;
}

// action is a button that posts, then lists the instances again.
function action(label, name, run, disabled = false) {
  const b = node("button", { type: "button", "data-action": name, disabled }, label);
  b.addEventListener("click", async () => {
    b.disabled = true;
    b.textContent = `${label}…`;
    try {
      await run();
      if (el("error").textContent === inst.errorShown) showError(null);
    } catch (err) {
      showError(err);
      inst.errorShown = el("error").textContent;
    }
    await refreshInstances();
    poll();
  });
  return b;
}

// Pins and unloads by name are the provider's; an instance /api/load
// started is known by its id only.
function actions(i) {
  const box = node("div", { class: "buttons" });
  if (i.served) {
    const pin = i.pinned ? "unpin" : "pin";
    box.append(action(i.pinned ? "Unpin" : "Pin", pin, () => post(`/api/${pin}`, { model: i.model })),
      // A model still loading or already stopping cannot be unloaded.
      action("Unload", "unload", () => post("/api/unload", { model: i.model }), i.state !== "loaded"));
  } else if (i.id) {
    box.append(action("Unload", "unload", () => post("/api/unload", { id: i.id })));
  }
  return node("td", { class: "actions" }, box);
}

function renderInstances(list) {
  const body = el("instances").tBodies[0];
  body.replaceChildren();
  if (!list.length) {
    body.append(node("tr", { class: "empty" }, node("td", { colSpan: 6 },
      "Nothing is loaded.")));
    return;
  }
  for (const i of list) {
    const name = node("td", {}, i.model);
    if (i.aliases && i.aliases.length) name.append(node("span", { class: "desc" }, ` (also ${i.aliases.join(", ")})`));
    let busy = String(i.in_flight || 0);
    if (i.waiting) busy += ` (+${i.waiting} waiting)`;
    const flags = i.flags && i.flags.length ? `\n${i.flags.join(" ")}` : "";
    body.append(node("tr", { "data-model": i.model, "data-state": i.state, title: `${i.url || ""}${flags}` },
      name,
      node("td", { class: "state" }, stateText(i)),
      memoryCell(i),
      node("td", { class: "num" }, busy),
      node("td", { class: "pinned" }, i.pinned ? "pinned" : ""),
      actions(i)));
  }
}

function renderEvents(events) {
  const body = el("events").tBodies[0];
  body.replaceChildren();
  for (const e of events.slice(-EVENTS_SHOWN).reverse()) {
    const t = new Date(e.time);
    body.append(node("tr", { "data-kind": e.kind },
      node("td", { title: e.time }, isNaN(t) ? e.time : t.toLocaleTimeString()),
      node("td", {}, e.kind),
      node("td", {}, e.model),
      node("td", {}, inGiB(e.reason || ""))));
  }
  el("recent").hidden = !events.length;
}

// showLoad offers Load where the server has a provider (/api/instances
// says so; a load answered 501 says it too). The assessment of a preset is of another
// machine, so Load, which runs here, is offered on this machine's only.
function showLoad() {
  el("load").hidden = !(inst.listed && inst.provider && !machine);
}

async function loadSelected() {
  const b = el("load");
  const name = state.model;
  if (!name) return;
  b.disabled = true;
  b.textContent = "loading…";
  b.title = name;
  // Its progress shows in the list while the request waits for the load.
  const pending = post("/models/load", { model: name });
  refreshInstances();
  try {
    await pending;
    if (el("error").textContent === inst.errorShown) showError(null);
  } catch (err) {
    if (err.status === 501) inst.provider = false;
    showError(err);
    inst.errorShown = el("error").textContent;
  }
  b.disabled = false;
  b.textContent = "Load";
  b.title = "";
  await refreshInstances();
  showLoad();
  poll();
}

// poll lists the instances every POLL_MS while the page is seen.
function poll() {
  clearTimeout(inst.timer);
  if (document.hidden) return;
  inst.timer = setTimeout(async () => {
    await refreshInstances();
    poll();
  }, POLL_MS);
}

el("load").addEventListener("click", loadSelected);
document.addEventListener("visibilitychange", () => {
  if (document.hidden) {
    clearTimeout(inst.timer);
    return;
  }
  refreshInstances().then(poll);
});
refreshInstances().then(poll);
