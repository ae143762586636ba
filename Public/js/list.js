// The list of instances: one page at a time (GET /v1/instances with a cursor), so
// that tens of thousands of instances cost no more than one page. Records on the
// stream update the rows shown; new instances are counted, not inserted, so the
// list does not jump while someone reads it.
//
// The filters for counted problems (hasUnexpected, hasIncompleteLaunch,
// hasDivergence), labels and findings are the server's: they search every instance, so the broken ones are one page however
// large the fleet. The filters and the order live in the page's URL (route.js): `onChange` tells
// the page when someone changed them here. Sorting is the page's own, of the rows on screen: a page in
// another order would need a cursor over counters that change with every record,
// and the filters already bring the broken instances together.

import { request } from "./api.js";
import { el, stateBadge } from "./model.js";
import { normalizeFilters, sameFilters } from "./route.js";

/** The counters the list shows, in its column order. */
const counted = new Set(["unexpected", "incompleteLaunches", "divergences"]);

export class InstanceList {
  /**
   * `onChange()` is called when someone changes the filters or the order on the page;
   * `link(id)` is the address of an instance with the list as it is; `describeFinding(signature)`
   * resolves to a finding's description in words (or null).
   */
  constructor({ onChange, link, describeFinding }) {
    this.onChange = onChange;
    this.link = link;
    this.describeFinding = describeFinding;
    this.labelInput = document.getElementById("filter-label-input");
    this.labelList = document.getElementById("filter-labels");
    this.labelStatus = document.getElementById("filter-label-status");
    this.findingNotice = document.getElementById("filter-finding");
    this.findingText = document.getElementById("filter-finding-text");
    this.labels = [];
    this.finding = "";
    this.body = document.querySelector("#instance-list tbody");
    this.status = document.getElementById("list-status");
    this.stateFilter = document.getElementById("filter-state");
    this.limitFilter = document.getElementById("filter-limit");
    this.unexpectedFilter = document.getElementById("filter-unexpected");
    this.incompleteFilter = document.getElementById("filter-incomplete");
    this.divergentFilter = document.getElementById("filter-divergent");
    this.headings = [...document.querySelectorAll("#instance-list thead th[data-sort]")];
    this.divergenceHeading = this.headings.find((th) => th.dataset.sort === "divergences");
    this.sortKey = "id";
    this.sortDescending = false;
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

    for (const control of [this.stateFilter, this.limitFilter, this.unexpectedFilter, this.incompleteFilter, this.divergentFilter]) {
      control.addEventListener("change", () => this.changed());
    }
    document.getElementById("filter-label-add").addEventListener("click", () => this.addLabel());
    this.labelList.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-label]");
      if (!button) return;
      this.labels = this.labels.filter((label) => label !== button.dataset.label);
      this.renderLabels();
      this.changed();
      this.labelInput.focus();
    });
    document.getElementById("filter-finding-clear").addEventListener("click", () => {
      this.finding = "";
      this.renderFinding();
      this.changed();
    });
    for (const th of this.headings) {
      th.querySelector("button").addEventListener("click", () => {
        const key = th.dataset.sort;
        // Counts start with the largest (the worst first); names and versions ascending.
        this.sortDescending = key === this.sortKey ? !this.sortDescending : counted.has(key);
        this.sortKey = key;
        this.sort();
        this.onChange();
      });
    }
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
    // Enter in the label field adds the label (the form has nothing else to submit).
    document.getElementById("filter-state").form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (document.activeElement === this.labelInput) this.addLabel();
    });
  }

  /** A filter or the order changed on the page: a new first page, and the URL follows. */
  changed() {
    this.first();
    this.onChange();
  }

  /** Adds the label typed (`key=value`) to the filters, unless it is malformed. */
  addLabel() {
    const text = this.labelInput.value.trim();
    const at = text.indexOf("=");
    if (at < 1 || at === text.length - 1) {
      this.labelStatus.textContent = "A label filter is key=value, for example run=nightly-42.";
      return;
    }
    this.labelStatus.textContent = "";
    this.labelInput.value = "";
    if (this.labels.includes(text)) return;
    this.labels.push(text);
    this.renderLabels();
    this.changed();
  }

  renderLabels() {
    this.labelList.replaceChildren(...this.labels.map((label) => el("li", { className: "chip label-chip", dataset: { label } },
      el("span", { text: label }),
      el("button", { type: "button", className: "remove", dataset: { label }, "aria-label": `Remove the label filter ${label}`, text: "×" }))));
    this.labelList.hidden = this.labels.length === 0;
  }

  async renderFinding() {
    const signature = this.finding;
    this.findingNotice.hidden = !signature;
    if (!signature) return;
    this.findingText.textContent = "a finding";
    const words = await this.describeFinding(signature);
    if (this.finding === signature) this.findingText.textContent = words ?? `signature ${signature}`;
  }

  /** The filters and order as they are on the page (route.js's shape). */
  filters() {
    return normalizeFilters({
      state: this.stateFilter.value,
      unexpected: this.unexpectedFilter.checked,
      incomplete: this.incompleteFilter.checked,
      divergent: this.divergentFilter.checked,
      labels: this.labels,
      finding: this.finding,
      limit: this.limitFilter.value,
      sort: `${this.sortDescending ? "-" : ""}${this.sortKey}`,
    });
  }

  /** Sets the controls to `filters` (from the URL); false when they were already so. */
  showFilters(filters) {
    const f = normalizeFilters(filters);
    this.stateFilter.value = this.model.stateByName.has(f.state) ? f.state : "";
    this.unexpectedFilter.checked = f.unexpected;
    this.incompleteFilter.checked = f.incomplete;
    this.divergentFilter.checked = f.divergent;
    this.labels = f.labels;
    this.finding = f.finding;
    this.limitFilter.value = f.limit;
    const descending = f.sort.startsWith("-");
    const key = f.sort.replace(/^-/, "");
    this.sortKey = this.headings.some((th) => th.dataset.sort === key) ? key : "id";
    this.sortDescending = this.sortKey === key && descending;
    this.renderLabels();
    this.renderFinding();
  }

  setModel(model, filters = {}) {
    this.model = model;
    this.stateFilter.replaceChildren(el("option", { value: "", text: "any state" }),
      ...model.states.map((s) => el("option", { value: s.name, text: s.name })));
    this.showFilters(filters);
    return this.first();
  }

  /** The filters a link or a reload asked for; a new first page only when they differ. */
  setFilters(filters) {
    if (sameFilters(filters, this.filters())) return false;
    const before = this.filters();
    this.showFilters(filters);
    const after = this.filters();
    // Only the order changed: the page on screen is sorted again, not reloaded.
    if (JSON.stringify({ ...before, sort: "" }) === JSON.stringify({ ...after, sort: "" })) this.sort();
    else this.first();
    return true;
  }

  /** Each row's link carries the list's filters (after they or the order changed). */
  relink() {
    for (const [id, { tr }] of this.rows) tr.querySelector("a").href = this.link(id);
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
    if (this.unexpectedFilter.checked) params.set("hasUnexpected", "true");
    if (this.incompleteFilter.checked) params.set("hasIncompleteLaunch", "true");
    const divergent = this.divergentFilter.checked;
    if (divergent) params.set("hasDivergence", "true");
    for (const label of this.labels) params.append("label", label);
    if (this.finding) params.set("finding", this.finding);
    const cursor = this.cursors[this.cursors.length - 1];
    if (cursor) params.set("cursor", cursor);
    this.status.textContent = "Loading…";
    let page;
    try {
      page = (await request(`/v1/instances?${params}`)).data;
    } catch (error) {
      if (generation === this.generation) this.status.textContent = `The list could not be loaded: ${error.message}`;
      return;
    }
    if (generation !== this.generation) return;
    this.created = 0;
    this.notice.hidden = true;
    this.nextCursor = page.nextCursor;
    this.rows = new Map();
    // Divergences are counted only by servers that count them.
    this.divergences = page.items.some((instance) => instance.counters?.divergences !== undefined);
    this.divergences ||= divergent;
    this.divergenceHeading.hidden = !this.divergences;
    this.divergentFilter.closest("label").hidden = !this.divergences;
    this.body.replaceChildren(...page.items.map((instance) => this.row(instance)));
    this.sort();
    this.prev.disabled = this.cursors.length === 1;
    this.next.disabled = !page.nextCursor;
    const first = (this.cursors.length - 1) * Number(this.limitFilter.value);
    const problems = [this.unexpectedFilter.checked && "with unexpected events", this.incompleteFilter.checked && "with incomplete launches",
      divergent && "with divergences", this.finding && "with the finding", this.labels.length && `labelled ${this.labels.join(", ")}`].filter(Boolean);
    const filter = (this.stateFilter.value ? ` in ${this.stateFilter.value}` : "") + (problems.length ? ` ${problems.join(" and ")}` : "");
    this.status.textContent = page.items.length === 0
      ? (this.cursors.length === 1 ? `No instances${filter}.` : "No more instances.")
      : `Instances${filter} ${first + 1}–${first + page.items.length}${page.nextCursor ? ", more on the next page" : ""}.`;
    this.highlight();
  }

  row(instance) {
    const link = el("a", { href: this.link(instance.id), text: instance.id });
    const badgeCell = el("td", {}, stateBadge(this.model, instance.state));
    const counters = { ...instance.counters };
    const count = (key) => el("td", { className: "num", dataset: { counter: key } });
    const cells = { version: el("td", { className: "num" }), unexpected: count("unexpected"), incompleteLaunches: count("incompleteLaunches") };
    if (this.divergences) cells.divergences = count("divergences");
    const tr = el("tr", { dataset: { id: instance.id } }, el("th", { scope: "row" }, link), badgeCell, ...Object.values(cells));
    const row = { tr, badgeCell, cells, id: instance.id, state: instance.state, version: instance.version, counters };
    this.rows.set(instance.id, row);
    this.fill(row);
    return tr;
  }

  /** Writes a row's figures; a counted problem stands out. */
  fill(row) {
    row.cells.version.textContent = String(row.version);
    for (const key of counted) {
      const cell = row.cells[key];
      if (!cell) continue;
      const value = row.counters[key] ?? 0;
      cell.textContent = String(value);
      cell.classList.toggle("problem", value > 0);
    }
  }

  /** Orders the rows on screen by the chosen column (ties by id), and marks the heading. */
  sort() {
    const key = this.sortKey;
    const value = (row) => key === "id" || key === "state" || key === "version" ? row[key] : (row.counters[key] ?? 0);
    const rows = [...this.rows.values()].sort((a, b) => {
      const x = value(a), y = value(b);
      const order = x < y ? -1 : x > y ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
      return this.sortDescending && x !== y ? -order : order;
    });
    this.body.replaceChildren(...rows.map((row) => row.tr));
    for (const th of this.headings) {
      if (th.dataset.sort === key) th.setAttribute("aria-sort", this.sortDescending ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    }
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
      row.state = record.to;
      row.version = record.version;
      // The counters count what the records say: an unexpected outcome, a launch left incomplete.
      if (record.outcome === "unexpected") row.counters.unexpected = (row.counters.unexpected ?? 0) + 1;
      if (record.incompleteLaunch) row.counters.incompleteLaunches = (row.counters.incompleteLaunches ?? 0) + 1;
      if (record.divergence) row.counters.divergences = (row.counters.divergences ?? 0) + 1;
      this.fill(row);
      const filtered = this.stateFilter.value;
      row.tr.classList.toggle("moved", !!filtered && record.to !== filtered);
    }
    if (this.created > 0) {
      this.noticeText.textContent = `${this.created.toLocaleString()} new ${this.created === 1 ? "instance" : "instances"} since this page was loaded.`;
      this.notice.hidden = false;
    }
  }
}
