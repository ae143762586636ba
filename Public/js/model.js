// What the page needs to know about a model (GET /v1/models/{model}), and small
// helpers for showing records and building the elements of the page.

/** A loaded model with lookups by state and row. */
export class ModelInfo {
  constructor(definition) {
    this.definition = definition;
    this.name = definition.name;
    this.states = definition.states;
    this.events = definition.events;
    this.actions = definition.actions;
    this.rows = definition.transitions;
    this.initialState = definition.initialState;
    this.stateByName = new Map(this.states.map((s) => [s.name, s]));
  }

  /**
   * What `event` would do in `state`: "expected" when a row of that state takes it
   * (a guard may still decide which), otherwise what the state does with other
   * events: "ignored" or "unexpected".
   */
  eventFate(state, event) {
    if (this.rows.some((r) => r.from === state && r.event === event)) return "expected";
    return this.stateByName.get(state)?.otherEvents === "ignored" ? "ignored" : "unexpected";
  }
}

export function describeCondition(c) {
  if ("equals" in c) return `${c.parameter} = ${JSON.stringify(c.equals)}`;
  if ("notEquals" in c) return `${c.parameter} ≠ ${JSON.stringify(c.notEquals)}`;
  return c.present ? `${c.parameter} given` : `no ${c.parameter}`;
}

/** `name(key: value, …)`, or `name` alone without parameters. */
export function describeCall(name, parameters) {
  const list = Object.entries(parameters ?? {}).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(", ");
  return list ? `${name}(${list})` : name;
}

/** The input a record answers: `didBecomeActive`, `openURL(url: …)`, `relaunch`, or a gap's loss. */
export function describeInput(record) {
  if (record.kind === "gap") return describeGap(record.dropped);
  const name = record.kind === "event" ? record.event : record.kind === "action" ? record.action : record.kind;
  return describeCall(name, record.parameters);
}

/** What a gap record says: inputs the app's reporter dropped before it could deliver them. */
export function describeGap(dropped) {
  return `${dropped} report${dropped === 1 ? "" : "s"} dropped on the device before delivery`;
}

/** A pending action (buffered, delivered, replaced or cleared). */
export function describeAction(action) {
  return action ? describeCall(action.name, action.parameters) : "";
}

/** `el("p", {className: "x", text: "hi"}, child, …)`: an element, without markup strings. */
export function el(tag, properties = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(properties)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") element.textContent = value;
    else if (key === "className") element.className = value;
    else if (key === "dataset") Object.assign(element.dataset, value);
    else if (key === "htmlFor") element.htmlFor = value;
    else if (key in element && typeof value !== "string") element[key] = value;
    else element.setAttribute(key, value === true ? "" : value);
  }
  element.append(...children.filter((c) => c !== null && c !== undefined && c !== false));
  return element;
}

/** A state badge: the state's name, coloured by its kind. */
export function stateBadge(model, state) {
  const kind = model?.stateByName.get(state)?.kind ?? "unknown";
  return el("span", { className: `badge-state kind-${kind}`, text: state, dataset: { state } });
}

export function outcomeBadge(outcome) {
  return el("span", { className: `badge-outcome outcome-${outcome}`, text: outcome });
}

/**
 * The page's one time format: local date and time to the millisecond,
 * `2026-12-01 19:19:35.807` (records come milliseconds apart, so the same format
 * serves the timeline and the facts).
 */
export function formatTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (n, width = 2) => String(n).padStart(width, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} `
    + `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

/** A <time> element in the page's format, its machine-readable value the ISO text. */
export function timeElement(iso, title = `${iso} (UTC)`) {
  return el("time", { dateTime: iso, title, text: formatTime(iso) });
}

/**
 * A device's time as its clock read it: the date and time `occurredAt` states, in the
 * page's format, then the offset it was read in (`2026-12-02 05:00:00.123 +01:00`, `UTC`
 * for `Z`). Taken from the text rather than through a Date, which would move it to the
 * page's zone and, at the calendar's ends, print a year such as `-1`; the text itself
 * without a match.
 */
export function formatDeviceTime(iso) {
  const parts = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/.exec(iso);
  if (!parts) return iso;
  const [, date, time, fraction = "", offset] = parts;
  return `${date} ${time}.${fraction.padEnd(3, "0").slice(0, 3)} ${offset.toUpperCase() === "Z" ? "UTC" : offset}`;
}

/** `3.2 s`, `4 min 10 s`, `2 h 5 min`: how far apart two clocks' readings are. */
function formatSpan(ms) {
  const seconds = Math.abs(ms) / 1000;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
  const hours = Math.floor(minutes / 60);
  return hours < 48 ? `${hours} h ${minutes - hours * 60} min` : `${Math.floor(hours / 24)} days`;
}

/**
 * The device's own time of a record (`occurredAt`), as its clock read it, beside the
 * server's, with how much later the record arrived (a queued event can arrive hours late;
 * a device clock can also run ahead). Null when the app sent none.
 */
export function deviceTime(record) {
  if (!record.occurredAt) return null;
  const lag = new Date(record.time) - new Date(record.occurredAt);
  const note = !Number.isFinite(lag) || Math.abs(lag) < 1000 ? ""
    : lag > 0 ? ` (arrived ${formatSpan(lag)} later)` : ` (device clock ${formatSpan(lag)} ahead)`;
  return el("span", { className: "device-time", dataset: { occurredAt: record.occurredAt } },
    "device ", el("time", { dateTime: record.occurredAt, title: `${record.occurredAt} (as the device sent it)`,
      text: formatDeviceTime(record.occurredAt) }), note);
}

/** The kinds of a record's divergence, in words: `state`, `1 extra hook`, `hooks out of order`. */
export function divergenceKinds(divergence) {
  const kinds = [];
  if (divergence?.state) kinds.push("state");
  const hooks = divergence?.hooks;
  if (hooks?.orderOnly) kinds.push("hooks out of order");
  else if (hooks) {
    const plural = (n, word) => `${n} ${word} hook${n === 1 ? "" : "s"}`;
    if (hooks.missing.length) kinds.push(plural(hooks.missing.length, "missing"));
    if (hooks.extra.length) kinds.push(plural(hooks.extra.length, "extra"));
  }
  return kinds;
}

/** The mark of a divergent record: a symbol and words (never colour alone). */
export function divergenceBadge(record) {
  const kinds = divergenceKinds(record.divergence);
  return el("span", { className: "badge-divergence", title: "What the app reported differs from the model", text: `≠ diverged: ${kinds.join(", ")}` });
}

const hookList = (hooks) => hooks.length
  ? el("ol", { className: "hooks" }, ...hooks.map((h) => el("li", { text: h })))
  : el("span", { className: "muted", text: "none" });

/**
 * What the app reported for a record beside what the model did: for a divergent record,
 * the state believed and the actual one, and the hooks expected, ran, missing and extra
 * (or that only their order differs); for a report that agrees, a word saying so. Null
 * when the app reported nothing.
 */
export function reportDetails(model, record) {
  const divergence = record.divergence;
  if (!divergence) {
    if (record.believedState === undefined && record.ranHooks === undefined) return null;
    const agreed = [record.believedState !== undefined && "state", record.ranHooks !== undefined && "hooks"].filter(Boolean).join(" and ");
    return el("span", { className: "chip report-agrees", dataset: { report: "agrees" }, text: `✓ app's report agrees (${agreed})` });
  }
  const rows = [];
  const row = (term, ...value) => rows.push(el("div", { dataset: { term } }, el("dt", { text: term }), el("dd", {}, ...value)));
  if (divergence.state) {
    row("State", "believed ", stateBadge(model, divergence.state.believed), ", actual ", stateBadge(model, divergence.state.actual));
  } else if (record.believedState !== undefined) {
    row("State", "believed ", stateBadge(model, record.believedState), " (as the model: agrees)");
  }
  const hooks = divergence.hooks;
  if (hooks) {
    row("Hooks expected", hookList(hooks.expected));
    row("Hooks ran", hookList(hooks.ran));
    if (hooks.orderOnly) row("Order", el("strong", { text: "only the order differs" }));
    else {
      row("Missing", hookList(hooks.missing));
      row("Extra", hookList(hooks.extra));
    }
  } else if (record.ranHooks !== undefined) {
    row("Hooks ran", hookList(record.ranHooks), " (as the model: agrees)");
  }
  return el("div", { className: "divergence-detail", role: "group", "aria-label": "What the app reported, against the model" },
    el("p", { className: "divergence-title" }, el("strong", { text: "≠ The app's report differs from the model" })),
    el("dl", {}, ...rows));
}

/** An input for one declared parameter (boolean: a three-way select, since it may be left out). */
export function parameterInput(parameter, idPrefix) {
  const id = `${idPrefix}-${parameter.name}`;
  let input;
  if (parameter.type === "boolean") {
    input = el("select", { id, name: parameter.name, dataset: { type: "boolean" } },
      el("option", { value: "", text: parameter.required ? "choose" : "not given" }),
      el("option", { value: "true", text: "true" }),
      el("option", { value: "false", text: "false" }));
  } else {
    input = el("input", {
      id, name: parameter.name, autocomplete: "off", dataset: { type: parameter.type },
      type: parameter.type === "integer" || parameter.type === "number" ? "number" : "text",
      step: parameter.type === "number" ? "any" : undefined,
    });
  }
  if (parameter.required) input.required = true;
  return el("label", { className: "param", htmlFor: id },
    el("span", { text: parameter.name + (parameter.required ? "" : " (optional)") }), input);
}

/** The parameters filled in a form, typed as declared; blank optional ones are left out. */
export function readParameters(form, parameters) {
  const values = {};
  for (const parameter of parameters) {
    const input = form.elements.namedItem(parameter.name);
    if (!input || input.value === "") continue;
    if (parameter.type === "boolean") values[parameter.name] = input.value === "true";
    else if (parameter.type === "integer" || parameter.type === "number") values[parameter.name] = Number(input.value);
    else values[parameter.name] = input.value;
  }
  return values;
}
