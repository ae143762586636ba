// Trace checker: a recorded trace checked against the model by the server
// (POST /v1/models/{model}/conformance), its first divergence and the rows it
// exercised shown on the graph; and the model's built-in scenarios, listed and run
// (GET /v1/models/{model}/scenarios, POST …/scenarios/{name}).
//
// The report and the graph always describe the same thing (`data-subject` on both):
// the trace checked last, or the scenario run last on its own. "Run all" only fills
// in the table. Steps are numbered from 0, as the API's `step` is.

import { request, seg } from "./api.js";
import { Graph } from "./graph.js";
import { describeCall, describeInput, divergenceKinds, el, outcomeBadge, stateBadge } from "./model.js";

export class TraceView {
  constructor() {
    this.graph = new Graph(document.getElementById("trace-graph"), "Trace");
    this.form = document.getElementById("trace-form");
    this.text = document.getElementById("trace-text");
    this.result = document.getElementById("trace-result");
    this.scenarioBody = document.querySelector("#scenario-table tbody");
    this.scenarioStatus = document.getElementById("scenarios-status");
    this.model = null;
    this.scenarios = [];

    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.check();
    });
    document.getElementById("trace-file").addEventListener("change", async (event) => {
      const file = event.target.files[0];
      if (!file) return;
      this.text.value = await file.text();
      event.target.value = "";
      this.check();
    });
    document.getElementById("trace-example").addEventListener("click", () => {
      this.text.value = JSON.stringify({ steps: exampleTrace(this.model) }, null, 2);
      this.text.focus();
    });
    document.getElementById("scenarios-run-all").addEventListener("click", async (event) => {
      event.target.disabled = true;
      for (const button of this.scenarioBody.querySelectorAll("button[data-do='run']")) {
        await this.run(this.scenarios.find((s) => s.name === button.dataset.scenario), button, { show: false });
      }
      const passing = this.scenarioBody.querySelectorAll("tr[data-passing='true']").length;
      this.scenarioStatus.textContent = `${passing} of ${this.scenarios.length} scenarios pass.`;
      event.target.disabled = false;
    });
    this.scenarioBody.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-scenario]");
      if (!button) return;
      const scenario = this.scenarios.find((s) => s.name === button.dataset.scenario);
      if (button.dataset.do === "run") this.run(scenario, button, { show: true });
      else {
        this.text.value = JSON.stringify({ steps: [...(scenario.setup ?? []), ...(scenario.steps ?? [])] }, null, 2);
        this.text.focus();
      }
    });
  }

  async setModel(model) {
    this.model = model;
    this.showPlaceholder();
    await Promise.all([this.graph.load(model.name), this.loadScenarios()]);
    if (this.model === model) this.setSubject(this.result.dataset.subject);
  }

  /** The report before anything was checked: what to do, not a blank box. */
  showPlaceholder() {
    this.result.replaceChildren(el("p", { className: "muted placeholder", text: "Check a trace, or run one scenario, to see where it departs from the model." }));
    this.setSubject("none");
    this.mark({});
  }

  /** What the report and the graph describe now (the same, always). */
  setSubject(subject) {
    this.result.dataset.subject = subject;
    if (this.graph.svg) this.graph.svg.dataset.subject = subject;
  }

  /** The graph's marks for one subject; absent members clear theirs. */
  mark({ exercised = [], divergence = [], believed = [], final = [] }) {
    this.graph.markRows("exercised", exercised);
    this.graph.markStates("divergence", divergence);
    this.graph.markStates("believed", believed);
    this.graph.markStates("final", final);
    this.graph.svg?.classList.toggle("has-trace", exercised.length + final.length > 0);
    if (this.graph.svg) this.graph.svg.dataset.divergence = divergence.join(" ");
    // Where it went wrong (or ended) in view, when the graph is wider than its region.
    const focus = divergence[0] ?? final[0];
    if (focus) this.graph.reveal(focus);
  }

  /** Uses a trace given from elsewhere (an instance's history) and checks it. */
  checkSteps(steps) {
    this.text.value = JSON.stringify({ steps }, null, 2);
    return this.check();
  }

  async check() {
    const model = this.model;
    let steps;
    try {
      steps = parseTrace(this.text.value);
    } catch (error) {
      this.showError(error.message);
      this.text.focus();
      return;
    }
    this.result.replaceChildren(el("p", { className: "muted", text: `Checking ${steps.length} steps…` }));
    let report;
    try {
      ({ data: report } = await request(`/v1/models/${seg(model.name)}/conformance`, { method: "POST", json: { steps } }));
    } catch (error) {
      if (this.model !== model) return;
      const step = error.problem?.step;
      this.showError(error.status === 404
        ? `This server does not check traces (POST /v1/models/${model.name}/conformance answered 404).`
        : Number.isInteger(step)
          ? `Step ${step} names something ${model.name} does not have: ${error.message}`
          : `The trace was refused: ${error.message}`);
      return;
    }
    if (this.model !== model) return;
    this.showReport(steps, report);
  }

  showError(text) {
    this.result.replaceChildren(el("p", { className: "banner error", role: "alert", text }));
    this.setSubject("error");
    this.mark({});
  }

  showReport(steps, report) {
    const problem = report.firstProblem;
    const stepRecord = (i) => report.steps[i]?.record;
    const divergence = [];
    const believed = [];
    if (problem) {
      const record = stepRecord(problem.step);
      if (problem.kind === "beliefMismatch" || problem.kind === "hookDivergence") {
        // Where the step took it: the app's hooks ran (or its belief was wrong) there.
        if (record) divergence.push(record.to);
        if (report.steps[problem.step]?.believedState) believed.push(report.steps[problem.step].believedState);
      } else if (record) {
        divergence.push(record.from);
      } else {
        // An input the model does not know: the divergence is where the trace had got to.
        let before = this.model.initialState;
        for (let i = problem.step - 1; i >= 0; i -= 1) {
          if (stepRecord(i)) {
            before = stepRecord(i).to;
            break;
          }
        }
        divergence.push(before);
      }
    }
    this.mark({ exercised: report.exercisedRows ?? [], divergence, believed, final: [report.finalState] });
    this.setSubject("trace");

    const summary = problem
      ? el("p", { className: "banner error trace-summary", dataset: { kind: problem.kind, step: problem.step } },
        el("strong", { text: `Diverges at step ${problem.step}` }), ` (${problem.kind}): ${problem.detail ?? ""}`)
      : el("p", { className: "banner ok trace-summary" }, el("strong", { text: "Conforms" }), ` to ${this.model.name}; ends in `, stateBadge(this.model, report.finalState), ".");
    const rows = report.steps.map((result, i) => {
      const record = result.record;
      const input = record ? describeInput(record) : describeStep(steps[i]);
      const belief = result.believedState
        ? el("span", { className: result.beliefCorrect === false ? "belief wrong" : "belief" },
          result.beliefCorrect === false ? "✗ believed " : "✓ ", stateBadge(this.model, result.believedState))
        : el("span", { className: "muted", text: "–" });
      // Hooks the app reported running that differ from the model's (the step's record says how).
      const hooks = record?.divergence?.hooks;
      const hookNote = hooks ? el("span", { className: "belief wrong hooks-wrong" }, `✗ hooks: ${divergenceKinds({ hooks }).join(", ")}`,
        ...(hooks.missing.length ? [" (missing ", ...breakable(hooks.missing), ")"] : []),
        ...(hooks.extra.length ? [" (extra ", ...breakable(hooks.extra), ")"] : [])) : null;
      const isProblem = problem && problem.step === i;
      return el("tr", { className: isProblem ? "divergence" : "", "aria-current": isProblem ? "step" : undefined },
        el("th", { scope: "row", className: "num", text: String(i) }),
        el("td", { text: input }),
        el("td", {}, record ? outcomeBadge(record.outcome) : el("span", { className: "badge-outcome outcome-unexpected", text: "error" })),
        el("td", {}, record ? stateBadge(this.model, record.from) : "", record && record.from !== record.to ? " → " : "", record && record.from !== record.to ? stateBadge(this.model, record.to) : ""),
        el("td", {}, record?.row ?? (result.error ? el("span", { className: "error", text: result.error }) : "–")),
        el("td", {}, belief, hookNote));
    });
    const table = el("table", { className: "data trace-steps" },
      el("caption", { text: `Steps, numbered from 0 as the API's step (rows exercised: ${(report.exercisedRows ?? []).join(", ") || "none"})` }),
      el("thead", {}, el("tr", {}, ...["Step", "Input", "Outcome", "State", "Row", "Belief and hooks"].map((h) => el("th", { scope: "col", text: h })))),
      el("tbody", {}, ...rows));
    this.result.replaceChildren(summary, table);
  }

  async loadScenarios() {
    const model = this.model;
    this.scenarios = [];
    this.scenarioBody.replaceChildren();
    this.scenarioStatus.textContent = "Loading scenarios…";
    try {
      const { data } = await request(`/v1/models/${seg(model.name)}/scenarios`);
      if (this.model !== model) return;
      this.scenarios = data.items;
    } catch (error) {
      if (this.model !== model) return;
      this.scenarioStatus.textContent = error.status === 404
        ? `This server has no scenarios to run (GET /v1/models/${model.name}/scenarios answered 404).`
        : `The scenarios could not be loaded: ${error.message}`;
      return;
    }
    this.scenarioStatus.textContent = this.scenarios.length ? "" : `Model ${model.name} has no built-in scenarios.`;
    document.getElementById("scenarios-run-all").hidden = this.scenarios.length === 0;
    this.scenarioBody.replaceChildren(...this.scenarios.map((s) => el("tr", { dataset: { scenario: s.name } },
      el("th", { scope: "row" }, s.title ?? s.name, el("br"), el("code", { text: s.name })),
      el("td", { className: "expected" }, s.expectedState ? stateBadge(this.model, s.expectedState) : "–"),
      el("td", { className: "scenario-result", "aria-live": "polite" }),
      el("td", { className: "buttons" },
        el("button", { type: "button", dataset: { scenario: s.name, do: "run" }, text: "Run", "aria-label": `Run ${s.title ?? s.name}` }),
        el("button", { type: "button", className: "quiet", dataset: { scenario: s.name, do: "load" }, text: "Load as trace", "aria-label": `Load ${s.title ?? s.name} as a trace` })))));
  }

  /** Runs one scenario; `show` puts it in the report and on the graph as well as in its row. */
  async run(scenario, button, { show }) {
    const row = button.closest("tr");
    const cell = row.querySelector(".scenario-result");
    cell.textContent = "Running…";
    button.disabled = true;
    try {
      const { data } = await request(`/v1/models/${seg(this.model.name)}/scenarios/${seg(scenario.name)}`, { method: "POST" });
      const hooks = (data.hooks ?? []).join(", ");
      cell.replaceChildren(el("span", { className: data.passing ? "pass" : "fail", text: data.passing ? "✓ passes" : "✗ fails" }),
        " ends in ", stateBadge(this.model, data.finalState),
        el("details", {}, el("summary", { text: "hooks" }),
          el("p", { text: `ran: ${hooks || "none"}` }),
          el("p", { text: `expected: ${(scenario.expectedHooks ?? []).join(", ") || "none"}` })));
      row.dataset.passing = String(data.passing);
      if (!show) return;
      const rows = [...new Set((data.records ?? []).map((r) => r.row).filter(Boolean))];
      this.mark({
        exercised: rows, final: [data.finalState],
        divergence: data.passing ? [] : [data.finalState], believed: data.passing ? [] : [scenario.expectedState],
      });
      this.result.replaceChildren(
        el("p", { className: `banner ${data.passing ? "ok" : "error"} trace-summary`, dataset: { scenario: scenario.name } },
          el("strong", { text: `Scenario ${scenario.title ?? scenario.name}` }), data.passing ? " passes: ends in " : " fails: ends in ",
          stateBadge(this.model, data.finalState), scenario.expectedState ? ", expected " : "",
          scenario.expectedState ? stateBadge(this.model, scenario.expectedState) : "", "."),
        el("p", { className: "muted", text: `Rows exercised: ${rows.join(", ") || "none"}. Hooks run: ${hooks || "none"}.` }));
      this.setSubject(`scenario ${scenario.name}`);
    } catch (error) {
      cell.replaceChildren(el("span", { className: "fail", text: `could not run: ${error.message}` }));
    } finally {
      button.disabled = false;
    }
  }
}

/** Steps from what was pasted: {"steps": […]}, an array, one JSON value per line, or history records. */
export function parseTrace(text) {
  const trimmed = text.trim();
  if (!trimmed) throw new Error("Paste or upload a trace first.");
  let values;
  try {
    const parsed = JSON.parse(trimmed);
    if (Array.isArray(parsed)) values = parsed;
    else if (Array.isArray(parsed?.steps)) values = parsed.steps;
    else if (Array.isArray(parsed?.items)) values = parsed.items;
    else values = [parsed];
  } catch {
    values = trimmed.split(/\r?\n/).filter((line) => line.trim()).map((line, i) => {
      try {
        return JSON.parse(line);
      } catch {
        throw new Error(`Line ${i + 1} is not JSON: ${line.slice(0, 60)}`);
      }
    });
  }
  // A gap record is no input of the model: what was dropped cannot be checked.
  return values.filter((value) => !(isRecord(value) && value.kind === "gap")).map((value, i) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error(`Step ${i} (numbered from 0) is not a JSON object.`);
    return isRecord(value) ? stepOfRecord(value) : value;
  });
}

function isRecord(value) {
  return typeof value.kind === "string" && "outcome" in value && "to" in value;
}

/** A history record as the step an app would have logged: its input, and where it ended up. */
export function stepOfRecord(record) {
  // What the app reported, when it did, so that the check finds where its code diverged.
  const ran = record.ranHooks ? { ranHooks: record.ranHooks } : {};
  if (record.kind === "event") return { event: record.event, ...(record.parameters ?? {}), believedState: record.believedState ?? record.to, ...ran };
  if (record.kind === "action") return { action: record.action, ...(record.parameters ?? {}), ...(record.believedState ? { believedState: record.believedState } : {}), ...ran };
  return { relaunch: true, believedState: record.to };
}

/** Hook names, comma-separated, that may wrap after each dot (`Foreground.<wbr>onTransition`). */
function breakable(names) {
  return names.join(", ").split(".").flatMap((part, i) => i === 0 ? [part] : [".", el("wbr"), part]);
}

function describeStep(step) {
  const { believedState, ranHooks, event, action, ...parameters } = step;
  return describeCall(event ?? action ?? Object.keys(parameters)[0] ?? "?", event || action ? parameters : {});
}

/** A short path through the model from its initial state, each step with the state it should reach. */
function exampleTrace(model) {
  const steps = [];
  const visited = new Set([model.initialState]);
  let state = model.initialState;
  for (let n = 0; n < 4; n += 1) {
    const candidates = model.rows.filter((r) => r.from === state && r.to && r.to !== state);
    const row = candidates.find((r) => !visited.has(r.to)) ?? candidates[0];
    if (!row) break;
    const event = model.events.find((e) => e.name === row.event);
    const step = { event: row.event };
    for (const parameter of event.parameters) {
      const condition = row.when.find((c) => c.parameter === parameter.name);
      if (condition && "equals" in condition) step[parameter.name] = condition.equals;
      else if (condition && condition.present === true) step[parameter.name] = placeholder(parameter);
      else if (parameter.required && !(condition && (condition.present === false))) step[parameter.name] = placeholder(parameter);
    }
    step.believedState = row.to;
    steps.push(step);
    visited.add(row.to);
    state = row.to;
  }
  return steps;
}

function placeholder(parameter) {
  return parameter.type === "boolean" ? true : parameter.type === "string" ? "main" : 1;
}
