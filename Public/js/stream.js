// The page's one EventSource on /v1/stream, filtered to the model on screen.
//
// The browser resumes a dropped connection by itself (Last-Event-ID); when the
// server refuses or ends the stream for good (401, 503, an overflow it cannot
// replay, a change of token or model) a new one is opened with `lastEventId` set
// to the last sequence number seen, so nothing is missed and nothing repeats.
// Records are handed on in batches, so a burst of thousands costs one update.

import { askForToken, onTokenChange, storedToken } from "./api.js";

const recordTypes = ["record", "action", "relaunch", "dropped", "created", "deleted"];
/** How long a hidden page keeps its stream (a quick look at another tab costs nothing). */
const hiddenGrace = 30_000;

export class Stream {
  /**
   * `onBatch(records)` gets committed records in sequence order; `onResync(reason)`
   * is called when what was shown may have missed records (a gap, a reset, a new
   * connection) and should be reloaded; `onStatus(state, text)` tracks the connection.
   */
  constructor({ onBatch, onResync, onStatus }) {
    this.onBatch = onBatch;
    this.onResync = onResync;
    this.onStatus = onStatus;
    this.source = null;
    this.model = null;
    this.lastSequence = null;
    this.queue = [];
    this.flushTimer = null;
    this.retryTimer = null;
    this.retryDelay = 1000;
    this.paused = false;
    this.hiddenTimer = null;
    onTokenChange(() => {
      if (this.model && !this.paused) this.open(this.model, { resume: true });
    });
    // A page in the background gives its connection back (browsers allow six per server
    // over HTTP/1.1, a stream holds one for good): at once when it is frozen or put in the
    // back/forward cache, after a while when it is only hidden. Back in front, it resumes
    // after the last record it saw.
    addEventListener("pagehide", () => this.pause());
    addEventListener("pageshow", () => this.unpause());
    document.addEventListener("freeze", () => this.pause());
    document.addEventListener("resume", () => this.unpause());
    document.addEventListener("visibilitychange", () => {
      clearTimeout(this.hiddenTimer);
      if (document.visibilityState === "hidden") this.hiddenTimer = setTimeout(() => this.pause(), hiddenGrace);
      else this.unpause();
    });
  }

  pause() {
    if (this.paused || !this.model) return;
    this.paused = true;
    this.close();
    this.onStatus("paused", "Paused in the background");
  }

  unpause() {
    if (!this.paused) return;
    this.paused = false;
    this.open(this.model, { resume: true });
  }

  /** Listens to `model`'s records; `resume` continues after the last one seen. */
  open(model, { resume = false } = {}) {
    this.close();
    this.paused = false;
    if (this.model !== model) {
      this.model = model;
      this.lastSequence = null;
      resume = false;
    }
    const params = new URLSearchParams({ model });
    if (resume && this.lastSequence !== null) params.set("lastEventId", String(this.lastSequence));
    const token = storedToken();
    if (token) params.set("token", token);
    const source = new EventSource(`/v1/stream?${params}`);
    this.source = source;
    this.onStatus("connecting", "Connecting…");
    let everOpen = false;
    source.addEventListener("open", () => {
      this.retryDelay = 1000;
      this.onStatus("live", "Live");
      // Whatever happened while no stream was open is reloaded; the stream resumes from there.
      this.onResync(everOpen ? "reconnected" : "connected");
      everOpen = true;
    });
    source.addEventListener("error", () => {
      if (source !== this.source) return;
      if (source.readyState === EventSource.CONNECTING) {
        this.onStatus("connecting", "Reconnecting…");
        return;
      }
      this.source = null;
      this.diagnose(model);
    });
    for (const type of recordTypes) {
      source.addEventListener(type, (event) => this.receive(event));
    }
    source.addEventListener("gap", (event) => {
      this.track(event);
      this.onResync("gap");
    });
    source.addEventListener("reset", (event) => {
      this.track(event);
      this.onResync("reset");
    });
    // The server ends the stream after an overflow; the browser reconnects with the id it carried.
    source.addEventListener("overflow", (event) => this.track(event));
  }

  close() {
    clearTimeout(this.retryTimer);
    if (this.source) {
      this.source.close();
      this.source = null;
    }
  }

  track(event) {
    const id = Number(event.lastEventId);
    if (Number.isFinite(id) && event.lastEventId !== "") this.lastSequence = id;
  }

  receive(event) {
    this.track(event);
    let record;
    try {
      record = JSON.parse(event.data);
    } catch {
      return;
    }
    this.queue.push(record);
    if (this.flushTimer === null) {
      this.flushTimer = setTimeout(() => this.flush(), 40);
    }
  }

  flush() {
    this.flushTimer = null;
    const batch = this.queue;
    this.queue = [];
    if (batch.length) this.onBatch(batch);
  }

  /** The stream was refused or ended for good: find out why with one plain request. */
  async diagnose(model) {
    const params = new URLSearchParams({ model });
    const token = storedToken();
    if (token) params.set("token", token);
    const abort = new AbortController();
    let status = 0;
    try {
      const response = await fetch(`/v1/stream?${params}`, { signal: abort.signal, cache: "no-store" });
      status = response.status;
    } catch {
      status = 0;
    } finally {
      abort.abort();
    }
    if (model !== this.model) return;
    if (status === 401) {
      this.onStatus("offline", "Needs token");
      const given = await askForToken("Watching this server live needs its token.");
      // A new token reopens the stream through onTokenChange.
      if (!given) this.onStatus("offline", "Not live: no token");
      return;
    }
    this.onStatus("offline", status ? `Not live (HTTP ${status}); retrying` : "Offline; retrying");
    this.retryTimer = setTimeout(() => this.open(model, { resume: true }), this.retryDelay);
    this.retryDelay = Math.min(this.retryDelay * 2, 30000);
  }
}
