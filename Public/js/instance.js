// One instance: its facts, its graph (current state highlighted, the last
// transition's edge marked), the controls that send it inputs, its timeline of
// records (history, then live from the stream) and a replay that shows the graph
// as it was at any record while new records keep arriving.

import { APIError, request, seg } from "./api.js";
import { Graph } from "./graph.js";
import {
  describeAction, describeInput, deviceTime, divergenceBadge, el, formatTime, outcomeBadge, parameterInput, readParameters,
  reportDetails, stateBadge, timeElement,
} from "./model.js";

const timelineChunk = 300;

/** One term and its value in a facts list. */
const fact = (term, ...value) => el("div", { dataset: { fact: term } }, el("dt", { text: term }), el("dd", {}, ...value));

export class InstanceDetail {
  /** `onDeleted(id)` is called after this page deleted an instance. */
  constructor({ onDeleted, labelLink }) {
    this.onDeleted = onDeleted;
    this.labelLink = labelLink;
    this.graph = new Graph(document.getElementById("instance-graph"), "Instance");
    this.heading = document.getElementById("detail-heading");
    this.empty = document.getElementById("detail-empty");
    this.body = document.getElementById("detail-body");
    this.facts = document.getElementById("detail-facts");
    this.labels = document.getElementById("detail-labels");
    this.replayRecord = document.getElementById("replay-record");
    this.factsCaption = document.getElementById("facts-caption");
    this.graphCaption = document.getElementById("graph-caption");
    this.sendNote = document.getElementById("send-note");
    this.scrolledTo = null; // the state the graph region was last scrolled to
    this.deletedBanner = document.getElementById("detail-deleted");
    this.timeline = document.getElementById("timeline");
    this.moreButton = document.getElementById("timeline-more");
    this.slider = document.getElementById("replay-position");
    this.replayLabel = document.getElementById("replay-label");
    this.replayBanner = document.getElementById("replay-banner");
    this.liveButton = document.getElementById("replay-live");
    this.writeStatus = document.getElementById("write-status");
    this.eventForms = document.getElementById("event-forms");
    this.actionForm = document.getElementById("action-form");
    this.actionName = document.getElementById("action-name");
    this.actionParams = document.getElementById("action-params");

    this.model = null;
    this.id = null;
    this.instance = null;
    this.records = [];
    this.sequences = new Set();
    this.items = new Map(); // sequence -> <li>
    this.shown = 0; // how many of the newest records have an <li>
    this.position = null; // null: live; otherwise how many records are applied
    this.loading = null; // records that arrive while the history loads wait here
    this.generation = 0;
    this.refreshTimer = null;
    this.deleted = false;
    this.deleting = false;

    this.slider.addEventListener("input", () => this.replayTo(Number(this.slider.value)));
    document.getElementById("replay-first").addEventListener("click", () => this.replayTo(0));
    document.getElementById("replay-prev").addEventListener("click", () => this.replayTo(this.at() - 1));
    document.getElementById("replay-next").addEventListener("click", () => this.replayTo(this.at() + 1));
    this.liveButton.addEventListener("click", () => this.follow());
    this.moreButton.addEventListener("click", () => this.showMore());
    this.timeline.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-position]");
      if (button) this.replayTo(Number(button.dataset.position));
    });
    this.actionName.addEventListener("change", () => this.renderActionParameters());
    this.actionForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const action = this.model.actions.find((a) => a.name === this.actionName.value);
      if (!action) return;
      this.send("actions", { action: action.name, ...readParameters(this.actionForm, action.parameters) }, action.name);
    });
    this.eventForms.addEventListener("submit", (event) => {
      event.preventDefault();
      const form = event.target;
      const definition = this.model.events.find((e) => e.name === form.dataset.event);
      this.send("events", { event: definition.name, ...readParameters(form, definition.parameters) }, definition.name);
    });
    document.getElementById("relaunch-button").addEventListener("click", () => this.send("relaunches", undefined, "relaunch"));
    const deleteButton = document.getElementById("delete-button");
    const confirm = document.getElementById("delete-confirm");
    deleteButton.addEventListener("click", () => {
      document.getElementById("delete-question").textContent = `Delete ${this.id} and its history?`;
      confirm.hidden = false;
      deleteButton.hidden = true;
      document.getElementById("delete-no").focus();
    });
    const closeConfirm = () => {
      confirm.hidden = true;
      deleteButton.hidden = false;
    };
    document.getElementById("delete-no").addEventListener("click", () => {
      closeConfirm();
      deleteButton.focus();
    });
    document.getElementById("delete-yes").addEventListener("click", async () => {
      closeConfirm();
      await this.remove();
    });
  }

  async setModel(model) {
    this.model = model;
    this.renderControls();
    this.clear();
    await this.graph.load(model.name);
  }

  clear() {
    this.generation += 1;
    this.id = null;
    this.instance = null;
    this.heading.textContent = "No instance selected";
    this.empty.hidden = false;
    this.body.hidden = true;
  }

  /** Shows instance `id`; resolves to its JSON, or null when there is none. */
  async open(id) {
    const generation = ++this.generation;
    this.id = id;
    this.instance = null;
    this.records = [];
    this.sequences = new Set();
    this.items = new Map();
    this.shown = 0;
    this.position = null;
    this.scrolledTo = null;
    this.deleted = false;
    this.deleting = false;
    this.loading = [];
    this.timeline.replaceChildren();
    this.moreButton.hidden = true;
    this.writeStatus.textContent = "";
    this.deletedBanner.hidden = true;
    this.heading.textContent = `Instance ${id}`;
    this.empty.hidden = true;
    this.body.hidden = false;
    this.facts.replaceChildren(el("div", {}, el("dt", { text: "Loading" }), el("dd", { text: "…" })));
    this.labels.hidden = true;
    let instance;
    try {
      ({ data: instance } = await request(`/v1/instances/${seg(id)}`));
    } catch (error) {
      if (generation !== this.generation) return null;
      this.loading = null;
      this.body.hidden = true;
      this.empty.hidden = false;
      this.empty.textContent = error.status === 404 ? `There is no instance ${id}.` : `Instance ${id} could not be loaded: ${error.message}`;
      return null;
    }
    if (generation !== this.generation) return null;
    this.instance = instance;
    // The version the facts were last read at (those a record does not tell come from there).
    this.facts.dataset.version = instance.version;
    return instance;
  }

  /** Second half of open(), once the page shows the instance's model: its history and graph. */
  async loadHistory() {
    const generation = this.generation;
    const id = this.id;
    this.renderFacts();
    this.renderFates();
    let after = 0;
    let olderDropped = false;
    const records = [];
    try {
      for (;;) {
        const { data } = await request(`/v1/instances/${seg(id)}/history?after=${after}&limit=1000`);
        if (generation !== this.generation) return;
        records.push(...data.items);
        olderDropped ||= data.olderDropped;
        if (data.nextAfter === null || data.nextAfter === undefined) break;
        after = data.nextAfter;
      }
    } catch (error) {
      if (generation !== this.generation) return;
      this.writeStatus.textContent = `The history could not be loaded: ${error.message}`;
    }
    const waiting = this.loading ?? [];
    this.loading = null;
    this.olderDropped = olderDropped;
    this.add(records, { quiet: true });
    this.add(waiting);
    this.render();
  }

  /** Records of this instance from the stream (or a write's answer), in order. */
  receive(records) {
    const mine = records.filter((r) => r.instance === this.id);
    if (!mine.length) return;
    if (this.loading) {
      this.loading.push(...mine);
      return;
    }
    this.add(mine);
    this.render();
  }

  /** After a reconnection or a gap: what the stream may have missed. */
  async resync() {
    if (!this.id || this.loading || !this.instance) return;
    const generation = this.generation;
    const last = this.records.length ? this.records[this.records.length - 1].sequence : 0;
    try {
      const [{ data: page }, { data: instance }] = await Promise.all([
        request(`/v1/instances/${seg(this.id)}/history?after=${last}&limit=1000`),
        request(`/v1/instances/${seg(this.id)}`),
      ]);
      if (generation !== this.generation) return;
      this.instance = instance;
      this.add(page.items);
      this.render();
      if (page.nextAfter !== null) this.loadHistory();
    } catch (error) {
      if (generation === this.generation && error.status === 404) this.markDeleted();
    }
  }

  add(records, { quiet = false } = {}) {
    let grew = false;
    for (const record of records) {
      if (record.kind === "deleted") {
        this.markDeleted();
        continue;
      }
      if (record.kind === "created" || this.sequences.has(record.sequence)) continue;
      this.sequences.add(record.sequence);
      this.records.push(record);
      grew = true;
      if (this.instance && record.version > this.instance.version) {
        this.instance.state = record.to;
        this.instance.version = record.version;
        this.instance.updatedAt = record.time;
      }
    }
    if (grew) {
      this.records.sort((a, b) => a.sequence - b.sequence);
      if (!quiet) this.refreshSoon();
    }
  }

  markDeleted() {
    this.deleted = true;
    clearTimeout(this.refreshTimer);
    this.deletedBanner.hidden = false;
    for (const control of document.querySelectorAll(".controls button, .controls select, .controls input")) control.disabled = true;
  }

  /** The facts other than state and version (breadcrumb, counters…) come from the instance itself. */
  refreshSoon() {
    clearTimeout(this.refreshTimer);
    if (this.deleted || this.deleting) return;
    const generation = this.generation;
    this.refreshTimer = setTimeout(async () => {
      try {
        const { data } = await request(`/v1/instances/${seg(this.id)}`);
        if (generation !== this.generation || !this.instance || data.version < this.instance.version) return;
        this.instance = data;
        this.renderFacts();
        this.renderFates();
        this.facts.dataset.version = data.version;
      } catch (error) {
        if (generation === this.generation && error.status === 404) this.markDeleted();
      }
    }, 250);
  }

  at() {
    return this.position ?? this.records.length;
  }

  replayTo(position) {
    if (!this.records.length && position !== 0) return;
    this.position = Math.max(0, Math.min(this.records.length, position));
    this.render();
  }

  follow() {
    this.position = null;
    this.render();
  }

  /** Everything that follows from the records and the replay position. */
  render() {
    if (!this.instance) return;
    const count = this.records.length;
    const at = this.at();
    const live = this.position === null;
    this.slider.max = String(count);
    this.slider.value = String(at);
    this.slider.setAttribute("aria-valuetext", this.positionText(at));
    this.liveButton.setAttribute("aria-pressed", String(live));
    this.replayLabel.textContent = this.positionText(at) + (live ? " (live)" : "");
    // Announced while someone replays, not on every record that arrives live.
    this.replayLabel.setAttribute("aria-live", live ? "off" : "polite");
    this.replayBanner.hidden = live;
    this.replayBanner.textContent = live ? "" : `Replay: the graph as it was ${this.positionText(at)}. New records keep arriving below; press Live to follow them.`;

    const before = at === 0 ? this.records[0] : null;
    const record = at > 0 ? this.records[at - 1] : null;
    const state = record ? record.to : before ? before.from : this.instance.state;
    const graph = this.graph;
    graph.svg?.classList.toggle("replaying", !live);
    graph.markStates("current", [state]);
    graph.markRows("last", record?.row ? [record.row] : []);
    graph.markStates("previous", record && record.from !== record.to ? [record.from] : []);
    if (graph.svg) graph.svg.dataset.currentState = state;
    // Said in words as well as drawn: in a narrow window the node may be scrolled out of view.
    this.graphCaption.replaceChildren(live ? "Now in " : "Replayed: in ", stateBadge(this.model, state),
      live ? "" : " (live: ", live ? "" : stateBadge(this.model, this.instance.state), live ? "" : ")");
    // A graph wider than its region scrolls: the state shown is brought into view.
    if (this.scrolledTo !== state && graph.reveal(state)) this.scrolledTo = state;
    this.sendNote.hidden = live;
    this.sendNote.replaceChildren("Replaying: what you send acts on the live instance, now in ", stateBadge(this.model, this.instance.state),
      ` at version ${this.instance.version}, not on the state replayed above.`);

    this.renderTimeline();
    for (const [sequence, item] of this.items) {
      const current = !live && record?.sequence === sequence;
      item.classList.toggle("at-position", current);
      if (current) item.setAttribute("aria-current", "step");
      else item.removeAttribute("aria-current");
    }
    this.renderFacts();
    this.renderFates();
  }

  positionText(at) {
    if (!this.records.length) return "at creation (no records yet)";
    if (at === 0) {
      const first = this.records[0];
      return first.version === 1 ? "at creation, before the first record" : `before version ${first.version} (older records were dropped)`;
    }
    const record = this.records[at - 1];
    return `after record ${at} of ${this.records.length} (version ${record.version}, ${describeInput(record)}, ${formatTime(record.time)})`;
  }

  /** Keeps one <li> per shown record, newest first; only the newest `shown` are drawn. */
  renderTimeline() {
    const count = this.records.length;
    if (this.shown === 0) this.shown = Math.min(count, timelineChunk);
    // New records: the number shown grows with them, at the top.
    const wanted = Math.min(count, Math.max(this.shown, timelineChunk));
    const firstShown = count - wanted;
    for (let index = count - 1; index >= firstShown; index -= 1) {
      const record = this.records[index];
      if (this.items.has(record.sequence)) continue;
      const item = this.timelineItem(record, index + 1);
      this.items.set(record.sequence, item);
      // Find the next older item already drawn, to insert before it.
      let older = null;
      for (let j = index - 1; j >= firstShown; j -= 1) {
        older = this.items.get(this.records[j].sequence);
        if (older) break;
      }
      if (older) this.timeline.insertBefore(item, older);
      else this.timeline.append(item);
    }
    this.shown = wanted;
    this.moreButton.hidden = firstShown === 0;
    this.moreButton.textContent = `Show older records (${firstShown.toLocaleString()} more)`;
    if (this.olderDropped) this.moreButton.title = "History retention dropped the oldest records.";
  }

  showMore() {
    this.shown = Math.min(this.records.length, this.shown + timelineChunk);
    const before = this.items.size;
    this.renderTimeline();
    if (this.items.size > before) this.timeline.lastElementChild?.querySelector("button")?.focus();
  }

  timelineItem(record, position) {
    const model = this.model;
    const move = record.from === record.to
      ? el("span", { className: "move" }, "in ", stateBadge(model, record.to))
      : el("span", { className: "move" }, stateBadge(model, record.from), el("span", { "aria-label": "to", text: " → " }), stateBadge(model, record.to));
    const hooks = record.hooks.length
      ? el("ol", { className: "hooks", "aria-label": "hooks in order" }, ...record.hooks.map((h) => el("li", { text: h })))
      : el("span", { className: "muted", text: "no hooks" });
    const details = [];
    if (record.row) details.push(el("span", { className: "chip", text: `row ${record.row}` }));
    if (record.disposition) details.push(el("span", { className: `chip disposition-${record.disposition}`, text: record.disposition }));
    if (record.deliveredAction) details.push(el("span", { className: "chip delivered", text: `delivered ${describeAction(record.deliveredAction)}` }));
    if (record.replacedAction) details.push(el("span", { className: "chip", text: `replaced ${describeAction(record.replacedAction)}` }));
    if (record.clearedAction) details.push(el("span", { className: "chip", text: `cleared ${describeAction(record.clearedAction)}` }));
    if (record.incompleteLaunch) {
      const step = record.incompleteLaunch.step;
      details.push(el("span", { className: "chip incomplete", text: `incomplete launch: stopped at ${step}${record.incompleteLaunch.sceneConnected ? ", scene connected" : ""}` }));
    }
    if (record.windowChanged) details.push(el("span", { className: "chip", text: "window changed" }));
    const kindLabel = record.kind === "relaunch" ? "relaunch" : record.kind;
    const divergent = !!record.divergence;
    // A hole in the history: inputs that never arrived, marked so that what follows is read with care.
    const gapMark = record.kind === "gap"
      ? el("span", { className: "gap-mark", title: "The app's reporter dropped these before it could deliver them: the history has a hole here", text: "⚠ gap" })
      : null;
    return el("li", {
      className: `record kind-${record.kind} outcome-${record.outcome}${divergent ? " divergent" : ""}`,
      dataset: { sequence: record.sequence, version: record.version, divergent: String(divergent) },
    },
      el("div", { className: "record-head" },
        el("span", { className: "version", text: `v${record.version}` }),
        // The server's time orders the records; the device's is shown beside it, never sorted on.
        timeElement(record.time),
        deviceTime(record),
        el("span", { className: "kind", text: kindLabel }),
        gapMark,
        el("strong", { className: "input", text: describeInput(record) }),
        outcomeBadge(record.outcome),
        divergent ? divergenceBadge(record) : null,
        move,
        el("button", { type: "button", className: "quiet small", dataset: { position }, text: "Replay to here", "aria-label": `Replay to version ${record.version}` })),
      el("div", { className: "record-body" }, hooks, ...details),
      reportDetails(model, record));
  }

  /** The facts at the replay position when replaying, the instance's own when live. */
  renderFacts() {
    const i = this.instance;
    if (!i) return;
    if (this.position !== null) {
      this.renderReplayedFacts();
      return;
    }
    const crumb = i.breadcrumb ?? {};
    this.factsCaption.textContent = "Now (live):";
    this.replayRecord.hidden = true;
    this.facts.replaceChildren(
      fact("State", stateBadge(this.model, i.state)),
      fact("Version", String(i.version)),
      fact("Launches", String(i.launchCount)),
      fact("Window", i.window ?? "none"),
      fact("Buffered action", i.bufferedAction ? describeAction(i.bufferedAction) : "none"),
      fact("Launch step", crumb.step ?? "none", crumb.sceneConnected ? " (scene connected)" : ""),
      fact("Unexpected", String(i.counters.unexpected)),
      fact("Ignored", String(i.counters.ignored)),
      fact("Incomplete launches", String(i.counters.incompleteLaunches)),
      // Counted only by servers that count divergences.
      ...(i.counters.divergences === undefined ? [] : [fact("Divergences", String(i.counters.divergences))]),
      // Counted only by servers that record gaps.
      ...(i.counters.dropped === undefined ? [] : [fact("Dropped on the device", String(i.counters.dropped))]),
      fact("Updated", timeElement(i.updatedAt)),
    );
    this.renderLabels();
    this.facts.dataset.state = i.state;
    this.facts.dataset.replay = "false";
  }

  /** Who the instance is (set at creation): each label leads to the list of the instances that share it. */
  renderLabels() {
    const labels = this.instance?.labels;
    // Only servers that keep labels send them.
    this.labels.hidden = labels === undefined;
    if (labels === undefined) return;
    const entries = Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const list = this.labels.querySelector("ul");
    list.replaceChildren(...entries.map(([key, value]) => el("li", { dataset: { key } },
      el("a", { className: "chip label-chip", href: this.labelLink(`${key}=${value}`), title: `List the instances labelled ${key}=${value}` },
        el("span", { className: "label-key", text: key }), "=", el("span", { className: "label-value", text: value })))));
    this.labels.querySelector(".none").hidden = entries.length > 0;
  }

  /**
   * What the records up to the replay position tell: the state and version then, and the
   * counters as they stood (counted from the records, so only when none was dropped).
   * Window, buffered action and launch step are not in the records: shown live only.
   */
  renderReplayedFacts() {
    const at = this.at();
    const applied = this.records.slice(0, at);
    const record = applied[applied.length - 1] ?? null;
    const first = this.records[0];
    const complete = !this.olderDropped && (!first || first.version === 1);
    const state = record ? record.to : first ? first.from : this.instance.state;
    const version = record ? record.version : first ? first.version - 1 : this.instance.version;
    const count = (test) => complete ? String(applied.filter(test).length) : "unknown (older records dropped)";
    this.factsCaption.textContent = `Replayed, ${this.positionText(at)}:`;
    this.facts.replaceChildren(
      fact("State", stateBadge(this.model, state)),
      fact("Version", String(version)),
      fact("Record", record ? describeInput(record) : "none yet", record ? " " : "", record ? outcomeBadge(record.outcome) : ""),
      fact("Recorded", record ? timeElement(record.time) : "–"),
      ...(record?.occurredAt ? [fact("Device time", deviceTime(record))] : []),
      ...(record?.divergence ? [fact("Report", divergenceBadge(record))] : []),
      fact("Launches", complete ? String(1 + applied.filter((r) => r.kind === "relaunch").length) : "unknown (older records dropped)"),
      fact("Unexpected", count((r) => r.outcome === "unexpected")),
      fact("Ignored", count((r) => r.outcome === "ignored")),
      fact("Incomplete launches", count((r) => !!r.incompleteLaunch)),
      ...(this.instance.counters.divergences === undefined ? [] : [fact("Divergences", count((r) => !!r.divergence))]),
      ...(this.instance.counters.dropped === undefined ? [] : [fact("Dropped on the device",
        complete ? String(applied.reduce((n, r) => n + (r.dropped ?? 0), 0)) : "unknown (older records dropped)")]),
    );
    this.facts.dataset.state = state;
    this.facts.dataset.replay = "true";
    // The replayed record's report in full, beside the graph it left.
    const details = record ? reportDetails(this.model, record) : null;
    this.replayRecord.replaceChildren(...(details ? [details] : []));
    this.replayRecord.hidden = !details;
    this.replayRecord.dataset.sequence = record?.sequence ?? "";
  }

  renderControls() {
    const model = this.model;
    this.eventForms.replaceChildren(...model.events.map((event) => {
      const fateId = `fate-${event.name}`;
      return el("form", { className: "event-form", dataset: { event: event.name } },
        el("button", { type: "submit", className: "event-button", dataset: { event: event.name }, "aria-describedby": fateId, text: event.name }),
        el("span", { className: "fate", id: fateId }),
        ...event.parameters.map((p) => parameterInput(p, `event-${event.name}`)));
    }));
    this.actionName.replaceChildren(...model.actions.map((a) => el("option", { value: a.name, text: a.name })));
    this.actionForm.hidden = model.actions.length === 0;
    this.renderActionParameters();
  }

  renderActionParameters() {
    const action = this.model.actions.find((a) => a.name === this.actionName.value);
    this.actionParams.replaceChildren(...(action?.parameters ?? []).map((p) => parameterInput(p, "action")));
  }

  /** Marks each event button with what the event would do in the live state. */
  renderFates() {
    if (!this.instance) return;
    const state = this.instance.state;
    for (const form of this.eventForms.children) {
      const fate = this.model.eventFate(state, form.dataset.event);
      form.dataset.fate = fate;
      const label = form.querySelector(".fate");
      // While replaying, the fates are still the live state's: say so.
      const where = this.position === null ? state : `${state} (live)`;
      label.textContent = fate === "expected" ? "" : fate === "ignored" ? `ignored in ${where}` : `unexpected in ${where}`;
    }
    const controls = document.querySelectorAll(".controls button, .controls select, .controls input");
    for (const control of controls) control.disabled = this.deleted;
  }

  /** Posts an input; its record shows at once (the stream's copy is the same record). */
  async send(path, body, label) {
    const id = this.id;
    this.writeStatus.className = "write-status";
    this.writeStatus.textContent = `Sending ${label}…`;
    try {
      const { status, data } = await request(`/v1/instances/${seg(id)}/${path}`, { method: "POST", json: body, accept: [409] });
      if (id !== this.id) return;
      const record = status === 409 ? data.record : data;
      if (status === 409 && !record) throw new APIError(409, data);
      if (record) this.receive([record]);
      this.writeStatus.className = `write-status ${record?.outcome === "unexpected" ? "warn" : "ok"}`;
      this.writeStatus.textContent = status === 409
        ? `${label}: unexpected in ${record.from}; recorded and counted.`
        : `${label}: ${record.outcome}${record.from !== record.to ? `, ${record.from} → ${record.to}` : ` in ${record.to}`}.`;
    } catch (error) {
      if (id !== this.id) return;
      this.writeStatus.className = "write-status error";
      this.writeStatus.textContent = `${label} refused: ${error.message}`;
    }
  }

  async remove() {
    const id = this.id;
    // No reload of an instance about to be gone.
    clearTimeout(this.refreshTimer);
    this.deleting = true;
    this.writeStatus.className = "write-status";
    this.writeStatus.textContent = `Deleting ${id}…`;
    try {
      await request(`/v1/instances/${seg(id)}`, { method: "DELETE" });
      if (id !== this.id) return;
      this.markDeleted();
      this.writeStatus.className = "write-status ok";
      this.writeStatus.textContent = `${id} deleted.`;
      this.onDeleted(id);
    } catch (error) {
      this.writeStatus.className = "write-status error";
      this.writeStatus.textContent = `Delete refused: ${error.message}`;
    } finally {
      this.deleting = false;
    }
  }
}
