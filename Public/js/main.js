// The dashboard: one model at a time, three views (fleet, instances, trace
// checker) chosen by the URL's fragment, and one stream feeding all of them.
//
// Routes: #/fleet, #/instances, #/instances?state=<state>&divergent=true, #/instances/<id>, #/trace.

import { editToken, getJSON, onTokenChange, request, storedToken } from "./api.js";
import { FleetView } from "./fleet.js";
import { InstanceDetail } from "./instance.js";
import { InstanceList } from "./list.js";
import { ModelInfo } from "./model.js";
import { Stream } from "./stream.js";
import { TraceView, stepOfRecord } from "./trace.js";

const modelKey = "lifecycled.model";
const views = ["fleet", "instances", "trace"];

const select = document.getElementById("model-select");
const modelTitle = document.getElementById("model-title");
const liveStatus = document.getElementById("live-status");
const pageError = document.getElementById("page-error");

const fleet = new FleetView();
const trace = new TraceView();
const detail = new InstanceDetail({ onDeleted: () => list.refresh() });
const list = new InstanceList();
const stream = new Stream({
  onBatch(records) {
    fleet.changed();
    list.apply(records);
    detail.receive(records);
  },
  onResync(reason) {
    fleet.changed();
    detail.resync();
    if (reason !== "connected") list.refresh();
  },
  onStatus(state, text) {
    liveStatus.dataset.state = state;
    liveStatus.textContent = text;
  },
});

let models = new Map();
let model = null;
let settingModel = null;

async function setModel(name) {
  const info = models.get(name);
  model = info;
  select.value = name;
  modelTitle.textContent = info.definition.title ?? "";
  localStorage.setItem(modelKey, name);
  stream.open(name);
  settingModel = Promise.all([fleet.show(info), list.setModel(info, parseRoute().state ?? ""), detail.setModel(info), trace.setModel(info)]);
  await settingModel;
}

function parseRoute() {
  const hash = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
  const [path, query = ""] = hash.split("?");
  const [view, ...rest] = path.split("/");
  const params = new URLSearchParams(query);
  return {
    view: views.includes(view) ? view : "fleet",
    id: view === "instances" && rest.length ? rest.join("/") : null,
    state: params.get("state"),
    divergent: params.get("divergent") === "true",
  };
}

let routing = Promise.resolve();

async function route({ focus = true } = {}) {
  const { view, id, state, divergent } = parseRoute();
  for (const name of views) document.getElementById(`view-${name}`).hidden = name !== view;
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  // The new view's heading (or the chosen instance's) takes focus, so a screen reader announces it.
  if (focus) document.querySelector(id === null ? `#view-${view} h2` : "#detail-heading")?.focus({ preventScroll: true });
  if (view !== "instances") return;
  // A link with filters (the fleet view's) sets them; the plain #/instances keeps those chosen.
  if (state !== null || divergent) list.filterFromRoute(state, divergent);
  if (id === null) {
    list.select(null);
    detail.clear();
    return;
  }
  if (id === detail.id && detail.instance) return;
  list.select(id);
  const instance = await detail.open(id);
  if (!instance) return;
  if (instance.model !== model.name && models.has(instance.model)) {
    await setModel(instance.model);
    if (parseRoute().id !== id) return;
    if (!(await detail.open(id))) return;
    list.select(id);
  }
  await detail.loadHistory();
}

/**
 * The Token button only where a token is of use: /healthz says whether writes need one
 * (it is open whatever the token), or this tab already has one it may want to change.
 */
async function showTokenButton() {
  let needed = false;
  try {
    const response = await fetch("/healthz", { cache: "no-store", headers: { Accept: "application/json" } });
    needed = (await response.json()).writesNeedToken === true;
  } catch {
    needed = true; // cannot tell: offer it
  }
  document.getElementById("token-button").hidden = !(needed || storedToken());
}

async function start() {
  showTokenButton();
  let items;
  try {
    ({ items } = await getJSON("/v1/models"));
  } catch (error) {
    pageError.textContent = `The dashboard cannot reach the service: ${error.message}. Reload the page to try again.`;
    pageError.hidden = false;
    liveStatus.dataset.state = "offline";
    liveStatus.textContent = "Offline";
    return;
  }
  models = new Map(items.map((definition) => [definition.name, new ModelInfo(definition)]));
  for (const info of models.values()) {
    const option = document.createElement("option");
    option.value = info.name;
    option.textContent = info.name;
    select.append(option);
  }
  const saved = localStorage.getItem(modelKey);
  const first = models.has(saved) ? saved : models.has("ios-app") ? "ios-app" : items[0]?.name;
  if (!first) {
    pageError.textContent = "The service has no models.";
    pageError.hidden = false;
    return;
  }
  await setModel(first);
  await route({ focus: false });
  document.body.dataset.ready = "true";
  performance.mark("lifecycled-ready");
}

select.addEventListener("change", async () => {
  // Instances belong to one model: a model change leaves the one on screen.
  if (parseRoute().id) history.replaceState(null, "", "#/instances");
  await setModel(select.value);
  await route({ focus: false });
});

window.addEventListener("hashchange", () => {
  routing = routing.then(() => route()).catch((error) => {
    pageError.textContent = `Something went wrong: ${error.message}`;
    pageError.hidden = false;
  });
});

document.getElementById("token-button").addEventListener("click", () => editToken());
onTokenChange(() => showTokenButton());

document.getElementById("check-history").addEventListener("click", () => {
  // A gap is no input of the model: what was dropped cannot be checked.
  const steps = detail.records.filter((r) => r.kind !== "gap").map(stepOfRecord);
  location.hash = "#/trace";
  trace.checkSteps(steps);
});

document.getElementById("open-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const id = document.getElementById("open-id").value.trim();
  if (id) location.hash = `#/instances/${encodeURIComponent(id)}`;
});

document.getElementById("create-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const id = form.elements.id.value.trim();
  const status = document.getElementById("list-status");
  try {
    const { data } = await request("/v1/instances", { method: "POST", json: id ? { id, model: model.name } : { model: model.name } });
    form.reset();
    status.textContent = `Created ${data.id}.`;
    list.first();
    location.hash = `#/instances/${encodeURIComponent(data.id)}`;
  } catch (error) {
    status.textContent = `Not created: ${error.message}`;
  }
});

for (const heading of document.querySelectorAll(".view > h2, #detail-heading")) heading.tabIndex = -1;

start();
