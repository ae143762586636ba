// The dashboard: one model at a time, three views (fleet, instances, trace
// checker) chosen by the URL's fragment, and one stream feeding all of them.
//
// The fragment says everything the page shows (route.js): the view, the model, the list's
// filters and order, the chosen instance; a reload or a shared link shows the same view.

import { editToken, getJSON, onTokenChange, request, storedToken } from "./api.js";
import { FindingsPanel, describeFinding } from "./findings.js";
import { FleetView } from "./fleet.js";
import { InstanceDetail } from "./instance.js";
import { InstanceList } from "./list.js";
import { ModelInfo } from "./model.js";
import { formatRoute, parseRoute } from "./route.js";
import { Stream } from "./stream.js";
import { TraceView, stepOfRecord } from "./trace.js";

const modelKey = "lifecycled.model";

const select = document.getElementById("model-select");
const modelTitle = document.getElementById("model-title");
const liveStatus = document.getElementById("live-status");
const pageError = document.getElementById("page-error");

const fleet = new FleetView();
const findings = new FindingsPanel({
  onShow(finding) {
    fleet.highlight(finding, describeFinding(model, finding));
    const still = matchMedia("(prefers-reduced-motion: reduce)").matches;
    document.getElementById("fleet-graph-panel").scrollIntoView({ block: "start", behavior: still ? "auto" : "smooth" });
  },
});
const trace = new TraceView();
const detail = new InstanceDetail({
  onDeleted: () => list.refresh(),
  labelLink: (label) => formatRoute({ view: "instances", model: model.name, filters: { labels: [label] } }),
});
const list = new InstanceList({
  // Filters changed on the page: the URL says so (replaced, not a new history entry per click).
  onChange() {
    history.replaceState(null, "", formatRoute({ ...parseRoute(), model: model.name, filters: list.filters() }));
    linkViews();
  },
  link: (id) => formatRoute({ view: "instances", id, model: model?.name, filters: list.filters() }),
  describeFinding: (signature) => findings.describe(signature),
});
const stream = new Stream({
  onBatch(records) {
    fleet.changed();
    findings.changed(records);
    list.apply(records);
    detail.receive(records);
  },
  onResync(reason) {
    fleet.changed();
    if (reason !== "connected") findings.reload();
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

async function setModel(name, filters = {}) {
  const info = models.get(name);
  model = info;
  select.value = name;
  modelTitle.textContent = info.definition.title ?? "";
  localStorage.setItem(modelKey, name);
  stream.open(name);
  settingModel = Promise.all([fleet.show(info), findings.setModel(info), list.setModel(info, filters), detail.setModel(info), trace.setModel(info)]);
  await settingModel;
}

/** The views' links keep the model, and the instances' link the list's filters. */
function linkViews() {
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    link.href = formatRoute({ view: link.dataset.view, model: model.name, filters: list.filters() });
  }
  list.relink();
}

/**
 * Brings the chosen instance's details into view when they are out of it (in a phone's
 * width they are below the list): its heading at the top of the window.
 */
function revealDetail() {
  const heading = document.getElementById("detail-heading");
  const box = heading.getBoundingClientRect();
  if (box.top >= 0 && box.bottom <= innerHeight) return;
  const still = matchMedia("(prefers-reduced-motion: reduce)").matches;
  heading.scrollIntoView({ block: "start", behavior: still ? "auto" : "smooth" });
}

let routing = Promise.resolve();

async function route({ focus = true } = {}) {
  const { view, id, model: wanted, filters } = parseRoute();
  // A link naming another model (a shared one) switches to it, with the filters it names.
  if (wanted && wanted !== model.name && models.has(wanted)) await setModel(wanted, filters);
  for (const name of ["fleet", "instances", "trace"]) document.getElementById(`view-${name}`).hidden = name !== view;
  for (const link of document.querySelectorAll("nav a[data-view]")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  // The new view's heading (or the chosen instance's) takes focus, so a screen reader announces it.
  if (focus) document.querySelector(id === null ? `#view-${view} h2` : "#detail-heading")?.focus({ preventScroll: true });
  if (view === "instances") list.setFilters(filters);
  // The address says the model and the list's filters, whichever link led here.
  history.replaceState(null, "", formatRoute({ view, id, model: model.name, filters: list.filters() }));
  linkViews();
  if (view !== "instances") return;
  if (id === null) {
    list.select(null);
    detail.clear();
    return;
  }
  if (id === detail.id && detail.instance) return;
  list.select(id);
  const opening = detail.open(id);
  revealDetail();
  const instance = await opening;
  if (!instance) return;
  if (instance.model !== model.name && models.has(instance.model)) {
    // The instance's model is shown, the list unfiltered (the filters were the other model's).
    history.replaceState(null, "", formatRoute({ view, id, model: instance.model }));
    await setModel(instance.model);
    linkViews();
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
  const { model: linked, filters } = parseRoute();
  const first = models.has(linked) ? linked : models.has(saved) ? saved : models.has("ios-app") ? "ios-app" : items[0]?.name;
  if (!first) {
    pageError.textContent = "The service has no models.";
    pageError.hidden = false;
    return;
  }
  await setModel(first, filters);
  await route({ focus: false });
  document.body.dataset.ready = "true";
  performance.mark("lifecycled-ready");
}

select.addEventListener("change", async () => {
  // Instances belong to one model: a model change leaves the one on screen, and the filters.
  history.replaceState(null, "", formatRoute({ view: parseRoute().view, model: select.value }));
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
  location.hash = formatRoute({ view: "trace", model: model.name });
  trace.checkSteps(steps);
});

document.getElementById("open-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const id = document.getElementById("open-id").value.trim();
  if (id) location.hash = list.link(id);
});

document.getElementById("create-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const id = form.elements.id.value.trim();
  const status = document.getElementById("list-status");
  // Labels, one `key=value` a line (split at the first `=`); the server checks keys and values.
  const lines = form.elements.labels.value.split("\n").map((line) => line.trim()).filter(Boolean);
  const malformed = lines.find((line) => line.indexOf("=") < 1);
  if (malformed !== undefined) {
    status.textContent = `Not created: the label "${malformed}" is not key=value.`;
    return;
  }
  const labels = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]));
  const body = { model: model.name, ...(id ? { id } : {}), ...(lines.length ? { labels } : {}) };
  try {
    const { data } = await request("/v1/instances", { method: "POST", json: body });
    form.reset();
    status.textContent = `Created ${data.id}.`;
    list.first();
    location.hash = list.link(data.id);
  } catch (error) {
    status.textContent = `Not created: ${error.message}`;
  }
});

for (const heading of document.querySelectorAll(".view > h2, #detail-heading")) heading.tabIndex = -1;

start();
