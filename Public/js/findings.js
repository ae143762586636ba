// Findings: the fleet's problems grouped by signature (GET /v1/findings), the most
// widespread first. Each opens the instances it names (the list filtered by `finding=`)
// and shows its state, or the rows of its step, on the fleet's graph.
// Live: records with a problem on the stream reload the panel, debounced (a burst costs
// one request; a steady stream of problems still one at least every `longestWait`).

import { request } from "./api.js";
import { el, stateBadge, timeElement } from "./model.js";
import { formatRoute } from "./route.js";

const shown = 20;
const quiet = 400;
const longestWait = 2000;

/** Whether a record is one a finding counts: an unexpected input, an incomplete launch, a divergence, a gap. */
export const hasProblem = (record) =>
  record.outcome === "unexpected" || !!record.incompleteLaunch || !!record.divergence || record.kind === "gap";

const kindNames = { unexpected: "unexpected", incompleteLaunch: "incomplete launch", divergence: "divergence", gap: "gap" };

/** A finding in words, as elements (state names as badges). */
export function describeFinding(model, finding) {
  const state = (name) => stateBadge(model, name);
  switch (finding.kind) {
    case "unexpected":
      return finding.event !== undefined
        ? ["event ", el("code", { text: finding.event }), " unexpected in ", state(finding.state)]
        : ["action ", el("code", { text: finding.action }), " unexpected in ", state(finding.state)];
    case "incompleteLaunch":
      return ["launch left incomplete at step ", el("code", { text: finding.step })];
    case "divergence": {
      const diverged = finding.diverged ?? {};
      if (diverged.believedState !== undefined) return ["in ", state(finding.state), " the app believed it was in ", state(diverged.believedState)];
      if (diverged.missingHook !== undefined) return ["in ", state(finding.state), " hook ", el("code", { text: diverged.missingHook }), " did not run"];
      if (diverged.extraHook !== undefined) return ["in ", state(finding.state), " hook ", el("code", { text: diverged.extraHook }), " ran, which the model does not"];
      return ["the app's report differed from the model in ", state(finding.state)];
    }
    case "gap":
      return ["reports dropped on the device before delivery"];
    default:
      return [`${finding.kind}`];
  }
}

/** The same in plain text (for the list's filter notice and labels). */
export function findingText(model, finding) {
  return el("span", {}, ...describeFinding(model, finding)).textContent;
}

export class FindingsPanel {
  /** `onShow(finding)` marks a finding's state or rows on the fleet's graph. */
  constructor({ onShow }) {
    this.onShow = onShow;
    this.list = document.getElementById("findings-list");
    this.status = document.getElementById("findings-status");
    this.more = document.getElementById("findings-more");
    this.model = null;
    this.items = [];
    this.limit = shown;
    this.generation = 0;
    this.timer = null;
    this.pendingSince = null;
    this.list.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-signature]");
      const finding = button && this.items.find((f) => f.signature === button.dataset.signature);
      if (finding) this.onShow(finding);
    });
    this.more.addEventListener("click", () => {
      this.limit += shown;
      this.reload();
    });
  }

  setModel(model) {
    this.model = model;
    this.items = [];
    this.limit = shown;
    this.list.replaceChildren();
    return this.reload();
  }

  /** Records from the stream: those with a problem reload the findings soon. */
  changed(records) {
    if (!records.some(hasProblem)) return;
    clearTimeout(this.timer);
    this.pendingSince ??= performance.now();
    const wait = Math.max(0, Math.min(quiet, longestWait - (performance.now() - this.pendingSince)));
    this.timer = setTimeout(() => {
      this.pendingSince = null;
      this.reload();
    }, wait);
  }

  async reload() {
    const generation = ++this.generation;
    const model = this.model;
    const params = new URLSearchParams({ model: model.name, limit: String(this.limit) });
    let page;
    try {
      page = (await request(`/v1/findings?${params}`)).data;
    } catch (error) {
      if (generation !== this.generation) return;
      this.status.textContent = error.status === 404
        ? "This server does not group problems into findings (GET /v1/findings answered 404)."
        : `The findings could not be loaded: ${error.message}`;
      this.status.className = "error";
      return;
    }
    if (generation !== this.generation) return;
    this.items = page.items;
    this.render(page);
  }

  render(page) {
    const model = this.model;
    this.status.className = "muted";
    this.status.textContent = this.items.length === 0
      ? "No findings: no unexpected events, incomplete launches, divergences or gaps recorded."
      : `${this.items.length} finding${this.items.length === 1 ? "" : "s"}, the most widespread first.`;
    this.more.hidden = !(page.nextCursor || this.items.length >= this.limit);
    this.list.replaceChildren(...this.items.map((finding) => {
      const instances = `${finding.instances.toLocaleString()} instance${finding.instances === 1 ? "" : "s"}`;
      const records = `${finding.count.toLocaleString()} record${finding.count === 1 ? "" : "s"}`;
      const list = formatRoute({ view: "instances", model: model.name, filters: { finding: finding.signature } });
      const examples = (finding.examples ?? []).map((id) =>
        el("li", {}, el("a", { href: formatRoute({ view: "instances", id, model: model.name, filters: { finding: finding.signature } }), text: id })));
      const onGraph = finding.kind !== "gap";
      return el("li", { className: `finding kind-${finding.kind}`, dataset: { signature: finding.signature, kind: finding.kind } },
        el("div", { className: "finding-head" },
          el("span", { className: `finding-kind kind-${finding.kind}`, text: kindNames[finding.kind] ?? finding.kind }),
          el("span", { className: "finding-what" }, ...describeFinding(model, finding))),
        el("div", { className: "finding-figures" },
          el("a", { className: "finding-instances", href: list, "aria-label": `List the ${instances} with this finding` }, instances),
          el("span", { className: "muted", text: records }),
          el("span", { className: "muted" }, "first ", timeElement(finding.firstSeen), ", last ", timeElement(finding.lastSeen)),
          onGraph ? el("button", { type: "button", className: "quiet small", dataset: { signature: finding.signature }, text: "Show on the graph" }) : null),
        examples.length ? el("div", { className: "finding-examples" }, el("span", { className: "muted", text: "e.g." }), el("ul", {}, ...examples)) : null);
    }));
  }

  /** A finding's description in words, from the panel or the server (null when unknown). */
  async describe(signature) {
    let finding = this.items.find((f) => f.signature === signature);
    if (!finding && this.model) {
      try {
        const { data } = await request(`/v1/findings?${new URLSearchParams({ model: this.model.name, limit: "1000" })}`);
        finding = data.items.find((f) => f.signature === signature);
      } catch {
        return null; // the notice then names the signature itself
      }
    }
    return finding ? findingText(this.model, finding) : null;
  }
}
