// Fleet view: every instance of the model on its graph, from the coverage counters
// (GET /v1/models/{model}/coverage): instances per state now, how often each row
// was taken, rows never taken, unexpected events per state, incomplete launches, and
// divergent records per state (where the app's report differed from the model; only
// from servers that count them: without the field the view shows none).
// Live: records on the stream schedule a reload of the counters (at most one a
// second), which the server keeps, so the figures never drift from the store's.

import { request, seg } from "./api.js";
import { Graph } from "./graph.js";
import { describeCondition, el, stateBadge } from "./model.js";
import { formatRoute } from "./route.js";

/** The list of the model's instances with these filters (route.js). */
const listLink = (model, filters) => formatRoute({ view: "instances", model: model.name, filters });

/** Whether the server counts divergences in coverage (a field later servers add). */
const countsDivergences = (coverage) => coverage.states.some((s) => s.divergences !== undefined);

export class FleetView {
  constructor() {
    this.graph = new Graph(document.getElementById("fleet-graph"), "Fleet");
    this.summary = document.getElementById("fleet-summary");
    this.stateBody = document.querySelector("#state-table tbody");
    this.rowBody = document.querySelector("#row-table tbody");
    this.model = null;
    this.coverage = null;
    this.loading = null;
    this.again = false;
    this.timer = null;
    this.lastLoad = 0;
    this.finding = null;
    this.findingBanner = document.getElementById("fleet-finding");
    this.findingText = document.getElementById("fleet-finding-text");
    document.getElementById("fleet-finding-clear").addEventListener("click", () => this.highlight(null));
  }

  /**
   * Marks a finding (null: none) on the graph and in the tables: its state (for an
   * incomplete launch, its step's state, or the rows of the event it names), in view.
   */
  highlight(finding, words = null) {
    this.finding = finding;
    this.findingBanner.hidden = !finding;
    if (finding) this.findingText.replaceChildren("On the graph: ", ...words);
    this.paintFinding();
    const [state] = this.findingStates();
    if (state) this.graph.reveal(state);
  }

  findingStates() {
    const f = this.finding;
    if (!f) return [];
    if (f.kind === "incompleteLaunch") return this.model.stateByName.has(f.step) ? [f.step] : [];
    return f.state ? [f.state] : [];
  }

  findingRows() {
    const f = this.finding;
    if (f?.kind !== "incompleteLaunch" || this.model.stateByName.has(f.step)) return [];
    return this.model.rows.filter((r) => r.event === f.step).map((r) => r.id);
  }

  paintFinding() {
    const states = this.findingStates();
    const rows = this.findingRows();
    this.graph.markStates("finding", states);
    this.graph.markRows("finding", rows);
    for (const tr of this.stateBody.rows) tr.classList.toggle("finding", states.includes(tr.dataset.state));
    for (const tr of this.rowBody.rows) tr.classList.toggle("finding", rows.includes(tr.dataset.row));
  }

  async show(model) {
    this.model = model;
    this.coverage = null;
    this.finding = null;
    this.findingBanner.hidden = true;
    this.renderTables();
    const drawn = this.graph.load(model.name);
    await Promise.all([drawn, this.reload()]);
    if (this.model === model) {
      this.paint();
      this.paintFinding();
    }
  }

  /** Records arrived: reload the counters soon, at most once a second. */
  changed() {
    if (this.timer !== null) return;
    const wait = Math.max(0, 1000 - (performance.now() - this.lastLoad));
    this.timer = setTimeout(() => {
      this.timer = null;
      this.reload();
    }, wait);
  }

  async reload() {
    if (this.loading) {
      this.again = true;
      return this.loading;
    }
    const model = this.model;
    this.lastLoad = performance.now();
    this.loading = (async () => {
      try {
        const { data } = await request(`/v1/models/${seg(model.name)}/coverage`);
        if (this.model !== model) return;
        this.coverage = data;
        this.error = null;
      } catch (error) {
        if (this.model !== model) return;
        this.error = error.status === 404
          ? `This server does not count coverage (GET /v1/models/${model.name}/coverage answered 404): no fleet figures.`
          : `The fleet figures could not be loaded: ${error.message}`;
      }
      this.renderTables();
      this.paint();
      this.paintFinding();
    })();
    try {
      await this.loading;
    } finally {
      this.loading = null;
      if (this.again) {
        this.again = false;
        this.changed();
      }
    }
  }

  /** Counts, edge weights and warnings onto the graph. */
  paint() {
    const graph = this.graph;
    if (!graph.svg) return;
    const coverage = this.coverage;
    graph.svg.classList.toggle("has-coverage", !!coverage);
    if (!coverage) return;
    const counted = countsDivergences(coverage);
    for (const state of coverage.states) {
      const node = graph.nodes.get(state.state);
      if (!node) continue;
      node.dataset.count = state.instances;
      node.classList.toggle("occupied", state.instances > 0);
      node.classList.toggle("has-unexpected", state.unexpected > 0);
      node.classList.toggle("has-incomplete", state.incompleteLaunches > 0);
      graph.badge(state.state, "count", "ne", String(state.instances), `${state.instances} instances in ${state.state} now`, { empty: state.instances === 0 });
      graph.badge(state.state, "unexpected", "se", state.unexpected > 0 ? `!${state.unexpected}` : null,
        `${state.unexpected} unexpected events recorded in ${state.state}`);
      graph.badge(state.state, "incomplete", "sw", state.incompleteLaunches > 0 ? `↯${state.incompleteLaunches}` : null,
        `${state.incompleteLaunches} instances in ${state.state} with an incomplete launch`);
      const divergences = counted ? state.divergences ?? 0 : 0;
      node.classList.toggle("has-divergence", divergences > 0);
      graph.badge(state.state, "divergence", "nw", divergences > 0 ? `≠${divergences}` : null,
        `${divergences} divergent record${divergences === 1 ? "" : "s"} into ${state.state}: the app's report differed from the model`);
    }
    const most = Math.max(1, ...coverage.rows.map((r) => r.taken));
    for (const row of coverage.rows) {
      const edge = graph.edges.get(row.row);
      if (!edge) continue;
      edge.dataset.taken = row.taken;
      const share = row.taken === 0 ? 0 : Math.log1p(row.taken) / Math.log1p(most);
      // Five heat levels for colour; width follows the same logarithmic share.
      const level = row.taken === 0 ? 0 : 1 + Math.min(4, Math.floor(share * 4.999));
      for (let i = 0; i <= 5; i += 1) edge.classList.toggle(`heat-${i}`, i === level);
      edge.classList.toggle("never-taken", row.taken === 0);
      edge.classList.toggle("has-divergence", (row.divergent ?? 0) > 0);
      for (const path of edge.querySelectorAll("path")) path.style.strokeWidth = String(1 + share * 5);
      let tooltip = edge.querySelector(":scope > title");
      if (tooltip) {
        tooltip.dataset.original ??= tooltip.textContent;
        tooltip.textContent = `${tooltip.dataset.original} (${row.row}): taken ${row.taken} times`
          + (row.divergent > 0 ? `, ${row.divergent} with a divergence` : "");
      }
    }
  }

  renderTables() {
    const model = this.model;
    const coverage = this.coverage;
    const statesByName = new Map((coverage?.states ?? []).map((s) => [s.state, s]));
    const rowsById = new Map((coverage?.rows ?? []).map((r) => [r.row, r]));
    const cell = (value) => el("td", { className: "num", text: value === undefined ? "–" : String(value) });
    // Columns for divergences only where the server counts them.
    const divergences = !!coverage && countsDivergences(coverage);
    const rowDivergences = !!coverage && coverage.rows.some((r) => r.divergent !== undefined);
    for (const th of document.querySelectorAll("#state-table th.divergences")) th.hidden = !divergences;
    for (const th of document.querySelectorAll("#row-table th.divergences")) th.hidden = !rowDivergences;
    document.getElementById("legend-divergence").hidden = !divergences;
    this.stateBody.replaceChildren(...model.states.map((state) => {
      const counts = statesByName.get(state.name);
      const link = el("a", { href: listLink(model, { state: state.name }) }, stateBadge(model, state.name));
      const divergent = counts?.divergences ?? 0;
      // The count leads to the instances in the state that diverged (those whose counters say so).
      const divergenceCell = !divergences ? null
        : el("td", { className: `num${divergent > 0 ? " problem" : ""}`, dataset: { counter: "divergences" } }, divergent > 0
          ? el("a", { href: listLink(model, { state: state.name, divergent: true, sort: "-divergences" }), "aria-label": `${divergent} divergent records into ${state.name}: list the instances there with divergences` }, `≠ ${divergent}`)
          : "0");
      return el("tr", { className: counts?.unexpected ? "warn" : "", dataset: { state: state.name } },
        el("th", { scope: "row" }, link), el("td", { text: state.kind }),
        cell(counts?.instances), cell(counts?.unexpected), cell(counts?.incompleteLaunches), divergenceCell);
    }));
    this.rowBody.replaceChildren(...model.rows.map((row) => {
      const taken = rowsById.get(row.id)?.taken;
      const guard = row.when?.length ? el("span", { className: "muted", text: ` [${row.when.map(describeCondition).join(", ")}]` }) : null;
      const divergent = rowsById.get(row.id)?.divergent;
      return el("tr", { className: taken === 0 ? "never" : "", dataset: { row: row.id } },
        el("th", { scope: "row", text: row.id }), el("td", { text: row.from }),
        el("td", {}, row.event, guard), el("td", { text: row.to ?? `(stays)` }),
        el("td", { className: "num" }, taken === undefined ? "–" : taken === 0 ? el("span", { className: "never-label", text: "never" }) : String(taken)),
        rowDivergences ? el("td", { className: `num${divergent > 0 ? " problem" : ""}`, text: divergent > 0 ? `≠ ${divergent}` : String(divergent ?? 0) }) : null);
    }));
    // A narrow window stacks each row, every cell labelled with its column's name (app.css);
    // the roles keep the table's semantics, which some browsers drop with its display.
    for (const body of [this.stateBody, this.rowBody]) {
      const names = [...body.parentElement.tHead.rows[0].cells].map((th) => th.textContent);
      for (const row of body.rows) {
        row.setAttribute("role", "row");
        for (const cell of row.cells) {
          cell.setAttribute("role", cell.tagName === "TD" ? "cell" : "rowheader");
          if (cell.tagName === "TD") cell.dataset.label = names[cell.cellIndex];
        }
      }
    }
    if (this.error) {
      this.summary.textContent = this.error;
      this.summary.className = "error";
    } else if (coverage) {
      const total = coverage.states.reduce((n, s) => n + s.instances, 0);
      const unexpected = coverage.states.reduce((n, s) => n + s.unexpected, 0);
      const never = coverage.neverTaken?.length ?? coverage.rows.filter((r) => r.taken === 0).length;
      this.summary.className = "muted";
      this.summary.replaceChildren(`${total.toLocaleString()} instances; ${unexpected.toLocaleString()} unexpected events recorded; `);
      if (divergences) {
        const divergent = coverage.states.reduce((n, s) => n + (s.divergences ?? 0), 0);
        this.summary.append(`${divergent.toLocaleString()} divergent records`,
          divergent > 0 ? el("span", {}, " (", el("a", { href: listLink(model, { divergent: true, sort: "-divergences" }), id: "fleet-divergent-link" }, "list the instances with divergences"), ")") : "", "; ");
      }
      this.summary.append(`${never} of ${coverage.rows.length} rows never taken.`);
    } else {
      this.summary.className = "muted";
      this.summary.textContent = "Loading the fleet…";
    }
  }
}
