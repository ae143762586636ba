// Requests to the lifecycled API, and the token they may need.
//
// The token is asked for when the server refuses a request with 401 and kept in
// sessionStorage: for this tab only, gone when it closes. Requests send it as
// `Authorization: Bearer`; the one EventSource, which cannot send headers, as the
// `token` query parameter (see stream.js).

const tokenKey = "lifecycled.token";

/** A refused or failed request, with the problem the server sent (RFC 9457) when it sent one. */
export class APIError extends Error {
  constructor(status, problem, path) {
    const detail = problem?.detail || problem?.title || (status ? `HTTP ${status}` : "no answer from the server");
    super(detail);
    this.status = status;
    this.problem = problem;
    this.path = path;
  }
}

export function storedToken() {
  return sessionStorage.getItem(tokenKey);
}

function storeToken(token) {
  if (token) sessionStorage.setItem(tokenKey, token);
  else sessionStorage.removeItem(tokenKey);
  for (const listener of tokenListeners) listener(token);
}

const tokenListeners = new Set();

/** Calls `listener(token)` whenever the token is set or forgotten. */
export function onTokenChange(listener) {
  tokenListeners.add(listener);
}

let pendingPrompt = null;

/**
 * Asks for the token in the page's dialog; resolves to the token, or null when the
 * person cancels. Requests refused at the same time share one prompt.
 */
export function askForToken(reason) {
  if (pendingPrompt) return pendingPrompt;
  const dialog = document.getElementById("token-dialog");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  const cancel = document.getElementById("token-cancel");
  const forget = document.getElementById("token-forget");
  document.getElementById("token-reason").textContent = reason;
  forget.hidden = !storedToken();
  input.value = "";
  pendingPrompt = new Promise((resolve) => {
    const finish = (token) => {
      form.removeEventListener("submit", submit);
      cancel.removeEventListener("click", dismiss);
      forget.removeEventListener("click", drop);
      dialog.removeEventListener("cancel", dismiss);
      if (dialog.open) dialog.close();
      pendingPrompt = null;
      resolve(token);
    };
    const submit = (event) => {
      event.preventDefault();
      const token = input.value.trim();
      if (!token) return;
      storeToken(token);
      finish(token);
    };
    const dismiss = (event) => {
      event.preventDefault();
      finish(null);
    };
    const drop = () => {
      storeToken(null);
      finish(null);
    };
    form.addEventListener("submit", submit);
    cancel.addEventListener("click", dismiss);
    forget.addEventListener("click", drop);
    dialog.addEventListener("cancel", dismiss);
  });
  dialog.showModal();
  input.focus();
  return pendingPrompt;
}

/** Opens the token dialog on request (the header's Token button). */
export function editToken() {
  return askForToken(storedToken() ? "Replace or forget the token this tab uses." : "Give the token this server was started with.");
}

async function readProblem(response) {
  const type = response.headers.get("content-type") || "";
  if (!type.includes("json")) return null;
  try {
    return await response.json();
  } catch {
    return null;
  }
}

/**
 * Sends one request; resolves to `{status, data, headers}` for a 2xx answer and
 * throws APIError otherwise. A 401 asks for the token and tries again once it is given.
 * `accept` names which statuses besides 2xx resolve instead of throwing (e.g. [409]).
 */
export async function request(path, { method = "GET", json, text = false, accept = [], signal } = {}) {
  for (;;) {
    const headers = { Accept: text ? "*/*" : "application/json" };
    const token = storedToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    let body;
    if (json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(json);
    }
    let response;
    try {
      response = await fetch(path, { method, headers, body, signal, cache: "no-store" });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new APIError(0, null, path);
    }
    if (response.status === 401) {
      const problem = await readProblem(response);
      const wrong = (response.headers.get("www-authenticate") || "").includes("invalid_token");
      const reason = wrong
        ? "The token was not accepted. Give the token this server was started with."
        : `${method === "GET" ? "Reading" : "Changing"} data on this server needs its token.`;
      const given = await askForToken(reason);
      if (given) continue;
      throw new APIError(401, problem, path);
    }
    const ok = response.ok || accept.includes(response.status);
    if (!ok) throw new APIError(response.status, await readProblem(response), path);
    if (response.status === 204) return { status: 204, data: null, headers: response.headers };
    const data = text ? await response.text() : await readProblem(response);
    return { status: response.status, data, headers: response.headers };
  }
}

export const getJSON = async (path, options) => (await request(path, options)).data;

/** Encodes one path segment (instance ids, model and scenario names). */
export const seg = (value) => encodeURIComponent(value);
