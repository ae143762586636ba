// The list of instances: one page at a time (GET /v1/instances with a cursor), so
// that tens of thousands of instances cost no more than one page. Records on the
// stream update the rows shown; new instances are counted, not inserted, so the
// list does not jump while someone reads it.

import { request } from "./api.js";
import { el, stateBadge } from "./model.js";

export class InstanceList {
  constructor() {
    this.body = document.querySelector("#instance-list tbody");
    this.status = document.getElementById("list-status");
    this.stateFilter = document.getElementById("filter-state");
    this.limitFilter = document.getElementById("filter-limit");
    this.prev = document.getElementById("page-prev");
    this.next = document.getElementById("page-next");
    this.notice = document.getElementById("list-notice");
    this.noticeText = document.getElementById("list-notice-text");
    this.model = null;
    this.cursors = [null]; // the cursor of each page seen, for Previous
    this.nextCursor = null;
    this.rows = new Map();
    this.selected = null;
    this.created = 0;
    this.generation = 0;

    this.stateFilter.addEventListener("change", () => this.first());
    this.limitFilter.addEventListener("change", () => this.first());
    this.prev.addEventListener("click", () => {
      if (this.cursors.length > 1) {
        this.cursors.pop();
        this.load();
      }
    });
    this.next.addEventListener("click", () => {
      if (this.nextCursor) {
        this.cursors.push(this.nextCursor);
        this.load();
      }
    });
    document.getElementById("list-refresh").addEventListener("click", () => this.first());
    document.getElementById("filter-state").form.addEventListener("submit", (e) => e.preventDefault());
  }

  setModel(model, state = "") {
    this.model = model;
    this.stateFilter.replaceChildren(el("option", { value: "", text: "any state" }),
      ...model.states.map((s) => el("option", { value: s.name, text: s.name })));
    this.stateFilter.value = model.stateByName.has(state) ? state : "";
    return this.first();
  }

  filterState(state) {
    if (this.stateFilter.value === state) return;
    this.stateFilter.value = state;
    this.first();
  }

  first() {
    this.cursors = [null];
    return this.load();
  }

  /** Reloads the page on screen (after a reconnection, records may have been missed). */
  refresh() {
    return this.load();
  }

  async load() {
    const generation = ++this.generation;
    const model = this.model;
    const params = new URLSearchParams({ model: model.name, limit: this.limitFilter.value });
    if (this.stateFilter.value) params.set("state", this.stateFilter.value);
    const cursor = this.cursors[this.cursors.length - 1];
    if (cursor) params.set("cursor", cursor);
    this.status.textContent = "Loading…";
    let page;
    try {
      ({ data: page } = await request(`/v1/instances?${params}`));
    } catch (error) {
      if (generation === this.generation) this.status.textContent = `The list could not be loaded: ${error.message}`;
      return;
    }
    if (generation !== this.generation) return;
    this.created = 0;
    this.notice.hidden = true;
    this.nextCursor = page.nextCursor;
    this.rows = new Map();
    this.body.replaceChildren(...page.items.map((instance) => this.row(instance)));
    this.prev.disabled = this.cursors.length === 1;
    this.next.disabled = !page.nextCursor;
    const first = (this.cursors.length - 1) * Number(this.limitFilter.value);
    const filter = this.stateFilter.value ? ` in ${this.stateFilter.value}` : "";
    this.status.textContent = page.items.length === 0
      ? (this.cursors.length === 1 ? `No instances${filter}.` : "No more instances.")
      : `Instances${filter} ${first + 1}–${first + page.items.length}${page.nextCursor ? ", more on the next page" : ""}.`;
    this.highlight();
  }

  row(instance) {
    const link = el("a", { href: `#/instances/${encodeURIComponent(instance.id)}`, text: instance.id });
    const badgeCell = el("td", {}, stateBadge(this.model, instance.state));
    const version = el("td", { className: "num", text: String(instance.version) });
    const tr = el("tr", { dataset: { id: instance.id } }, el("th", { scope: "row" }, link), badgeCell, version);
    this.rows.set(instance.id, { tr, badgeCell, version });
    return tr;
  }

  select(id) {
    this.selected = id;
    this.highlight();
  }

  highlight() {
    for (const [id, { tr }] of this.rows) {
      const current = id === this.selected;
      tr.classList.toggle("selected", current);
      const link = tr.querySelector("a");
      if (current) link.setAttribute("aria-current", "true");
      else link.removeAttribute("aria-current");
    }
  }

  /** Committed records from the stream, in order. */
  apply(records) {
    for (const record of records) {
      if (record.kind === "created") {
        this.created += 1;
        continue;
      }
      const row = this.rows.get(record.instance);
      if (!row) continue;
      if (record.kind === "deleted") {
        row.tr.classList.add("gone");
        row.badgeCell.replaceChildren(el("span", { className: "badge-state gone", text: "deleted" }));
        continue;
      }
      row.badgeCell.replaceChildren(stateBadge(this.model, record.to));
      row.version.textContent = String(record.version);
      const filtered = this.stateFilter.value;
      row.tr.classList.toggle("moved", !!filtered && record.to !== filtered);
    }
    if (this.created > 0) {
      this.noticeText.textContent = `${this.created.toLocaleString()} new ${this.created === 1 ? "instance" : "instances"} since this page was loaded.`;
      this.notice.hidden = false;
    }
  }
}
