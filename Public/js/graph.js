// The model's graph as Graphviz drew it (GET /v1/models/{model}/graph.svg), inlined
// so that its nodes (`state-<name>`) and edges (`edge-<row id>`) can be styled.
//
// The page shows the same graph up to three times (fleet, instance, trace), so each
// copy's ids move to data attributes (`data-state`, `data-row`): ids must be unique
// in a document.

import { request, seg } from "./api.js";

const svgText = new Map();

/** The SVG source of a model's graph, fetched once per model and page. */
export function graphSource(model) {
  if (!svgText.has(model)) {
    const load = request(`/v1/models/${seg(model)}/graph.svg`, { text: true }).then((r) => r.data);
    load.catch(() => svgText.delete(model));
    svgText.set(model, load);
  }
  return svgText.get(model);
}

const svgNS = "http://www.w3.org/2000/svg";
/**
 * The smallest size, in CSS pixels, edge labels are drawn at: the graph is never scaled
 * down further, its region scrolls instead (11 px is about the smallest readable text).
 */
const smallestLabel = 11.5;

/** One inlined copy of a model's graph in `container`. */
export class Graph {
  constructor(container, label) {
    this.container = container;
    this.label = label;
    // The region scrolls when the graph is wider than it: reachable from the keyboard.
    container.tabIndex = 0;
    container.setAttribute("role", "region");
    container.setAttribute("aria-label", `${label} graph (scrolls when wider than the window)`);
    // Said in words when the graph is wider than its region (the rest is out of sight), above
    // it so that a phone shows it before the one node in view; with a button that scales the
    // whole graph to the region's width, and back.
    this.fitted = false;
    this.hintText = document.createElement("span");
    this.fitButton = document.createElement("button");
    this.fitButton.type = "button";
    this.fitButton.className = "quiet small fit-button";
    this.fitButton.setAttribute("aria-pressed", "false");
    this.fitButton.addEventListener("click", () => this.fit(!this.fitted));
    this.hint = document.createElement("p");
    this.hint.className = "scroll-hint muted";
    this.hint.append(this.hintText, " ", this.fitButton);
    this.hint.hidden = true;
    container.before(this.hint);
    this.updateHint();
    new ResizeObserver(() => this.updateHint()).observe(container);
    this.model = null;
    this.svg = null;
    this.nodes = new Map();
    this.edges = new Map();
  }

  /** Loads `model`'s graph; on failure shows why and leaves the graph empty. */
  async load(model) {
    this.model = model;
    this.nodes = new Map();
    this.edges = new Map();
    this.svg = null;
    this.container.replaceChildren(message("Loading the graph…"));
    let source;
    try {
      source = await graphSource(model);
    } catch (error) {
      if (this.model !== model) return false;
      const why = error.status === 404
        ? `This server does not draw graphs (GET /v1/models/${model}/graph.svg answered 404). The tables show the same figures.`
        : `The graph could not be loaded: ${error.message}`;
      this.container.replaceChildren(message(why, "error"));
      return false;
    }
    if (this.model !== model) return false;
    const parsed = new DOMParser().parseFromString(source, "image/svg+xml");
    const root = parsed.documentElement;
    if (root.nodeName !== "svg" || parsed.querySelector("parsererror")) {
      this.container.replaceChildren(message("The server sent a graph that is not SVG.", "error"));
      return false;
    }
    const svg = document.importNode(root, true);
    sanitize(svg);
    // Scales with its box; the viewBox keeps the proportions.
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `${this.label}: graph of model ${model}`);
    svg.setAttribute("focusable", "false");
    // Room around the drawing for the badges put on nodes at its edges.
    const [x, y, width, height] = (svg.getAttribute("viewBox") || "0 0 1 1").split(/[\s,]+/).map(Number);
    svg.setAttribute("viewBox", `${x - 14} ${y - 14} ${width + 28} ${height + 28}`);
    svg.classList.toggle("wide", width > 2 * height);
    // Never narrower than the width at which edge labels are `smallestLabel` pixels tall.
    const labelSize = Math.min(...[...svg.querySelectorAll("g.edge text")].map((t) => Number(t.getAttribute("font-size")) || 14), 14);
    this.readableWidth = `${Math.ceil((width + 28) * smallestLabel / labelSize)}px`;
    svg.style.minWidth = this.fitted ? "0" : this.readableWidth;
    for (const g of svg.querySelectorAll("g[id]")) {
      const id = g.getAttribute("id");
      if (id.startsWith("state-")) {
        const name = id.slice("state-".length);
        g.dataset.state = name;
        this.nodes.set(name, g);
      } else if (id.startsWith("edge-")) {
        const row = id.slice("edge-".length);
        g.dataset.row = row;
        this.edges.set(row, g);
      }
      g.removeAttribute("id");
    }
    stackLoops(this.edges.values());
    // Badges go in a layer of their own, last, so that no edge is drawn over them.
    this.badges = document.createElementNS(svgNS, "g");
    this.badges.classList.add("badges");
    (svg.querySelector("g.graph") ?? svg).append(this.badges);
    this.svg = svg;
    this.container.replaceChildren(svg);
    return true;
  }

  /**
   * `true` scales the whole graph to its region's width (its labels may then be smaller
   * than readable); `false` draws it at its readable size again, the region scrolling.
   */
  fit(on) {
    this.fitted = on;
    if (this.svg) {
      this.svg.style.minWidth = on ? "0" : this.readableWidth;
      this.svg.classList.toggle("fitted", on);
    }
    this.updateHint();
    // Back at its readable size, the state last brought into view is brought back.
    if (!on && this.revealed) this.reveal(this.revealed);
  }

  updateHint() {
    const wider = this.container.scrollWidth > this.container.clientWidth + 1;
    this.hint.hidden = !wider && !this.fitted;
    this.fitButton.setAttribute("aria-pressed", String(this.fitted));
    this.hintText.textContent = this.fitted
      ? "The whole graph, scaled to the window's width."
      : "The graph is wider than the window: scroll it sideways (or focus it and use the arrow keys).";
    this.fitButton.textContent = this.fitted ? "Readable size" : "Fit to width";
  }

  /**
   * Scrolls the graph's region, when it scrolls, so that `state`'s node is in view; false
   * when it could not tell where the node is (no such node, or the view is hidden).
   */
  reveal(state) {
    this.revealed = state;
    const node = this.nodes.get(state);
    const box = node?.getBoundingClientRect();
    if (!box?.width) return false;
    if (this.container.scrollWidth <= this.container.clientWidth) return true;
    const region = this.container.getBoundingClientRect();
    const centre = box.left - region.left + this.container.scrollLeft + box.width / 2;
    this.container.scrollLeft = Math.max(0, centre - this.container.clientWidth / 2);
    return true;
  }

  /** Sets `className` on exactly the given states' nodes. */
  markStates(className, names) {
    const wanted = new Set(names);
    for (const [name, node] of this.nodes) node.classList.toggle(className, wanted.has(name));
  }

  /** Sets `className` on exactly the given rows' edges. */
  markRows(className, rows) {
    const wanted = new Set(rows);
    for (const [row, edge] of this.edges) edge.classList.toggle(className, wanted.has(row));
  }

  /**
   * A small labelled badge at one corner of a state's node (`corner`: "ne", "se", "sw", "nw");
   * `text` null removes it; `empty` shows it muted (a count of zero).
   */
  badge(state, kind, corner, text, title, { empty = false } = {}) {
    const node = this.nodes.get(state);
    if (!node) return;
    let badge = this.badges.querySelector(`g.badge.${kind}[data-state="${CSS.escape(state)}"]`);
    if (text === null || text === undefined) {
      badge?.remove();
      return;
    }
    if (!badge) {
      badge = document.createElementNS(svgNS, "g");
      badge.classList.add("badge", kind);
      badge.dataset.state = state;
      const tooltip = document.createElementNS(svgNS, "title");
      const rect = document.createElementNS(svgNS, "rect");
      const label = document.createElementNS(svgNS, "text");
      badge.append(tooltip, rect, label);
      this.badges.append(badge);
    }
    badge.classList.toggle("empty", empty);
    const [tooltip, rect, label] = badge.children;
    tooltip.textContent = title;
    label.textContent = text;
    const box = shapeBox(node);
    const width = 10 + 8 * String(text).length;
    const height = 18;
    const x = corner === "sw" || corner === "nw" ? box.x - width / 2 : box.x + box.width - width / 2;
    const y = corner === "ne" || corner === "nw" ? box.y - height / 2 : box.y + box.height - height / 2;
    rect.setAttribute("x", x);
    rect.setAttribute("y", y);
    rect.setAttribute("width", width);
    rect.setAttribute("height", height);
    rect.setAttribute("rx", 7);
    label.setAttribute("x", x + width / 2);
    label.setAttribute("y", y + height - 5);
    label.setAttribute("text-anchor", "middle");
  }
}

function message(text, kind = "muted") {
  const p = document.createElement("p");
  p.className = `graph-message ${kind}`;
  p.textContent = text;
  return p;
}

/** Nothing in the graph may run or load anything, nor carry inline styles the CSP refuses. */
function sanitize(svg) {
  for (const element of svg.querySelectorAll("script, foreignObject, style")) element.remove();
  for (const element of [svg, ...svg.querySelectorAll("*")]) {
    for (const attribute of [...element.attributes]) {
      const name = attribute.name.toLowerCase();
      if (name.startsWith("on") || name === "style" || ((name === "href" || name === "xlink:href") && !attribute.value.startsWith("#"))) {
        element.removeAttribute(attribute.name);
      }
    }
  }
  // Graphviz's <a> wrappers (from URL attributes) would be links to nowhere.
  for (const anchor of svg.querySelectorAll("a")) anchor.replaceWith(...anchor.childNodes);
}

/**
 * A state's self-loops are stacked, each around the ones before, so an outer loop's line
 * crosses the labels of the inner ones. Drawn last and outermost first, each label (with
 * its halo, see app.css) is painted over the loops around it.
 */
function stackLoops(edges) {
  const loops = [...edges].filter((edge) => {
    const [from, to] = (edge.querySelector(":scope > title")?.textContent ?? "").split("->");
    return from !== undefined && from === to;
  });
  const area = (edge) => {
    const box = shapeBox(edge);
    return box.width * box.height;
  };
  for (const loop of loops.sort((a, b) => area(b) - area(a))) loop.parentNode.append(loop);
}

/** The box of a node's shape, read from its geometry (works while the view is hidden). */
function shapeBox(node) {
  let minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
  const add = (x, y) => {
    minX = Math.min(minX, x); maxX = Math.max(maxX, x);
    minY = Math.min(minY, y); maxY = Math.max(maxY, y);
  };
  for (const shape of node.querySelectorAll(":scope > ellipse, :scope > polygon, :scope > path, :scope > polyline")) {
    if (shape.localName === "ellipse") {
      const cx = +shape.getAttribute("cx"), cy = +shape.getAttribute("cy");
      const rx = +shape.getAttribute("rx"), ry = +shape.getAttribute("ry");
      add(cx - rx * 0.75, cy - ry);
      add(cx + rx * 0.75, cy + ry);
    } else {
      const text = shape.getAttribute("points") || shape.getAttribute("d") || "";
      const numbers = text.match(/-?\d+(\.\d+)?/g) || [];
      for (let i = 0; i + 1 < numbers.length; i += 2) add(+numbers[i], +numbers[i + 1]);
    }
  }
  if (minX === Infinity) return { x: 0, y: 0, width: 0, height: 0 };
  return { x: minX, y: minY, width: maxX - minX, height: maxY - minY };
}
