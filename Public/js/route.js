// The page's address: what it shows lives in the URL's fragment, so that a reload or a
// shared link shows the same view.
//
//   #/fleet?model=ios-app
//   #/instances?model=ios-app&state=foreground&unexpected=true&label=run%3Dabc&finding=SIG&sort=-unexpected
//   #/instances/<id>?model=ios-app&…   (the chosen instance, the list's filters kept beside it)
//   #/trace?model=ios-app
//
// `label` repeats (each `key=value`, all must match, as the API's filter); `sort` is a list
// column, `-` before it for the largest first; `limit` the page's size. Defaults are left out.

export const views = ["fleet", "instances", "trace"];
export const pageSizes = ["50", "100", "500"];

/** The list's filters with every member present (the defaults where the URL says nothing). */
export function normalizeFilters(filters = {}) {
  return {
    state: filters.state ?? "",
    unexpected: !!filters.unexpected,
    incomplete: !!filters.incomplete,
    divergent: !!filters.divergent,
    labels: [...new Set(filters.labels ?? [])],
    finding: filters.finding ?? "",
    limit: pageSizes.includes(String(filters.limit)) ? String(filters.limit) : "100",
    sort: filters.sort || "id",
  };
}

export const sameFilters = (a, b) => JSON.stringify(normalizeFilters(a)) === JSON.stringify(normalizeFilters(b));

function decode(segment) {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** `{view, id, model, filters}` from a fragment (the page's own by default). */
export function parseRoute(hash = location.hash) {
  const text = hash.replace(/^#\/?/, "");
  const mark = text.indexOf("?");
  const path = mark < 0 ? text : text.slice(0, mark);
  const params = new URLSearchParams(mark < 0 ? "" : text.slice(mark + 1));
  const [view, ...rest] = path.split("/");
  const known = views.includes(view) ? view : "fleet";
  return {
    view: known,
    // An id may hold a slash: everything after the view is the id (each part percent-encoded).
    id: known === "instances" && rest.length && rest.join("/") !== "" ? rest.map(decode).join("/") : null,
    model: params.get("model"),
    filters: normalizeFilters({
      state: params.get("state") ?? "",
      unexpected: params.get("unexpected") === "true",
      incomplete: params.get("incomplete") === "true",
      divergent: params.get("divergent") === "true",
      labels: params.getAll("label").filter((label) => label.includes("=")),
      finding: params.get("finding") ?? "",
      limit: params.get("limit") ?? "100",
      sort: params.get("sort") ?? "id",
    }),
  };
}

/** The fragment for a route; the list's filters only on the instances view, defaults left out. */
export function formatRoute({ view, id = null, model = null, filters = {} }) {
  const params = new URLSearchParams();
  if (model) params.set("model", model);
  if (view === "instances") {
    const f = normalizeFilters(filters);
    if (f.state) params.set("state", f.state);
    if (f.unexpected) params.set("unexpected", "true");
    if (f.incomplete) params.set("incomplete", "true");
    if (f.divergent) params.set("divergent", "true");
    for (const label of f.labels) params.append("label", label);
    if (f.finding) params.set("finding", f.finding);
    if (f.limit !== "100") params.set("limit", f.limit);
    if (f.sort !== "id") params.set("sort", f.sort);
  }
  const path = view === "instances" && id !== null ? `instances/${encodeURIComponent(id)}` : view;
  const query = params.toString();
  return `#/${path}${query ? `?${query}` : ""}`;
}
