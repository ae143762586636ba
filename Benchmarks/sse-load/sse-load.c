/*
 * sse-load: holds many server-sent-event subscribers on one 127.0.0.1 server and measures,
 * for every subscriber's receipt of every event, the latency from the moment the POST that
 * made the event was sent and from the moment that POST was acknowledged.
 *
 * One process, one thread, one epoll loop, non-blocking sockets. Two publishers:
 *   lifecycled  PUT an instance per poster connection, cold-start it, then POST
 *               willResignActive / didBecomeActive alternately (each always accepted in
 *               foreground); the event's sequence comes from the answer's `"sequence":N`.
 *   nchan       POST a synthetic record-like JSON message of --message-bytes that embeds
 *               `"sequence":N`, N chosen here (1, 2, 3, ...).
 * Subscribers take the sequence from each event's `data:` JSON with one rule for both
 * servers: the first `"sequence":N` in the event's data. With --sub-port they subscribe to
 * another server than the one posted to (another replica of one lifecycled on PostgreSQL).
 *
 * Per subscriber it counts missing and duplicate deliveries and deliveries out of order:
 * lifecycled's sequences are its own, so each stream must ascend; nchan's are the loader's,
 * so there an event must not come after one whose POST was answered before it was sent.
 *
 * Phases, all with the same subscribers: connect (gradually), warm-up at --rate, the measured
 * rate window, then (with --max-seconds) a max-rate window where --inflight poster
 * connections post again as soon as they are answered. Each measured window prints one
 * `sse-result key=value ...` line and a human summary. `--self-test` checks the incremental
 * HTTP/chunked/SSE parsers against every split of a crafted stream.
 *
 * Bounded: it only ever connects to 127.0.0.1 and always exits (alarm at a deadline).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef int64_t ns_t;

static ns_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ns_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sse-load: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* ------------------------------------------------------------------ options */

enum mode { MODE_LIFECYCLED, MODE_NCHAN };

static struct {
    const char *host;
    int port;
    int sub_port;           /* subscribers' server; 0: --port (another replica of it, say) */
    enum mode mode;
    const char *sub_path;
    const char *pub_path;
    const char *instance_prefix;
    const char *label;
    int subscribers;
    double rate;            /* events/s; 0 means max */
    double seconds;
    double warmup;
    double max_seconds;     /* extra max-rate window after the rate window; 0: none */
    int inflight;           /* poster connections in max mode */
    int rate_posters;       /* poster connections in rate mode */
    int message_bytes;
    int connect_concurrency;
    double drain;           /* longest wait for late deliveries after a window */
    double connect_timeout;
    int pids[64];
    int npids;
    long max_deliveries;
} opt = {
    .host = "127.0.0.1", .port = 0, .mode = MODE_NCHAN, .subscribers = 10000, .rate = 10,
    .seconds = 30, .warmup = 3, .max_seconds = 0, .inflight = 4, .rate_posters = 4,
    .message_bytes = 350, .connect_concurrency = 100, .drain = 5, .connect_timeout = 120,
    /* Room for 10,000 subscribers at 1,000 events/s for 12 s; reserved, not committed. A
       delivery beyond it is not recorded, and the run is not to be reported (sse-bench.sh
       checks dropped_deliveries). */
    .max_deliveries = 120000000L,
};

static void usage(void) {
    fprintf(stderr,
        "usage: sse-load --port N [options]\n"
        "  --mode lifecycled|nchan   publisher protocol (default nchan)\n"
        "  --host 127.0.0.1          the only host accepted\n"
        "  --sub-port N              subscribers connect here, posters to --port (default --port)\n"
        "  --sub-path PATH           subscriber path (default /v1/stream or /sub)\n"
        "  --pub-path PATH           nchan: publisher path (default /pub);\n"
        "                            lifecycled: instances prefix (default /v1/instances/)\n"
        "  --instance-prefix S       lifecycled instance ids S0, S1, ... (default sse-bench-)\n"
        "  --subscribers N           default 10000\n"
        "  --rate R|max              events/s of the measured window (default 10)\n"
        "  --seconds S               measured window (default 30)\n"
        "  --warmup S                posting at --rate before measuring (default 3)\n"
        "  --max-seconds S           then a max-rate window of S seconds (default 0: none)\n"
        "  --inflight K              poster connections at max rate (default 4)\n"
        "  --message-bytes B         nchan message size (default 350)\n"
        "  --connect-concurrency C   subscriber connects in flight (default 100)\n"
        "  --drain S                 longest wait for late deliveries (default 5)\n"
        "  --pid P[,P...]            server processes for CPU and memory (repeatable)\n"
        "  --label NAME              name in the output (default the mode)\n"
        "  --self-test               check the parsers and exit\n");
    exit(2);
}

/* ------------------------------------------------------------------ HTTP response parser */

enum { RESP_MORE = 0, RESP_DONE = 1, RESP_ERR = -1 };
enum rp_state {
    RP_HEAD, RP_RAW, RP_LENGTH, RP_CHUNK_SIZE, RP_CHUNK_EXT, RP_CHUNK_SIZE_LF, RP_CHUNK_DATA,
    RP_CHUNK_DATA_CR, RP_CHUNK_DATA_LF, RP_TRAILER, RP_FINISHED
};
#define HEAD_MAX 4096

struct http_resp {
    char *head;            /* allocated only while the head is being read */
    uint16_t head_len;
    uint8_t state;
    uint8_t trailer_empty; /* the trailer line so far is empty */
    uint8_t chunked, conn_close, event_stream, size_digits;
    int16_t status;
    int64_t remaining;     /* body bytes or chunk bytes left */
};

typedef void (*body_fn)(void *ctx, const char *p, size_t n);

static void resp_reset(struct http_resp *r) {
    free(r->head);
    memset(r, 0, sizeof *r);
    r->state = RP_HEAD;
}

static int header_is(const char *line, size_t len, const char *name, const char **value, size_t *vlen) {
    size_t n = strlen(name);
    if (len <= n || line[n] != ':' || strncasecmp(line, name, n) != 0) return 0;
    const char *v = line + n + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
    *value = v;
    *vlen = (size_t)(end - v);
    return 1;
}

static int contains_token(const char *v, size_t n, const char *token) {
    size_t t = strlen(token);
    for (size_t i = 0; i + t <= n; i++)
        if (strncasecmp(v + i, token, t) == 0) return 1;
    return 0;
}

/* The head is complete (it ends with CRLF CRLF): status line and the headers we use. */
static int resp_parse_head(struct http_resp *r) {
    const char *p = r->head, *end = r->head + r->head_len;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol || end - p < 12 || strncmp(p, "HTTP/1.", 7) != 0) return RESP_ERR;
    if (!isdigit((unsigned char)p[9]) || !isdigit((unsigned char)p[10]) || !isdigit((unsigned char)p[11])) return RESP_ERR;
    r->status = (int16_t)((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
    int64_t length = -1;
    for (p = eol + 1; p < end; ) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) break;
        size_t len = (size_t)(eol - p);
        if (len && p[len - 1] == '\r') len--;
        const char *v; size_t vl;
        if (header_is(p, len, "content-type", &v, &vl)) r->event_stream = vl >= 17 && strncasecmp(v, "text/event-stream", 17) == 0;
        else if (header_is(p, len, "transfer-encoding", &v, &vl)) r->chunked = contains_token(v, vl, "chunked");
        else if (header_is(p, len, "connection", &v, &vl)) r->conn_close = contains_token(v, vl, "close");
        else if (header_is(p, len, "content-length", &v, &vl)) {
            length = 0;
            for (size_t i = 0; i < vl && isdigit((unsigned char)v[i]); i++) length = length * 10 + (v[i] - '0');
        }
        p = eol + 1;
    }
    free(r->head);
    r->head = NULL;
    if (r->status == 204 || r->status == 304) { r->state = RP_FINISHED; return RESP_DONE; }
    if (r->chunked) { r->state = RP_CHUNK_SIZE; r->remaining = 0; r->size_digits = 0; }
    else if (length >= 0) { r->state = length ? RP_LENGTH : RP_FINISHED; r->remaining = length; if (!length) return RESP_DONE; }
    else { r->state = RP_RAW; r->conn_close = 1; }
    return RESP_MORE;
}

/*
 * Feeds bytes of one response. Body bytes (de-chunked) go to `body`. `on_head` is called
 * once the head is parsed (a non-zero return aborts). Returns RESP_DONE when the response
 * ended (and *used says how much of p it took), RESP_MORE when it wants more, RESP_ERR.
 */
static int resp_feed(struct http_resp *r, const char *p, size_t n, size_t *used,
                     int (*on_head)(void *), body_fn body, void *ctx) {
    size_t i = 0;
    while (i < n) {
        switch (r->state) {
        case RP_HEAD: {
            if (!r->head) { r->head = malloc(HEAD_MAX); if (!r->head) die("out of memory"); r->head_len = 0; }
            size_t take = n - i, room = HEAD_MAX - r->head_len;
            /* copy up to the end of the head only: scan for CRLFCRLF (or LFLF) as we copy */
            size_t k = 0;
            int done = 0;
            while (k < take) {
                if (k >= room) return RESP_ERR;
                char c = p[i + k];
                r->head[r->head_len++] = c;
                k++;
                if (c == '\n' && r->head_len >= 2) {
                    const char *h = r->head + r->head_len;
                    if (h[-2] == '\n' || (r->head_len >= 4 && h[-2] == '\r' && h[-3] == '\n' && h[-4] == '\r')) { done = 1; break; }
                }
            }
            i += k;
            if (!done) break;
            int rc = resp_parse_head(r);
            if (rc == RESP_ERR) return RESP_ERR;
            if (on_head && on_head(ctx) != 0) return RESP_ERR;
            if (rc == RESP_DONE) { *used = i; return RESP_DONE; }
            break;
        }
        case RP_RAW:
            body(ctx, p + i, n - i);
            i = n;
            break;
        case RP_LENGTH: {
            size_t take = n - i;
            if ((int64_t)take > r->remaining) take = (size_t)r->remaining;
            body(ctx, p + i, take);
            i += take;
            r->remaining -= (int64_t)take;
            if (r->remaining == 0) { r->state = RP_FINISHED; *used = i; return RESP_DONE; }
            break;
        }
        case RP_CHUNK_SIZE: {
            char c = p[i++];
            int d = isdigit((unsigned char)c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
            if (d >= 0) {
                if (++r->size_digits > 15) return RESP_ERR;
                r->remaining = r->remaining * 16 + d;
            } else if (!r->size_digits) return RESP_ERR;
            else if (c == '\r') r->state = RP_CHUNK_SIZE_LF;
            else if (c == '\n') goto size_done;
            else if (c == ';' || c == ' ' || c == '\t') r->state = RP_CHUNK_EXT;
            else return RESP_ERR;
            break;
        }
        case RP_CHUNK_EXT:
            if (p[i++] == '\n') goto size_done;
            break;
        case RP_CHUNK_SIZE_LF:
            if (p[i++] != '\n') return RESP_ERR;
        size_done:
            r->size_digits = 0;
            if (r->remaining == 0) { r->state = RP_TRAILER; r->trailer_empty = 1; }
            else r->state = RP_CHUNK_DATA;
            break;
        case RP_CHUNK_DATA: {
            size_t take = n - i;
            if ((int64_t)take > r->remaining) take = (size_t)r->remaining;
            body(ctx, p + i, take);
            i += take;
            r->remaining -= (int64_t)take;
            if (r->remaining == 0) r->state = RP_CHUNK_DATA_CR;
            break;
        }
        case RP_CHUNK_DATA_CR: {
            char c = p[i++];
            if (c == '\r') r->state = RP_CHUNK_DATA_LF;
            else if (c == '\n') r->state = RP_CHUNK_SIZE;
            else return RESP_ERR;
            break;
        }
        case RP_CHUNK_DATA_LF:
            if (p[i++] != '\n') return RESP_ERR;
            r->state = RP_CHUNK_SIZE;
            break;
        case RP_TRAILER: {
            char c = p[i++];
            if (c == '\n') {
                if (r->trailer_empty) { r->state = RP_FINISHED; *used = i; return RESP_DONE; }
                r->trailer_empty = 1;
            } else if (c != '\r') r->trailer_empty = 0;
            break;
        }
        case RP_FINISHED:
            *used = i;
            return RESP_DONE;
        }
    }
    *used = i;
    return RESP_MORE;
}

/* ------------------------------------------------------------------ SSE parser */

enum { SSE_LINE_START, SSE_FIELD, SSE_VALUE_FIRST, SSE_VALUE, SSE_SKIP };
enum { F_OTHER, F_DATA, F_EVENT };
static const char SEQ_KEY[] = "\"sequence\":";
#define SEQ_KEY_LEN 11

struct sse {
    uint8_t st, prev_cr, field, flen;
    char fname[6];
    uint8_t match;     /* bytes of SEQ_KEY matched in this event's data */
    uint8_t num;       /* 0: not in a number, 1: after the key (spaces allowed), 2: in digits */
    uint8_t has_data, has_seq;
    uint8_t ev_len;
    char ev[13];
    int64_t acc;
};

/* What a subscriber's parser reports: one dispatched event. */
typedef void (*event_fn)(void *ctx, int has_seq, int64_t seq, const char *event, size_t event_len);

static void sse_end_line(struct sse *s, event_fn on_event, void *ctx) {
    if (s->st == SSE_LINE_START) { /* a blank line dispatches the event */
        if (s->has_data) on_event(ctx, s->has_seq, s->acc, s->ev, s->ev_len);
        s->has_data = s->has_seq = 0;
        s->ev_len = 0;
        s->match = s->num = 0;
        s->acc = 0;
        return;
    }
    if (s->st == SSE_FIELD) { /* a field name with no colon: empty value */
        if (s->flen == 4 && memcmp(s->fname, "data", 4) == 0) s->field = F_DATA;
        else if (s->flen == 5 && memcmp(s->fname, "event", 5) == 0) { s->field = F_EVENT; s->ev_len = 0; }
        else s->field = F_OTHER;
    }
    if (s->field == F_DATA) {
        s->has_data = 1;
        if (s->num == 2 && !s->has_seq) s->has_seq = 1;
        s->match = 0;
        s->num = 0;
    }
    s->st = SSE_LINE_START;
    s->field = F_OTHER;
}

static inline void sse_data_byte(struct sse *s, char c) {
    if (s->has_seq) return;
    if (s->num == 1) {
        if (c == ' ') return;
        if (c >= '0' && c <= '9') { s->num = 2; s->acc = c - '0'; return; }
        s->num = 0;
    } else if (s->num == 2) {
        if (c >= '0' && c <= '9') { s->acc = s->acc * 10 + (c - '0'); return; }
        s->has_seq = 1;
        s->num = 0;
        return;
    }
    if (c == SEQ_KEY[s->match]) {
        if (++s->match == SEQ_KEY_LEN) { s->match = 0; s->num = 1; s->acc = 0; }
    } else {
        s->match = c == '"'; /* the key's only border is its opening quote */
    }
}

static void sse_feed(struct sse *s, const char *p, size_t n, event_fn on_event, void *ctx) {
    const char *end = p + n;
    while (p < end) {
        char c = *p;
        if (s->prev_cr) {
            s->prev_cr = 0;
            if (c == '\n') { p++; continue; }
        }
        if (c == '\r' || c == '\n') {
            sse_end_line(s, on_event, ctx);
            s->prev_cr = c == '\r';
            p++;
            continue;
        }
        switch (s->st) {
        case SSE_LINE_START:
            if (c == ':') { s->st = SSE_SKIP; break; }
            s->st = SSE_FIELD;
            s->flen = 0;
            /* fall through */
        case SSE_FIELD:
            if (c == ':') {
                if (s->flen == 4 && memcmp(s->fname, "data", 4) == 0) s->field = F_DATA;
                else if (s->flen == 5 && memcmp(s->fname, "event", 5) == 0) { s->field = F_EVENT; s->ev_len = 0; }
                else s->field = F_OTHER;
                s->st = SSE_VALUE_FIRST;
            } else if (s->flen < sizeof s->fname) {
                s->fname[s->flen++] = c;
            } else {
                s->flen = sizeof s->fname; /* too long to be a field we use */
            }
            break;
        case SSE_VALUE_FIRST:
            s->st = s->field == F_OTHER ? SSE_SKIP : SSE_VALUE;
            if (c == ' ') break;
            if (s->field == F_OTHER) break;
            /* fall through */
        case SSE_VALUE:
            if (s->field == F_DATA) {
                if (s->has_seq) { s->st = SSE_SKIP; break; }
                sse_data_byte(s, c);
            } else if (s->ev_len < sizeof s->ev) {
                s->ev[s->ev_len++] = c;
            }
            break;
        case SSE_SKIP: {
            /* fast path: nothing on this line matters, jump to its end */
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *stop = nl ? nl : end;
            const char *cr = memchr(p, '\r', (size_t)(stop - p));
            if (cr) stop = cr;
            p = stop;
            continue;
        }
        }
        p++;
    }
}

/* ------------------------------------------------------------------ /proc probes */

struct proc_sample { long long ticks; long long rss_kib; long long pss_kib; };

static long long read_ticks(int pid) {
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p += 2; /* fields from 3 (state) on */
    unsigned long long utime = 0, stime = 0;
    /* state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15) */
    if (sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2) return -1;
    return (long long)(utime + stime);
}

static long long read_kib_field(const char *path, const char *field) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    size_t fl = strlen(field);
    long long v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, fl) == 0) { v = atoll(line + fl); break; }
    fclose(f);
    return v;
}

static struct proc_sample sample_server(void) {
    struct proc_sample s = {0, 0, 0};
    if (opt.npids == 0) { s.ticks = s.rss_kib = s.pss_kib = -1; return s; }
    for (int i = 0; i < opt.npids; i++) {
        char path[64];
        long long t = read_ticks(opt.pids[i]);
        if (t < 0) { s.ticks = -1; s.rss_kib = -1; s.pss_kib = -1; return s; }
        s.ticks += t;
        snprintf(path, sizeof path, "/proc/%d/status", opt.pids[i]);
        s.rss_kib += read_kib_field(path, "VmRSS:");
        snprintf(path, sizeof path, "/proc/%d/smaps_rollup", opt.pids[i]);
        long long pss = read_kib_field(path, "Pss:");
        s.pss_kib = (s.pss_kib < 0 || pss < 0) ? -1 : s.pss_kib + pss;
    }
    return s;
}

static double loader_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* busy and total jiffies of the whole machine */
static void host_jiffies(long long *busy, long long *total) {
    FILE *f = fopen("/proc/stat", "r");
    long long v[10] = {0};
    *busy = *total = 0;
    if (!f) return;
    if (fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
        for (int i = 0; i < 8; i++) *total += v[i];
        *busy = *total - v[3] - v[4];
    }
    fclose(f);
}

/* ------------------------------------------------------------------ run state */

enum { PH_NONE, PH_WARMUP, PH_RATE, PH_MAX_WARMUP, PH_MAX, PH_COUNT };
static const char *phase_name[PH_COUNT] = {"none", "warmup", "rate", "max-warmup", "max"};

struct event {          /* one POST that makes one event */
    int64_t seq;        /* -1 until known */
    ns_t sent, acked;   /* acked 0: no answer */
    int16_t status;
    uint8_t phase;
    uint8_t ok;
};

struct delivery { ns_t t; int64_t seq; int32_t sub; };

static struct event *events;
static long nevents, max_events = 8000000L;
static struct delivery *deliveries;
static long ndeliveries, dropped_deliveries;

enum sub_state { S_IDLE, S_CONNECTING, S_HEAD, S_LIVE, S_FAILED, S_CLOSED };
struct sub {
    int fd;
    uint8_t state, attempts;
    struct http_resp r;
    struct sse s;
};
static struct sub *subs;
static int subs_enabled; /* subscribers connect only once the posters are ready */
static int next_sub, subs_pending, subs_live, subs_failed, subs_closed, connect_retries;
static int *retry_queue, nretry;
static long nonseq_events, overflow_events, bad_streams;

enum poster_state { P_DOWN, P_CONNECTING, P_IDLE, P_WRITING, P_WAITING };
struct poster {
    int fd;
    uint8_t state;
    int setup_step;     /* lifecycled: requests of the cold start still to send */
    int alternate;      /* which of the two events is next */
    long ev;            /* event index of the request in flight, -1 for setup */
    char inst[64];
    char req[2048];
    int req_len, req_off;
    int has_request;
    struct http_resp r;
    char body[16384];
    int body_len;
    int reconnects;
};
static struct poster *posters;
static int nposters;
static long post_errors, setup_errors, late_posts;

static int epfd;
static struct sockaddr_in target, sub_target;
static uint8_t cur_phase = PH_NONE;
static enum { POST_OFF, POST_RATE, POST_MAX } post_mode = POST_OFF;
static int post_active_posters;     /* posters 0..n-1 take part in the current posting mode */
static ns_t next_post_at, post_period;
static ns_t deadline_ns;

#define TAG_SUB 1ULL
#define TAG_POSTER 2ULL


static void close_rst(int fd) {
    struct linger l = {1, 0}; /* reset, so that thousands of closes leave no TIME_WAIT behind */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(fd);
}

static int start_connect(uint64_t tag, uint32_t index, uint32_t events_mask) {
    const struct sockaddr_in *to = tag == TAG_SUB ? &sub_target : &target;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: %s (raise RLIMIT_NOFILE?)", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)to, sizeof *to) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    struct epoll_event ev = {.events = events_mask, .data.u64 = (tag << 32) | index};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl: %s", strerror(errno));
    return fd;
}

/* ------------------------------------------------------------------ subscribers */

static int cur_sub;
static ns_t cur_t;

static void on_sse_event(void *ctx, int has_seq, int64_t seq, const char *event, size_t event_len) {
    (void)ctx;
    if (event_len == 8 && memcmp(event, "overflow", 8) == 0) overflow_events++;
    if (!has_seq) { nonseq_events++; return; }
    if (ndeliveries >= opt.max_deliveries) { dropped_deliveries++; return; }
    struct delivery *d = &deliveries[ndeliveries++];
    d->t = cur_t;
    d->seq = seq;
    d->sub = cur_sub;
}

static void sub_body(void *ctx, const char *p, size_t n) {
    struct sub *s = ctx;
    sse_feed(&s->s, p, n, on_sse_event, NULL);
}

static int sub_head(void *ctx) {
    struct sub *s = ctx;
    if (s->r.status != 200 || !s->r.event_stream) {
        fprintf(stderr, "sse-load: subscriber %d: status %d%s\n", (int)(s - subs), s->r.status,
                s->r.event_stream ? "" : ", not text/event-stream");
        return -1;
    }
    s->state = S_LIVE;
    subs_pending--;
    subs_live++;
    return 0;
}

static void sub_start(int i) {
    struct sub *s = &subs[i];
    s->fd = start_connect(TAG_SUB, (uint32_t)i, EPOLLOUT);
    s->attempts++;
    resp_reset(&s->r);
    memset(&s->s, 0, sizeof s->s);
    if (s->fd < 0) { s->state = S_FAILED; subs_failed++; return; }
    s->state = S_CONNECTING;
    subs_pending++;
}

/* A subscriber that never got its answer is tried again a few times; one that was live is not. */
static void sub_drop(struct sub *s, const char *why) {
    int i = (int)(s - subs);
    if (s->fd >= 0) { epoll_ctl(epfd, EPOLL_CTL_DEL, s->fd, NULL); close_rst(s->fd); s->fd = -1; }
    resp_reset(&s->r);
    if (s->state == S_LIVE) {
        s->state = S_CLOSED;
        subs_live--;
        subs_closed++;
        if (subs_closed <= 5) fprintf(stderr, "sse-load: subscriber %d closed (%s)\n", i, why);
        return;
    }
    subs_pending--;
    if (s->attempts < 5) {
        s->state = S_IDLE;
        retry_queue[nretry++] = i;
        connect_retries++;
    } else {
        s->state = S_FAILED;
        subs_failed++;
        if (subs_failed <= 5) fprintf(stderr, "sse-load: subscriber %d failed (%s)\n", i, why);
    }
}

static void sub_event(int i, uint32_t evmask, char *buf, size_t bufsize) {
    struct sub *s = &subs[i];
    if (s->state != S_CONNECTING && s->state != S_HEAD && s->state != S_LIVE) return; /* dropped earlier in this batch */
    if (s->state == S_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err || (evmask & (EPOLLERR | EPOLLHUP))) { sub_drop(s, err ? strerror(err) : "hang-up"); return; }
        char req[512];
        int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n",
                         opt.sub_path, opt.sub_port);
        if (write(s->fd, req, (size_t)n) != n) { sub_drop(s, "short write of the request"); return; }
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (TAG_SUB << 32) | (uint32_t)i};
        epoll_ctl(epfd, EPOLL_CTL_MOD, s->fd, &ev);
        s->state = S_HEAD;
        return;
    }
    for (int rounds = 0; rounds < 4; rounds++) {
        ssize_t n = read(s->fd, buf, bufsize);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            sub_drop(s, strerror(errno));
            return;
        }
        if (n == 0) { sub_drop(s, "end of stream"); return; }
        cur_t = now_ns();
        cur_sub = i;
        size_t used;
        int rc = resp_feed(&s->r, buf, (size_t)n, &used, sub_head, sub_body, s);
        if (rc == RESP_ERR) { bad_streams++; sub_drop(s, "bad response"); return; }
        if (rc == RESP_DONE) { sub_drop(s, "the stream ended"); return; }
        if ((size_t)n < bufsize) return;
    }
}

/* ------------------------------------------------------------------ posters */

static const char *lc_events[2] = {"{\"event\":\"willResignActive\"}", "{\"event\":\"didBecomeActive\"}"};
static const char *lc_cold_start[3] = {
    "{\"event\":\"didFinishLaunching\"}",
    "{\"event\":\"willConnectToWindow\",\"window\":\"main\"}",
    "{\"event\":\"didBecomeActive\"}",
};

static void poster_connect(struct poster *p) {
    p->fd = start_connect(TAG_POSTER, (uint32_t)(p - posters), EPOLLOUT);
    if (p->fd < 0) die("poster cannot connect to 127.0.0.1:%d: %s", opt.port, strerror(errno));
    resp_reset(&p->r);
    p->state = P_CONNECTING;
}

static void poster_set_request(struct poster *p, const char *method, const char *path, const char *body, size_t body_len) {
    p->req_len = snprintf(p->req, sizeof p->req,
        "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
        method, path, opt.port, body_len);
    if ((size_t)p->req_len + body_len >= sizeof p->req) die("request too large");
    memcpy(p->req + p->req_len, body, body_len);
    p->req_len += (int)body_len;
    p->req_off = 0;
    p->has_request = 1;
}

static void poster_flush(struct poster *p) {
    while (p->req_off < p->req_len) {
        if (p->req_off == 0 && p->ev >= 0) events[p->ev].sent = now_ns();
        ssize_t n = write(p->fd, p->req + p->req_off, (size_t)(p->req_len - p->req_off));
        if (n < 0) {
            if (errno == EAGAIN) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u64 = (TAG_POSTER << 32) | (uint32_t)(p - posters)};
                epoll_ctl(epfd, EPOLL_CTL_MOD, p->fd, &ev);
                p->state = P_WRITING;
                return;
            }
            die("poster write: %s", strerror(errno));
        }
        p->req_off += (int)n;
    }
    if (p->state == P_WRITING) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (TAG_POSTER << 32) | (uint32_t)(p - posters)};
        epoll_ctl(epfd, EPOLL_CTL_MOD, p->fd, &ev);
    }
    p->state = P_WAITING;
    p->has_request = 0;
    p->body_len = 0;
}

/* Sends p's prepared request now if connected, else as soon as it is. */
static void poster_go(struct poster *p) {
    if (p->state == P_DOWN) { poster_connect(p); return; }
    if (p->state == P_IDLE) poster_flush(p);
}

static void poster_next_setup(struct poster *p) {
    char path[512];
    if (p->setup_step == 0) {
        snprintf(path, sizeof path, "%s%s", opt.pub_path, p->inst);
        poster_set_request(p, "PUT", path, "", 0);
    } else {
        snprintf(path, sizeof path, "%s%s/events", opt.pub_path, p->inst);
        const char *b = lc_cold_start[p->setup_step - 1];
        poster_set_request(p, "POST", path, b, strlen(b));
    }
    p->ev = -1;
    poster_go(p);
}

static int64_t next_nchan_seq = 1;

static void make_nchan_message(char *out, size_t cap, int64_t seq, size_t *len) {
    int n = snprintf(out, cap,
        "{\"sequence\":%" PRId64 ",\"instance\":\"sse-bench-0\",\"model\":\"ios-app\",\"version\":%" PRId64 ","
        "\"kind\":\"event\",\"event\":\"didBecomeActive\",\"from\":\"inactive\",\"to\":\"foreground\","
        "\"outcome\":\"transitioned\",\"hooks\":[\"Foreground.onTransition\",\"Foreground.didReturn\"],"
        "\"row\":\"r12\",\"disposition\":\"handled\",\"time\":\"2026-11-30T01:07:00.123Z\",\"pad\":\"",
        seq, seq + 3);
    size_t target_len = (size_t)opt.message_bytes;
    if (target_len > cap - 8) target_len = cap - 8;
    while ((size_t)n + 2 < target_len) out[n++] = 'x';
    out[n++] = '"';
    out[n++] = '}';
    out[n] = 0;
    *len = (size_t)n;
}

/* Starts one event POST on an idle poster. */
static void poster_post_event(struct poster *p) {
    if (nevents >= max_events) die("more than %ld events", max_events);
    long e = nevents++;
    struct event *ev = &events[e];
    memset(ev, 0, sizeof *ev);
    ev->phase = cur_phase;
    ev->seq = -1;
    p->ev = e;
    char path[512];
    if (opt.mode == MODE_NCHAN) {
        char body[4096];
        size_t len;
        ev->seq = next_nchan_seq++;
        make_nchan_message(body, sizeof body, ev->seq, &len);
        poster_set_request(p, "POST", opt.pub_path, body, len);
    } else {
        snprintf(path, sizeof path, "%s%s/events", opt.pub_path, p->inst);
        const char *b = lc_events[p->alternate];
        p->alternate ^= 1;
        poster_set_request(p, "POST", path, b, strlen(b));
    }
    poster_flush(p);
}

static int64_t find_sequence(const char *p, size_t n) {
    for (size_t i = 0; i + SEQ_KEY_LEN <= n; i++) {
        if (memcmp(p + i, SEQ_KEY, SEQ_KEY_LEN) != 0) continue;
        size_t j = i + SEQ_KEY_LEN;
        while (j < n && p[j] == ' ') j++;
        if (j >= n || !isdigit((unsigned char)p[j])) return -1;
        int64_t v = 0;
        while (j < n && isdigit((unsigned char)p[j])) v = v * 10 + (p[j++] - '0');
        return v;
    }
    return -1;
}

static void poster_body(void *ctx, const char *b, size_t n) {
    struct poster *p = ctx;
    size_t room = sizeof p->body - 1 - (size_t)p->body_len;
    if (n > room) n = room;
    memcpy(p->body + p->body_len, b, n);
    p->body_len += (int)n;
    p->body[p->body_len] = 0;
}

static void poster_answered(struct poster *p, ns_t t) {
    int status = p->r.status;
    if (p->ev < 0) { /* lifecycled cold start */
        int ok = p->setup_step == 0 ? (status >= 200 && status < 300) : status == 200;
        if (!ok) {
            setup_errors++;
            fprintf(stderr, "sse-load: setup of %s, step %d: status %d: %.300s\n", p->inst, p->setup_step, status, p->body);
        }
        p->setup_step = ok ? p->setup_step + 1 : 4;
        return;
    }
    struct event *ev = &events[p->ev];
    ev->acked = t;
    ev->status = (int16_t)status;
    if (opt.mode == MODE_NCHAN) {
        ev->ok = status >= 200 && status < 300;
    } else {
        ev->seq = (status == 200 || status == 409) ? find_sequence(p->body, (size_t)p->body_len) : -1;
        ev->ok = ev->seq >= 0;
    }
    if (!ev->ok) {
        post_errors++;
        if (post_errors <= 5) fprintf(stderr, "sse-load: event POST answered %d: %.300s\n", status, p->body);
    }
    p->ev = -1;
}

static void poster_event(int i, uint32_t evmask, char *buf, size_t bufsize) {
    struct poster *p = &posters[i];
    if (p->state == P_CONNECTING) {
        if (!(evmask & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return; /* left over from a closed socket */
        int err = 0;
        socklen_t el = sizeof err;
        getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err || (evmask & (EPOLLERR | EPOLLHUP))) die("poster cannot connect to 127.0.0.1:%d: %s", opt.port, err ? strerror(err) : "hang-up");
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (TAG_POSTER << 32) | (uint32_t)i};
        epoll_ctl(epfd, EPOLL_CTL_MOD, p->fd, &ev);
        p->state = P_IDLE;
        if (p->has_request) poster_flush(p);
        return;
    }
    if (p->state == P_WRITING && (evmask & EPOLLOUT)) { poster_flush(p); if (!(evmask & EPOLLIN)) return; }
    ssize_t n = read(p->fd, buf, bufsize);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
        /* the server closed the connection: an unanswered request is lost, counted, not resent */
        epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL);
        close(p->fd);
        p->fd = -1;
        p->reconnects++;
        if (p->state == P_WAITING || p->state == P_WRITING) {
            if (p->ev >= 0) { post_errors++; p->ev = -1; fprintf(stderr, "sse-load: poster %d: connection closed before the answer\n", i); }
            else { setup_errors++; p->setup_step = 4; }
        }
        p->state = P_DOWN;
        p->has_request = 0;
        poster_connect(p);
        return;
    }
    ns_t t = now_ns();
    size_t used;
    int rc = resp_feed(&p->r, buf, (size_t)n, &used, NULL, poster_body, p);
    if (rc == RESP_ERR) die("poster %d: malformed answer", i);
    if (rc == RESP_MORE) return;
    if (used != (size_t)n) die("poster %d: bytes after the answer", i);
    int close_it = p->r.conn_close;
    poster_answered(p, t);
    resp_reset(&p->r);
    if (close_it) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL);
        close(p->fd);
        p->reconnects++;
        p->state = P_DOWN;
        poster_connect(p);
    } else {
        p->state = P_IDLE;
    }
}

/* Starts the posts that are due: on schedule at a rate, or on every idle poster at max. */
static void schedule_posts(ns_t now) {
    if (post_mode == POST_RATE) {
        while (now >= next_post_at) {
            struct poster *idle = NULL;
            for (int i = 0; i < post_active_posters; i++)
                if (posters[i].state == P_IDLE && !posters[i].has_request) { idle = &posters[i]; break; }
            if (!idle) return; /* all busy: post when one is answered */
            poster_post_event(idle);
            next_post_at += post_period;
            if (now - next_post_at > post_period) { late_posts++; next_post_at = now; }
        }
    } else if (post_mode == POST_MAX) {
        for (int i = 0; i < post_active_posters; i++)
            if (posters[i].state == P_IDLE && !posters[i].has_request) poster_post_event(&posters[i]);
    }
}

/* ------------------------------------------------------------------ loop */

static char readbuf[1 << 16];

static void loop_once(int max_wait_ms) {
    static struct epoll_event evs[1024];
    ns_t now = now_ns();
    if (now > deadline_ns) die("deadline passed");
    schedule_posts(now);
    /* start subscriber connects up to the concurrency limit */
    while (subs_enabled && subs_pending < opt.connect_concurrency && (nretry > 0 || next_sub < opt.subscribers)) {
        int i = nretry > 0 ? retry_queue[--nretry] : next_sub++;
        sub_start(i);
    }
    int wait_ms = max_wait_ms;
    int idle_poster = 0;
    for (int i = 0; i < post_active_posters; i++) idle_poster |= posters[i].state == P_IDLE && !posters[i].has_request;
    /* a post due with every poster busy waits for an answer, which wakes epoll: no spinning */
    if (post_mode == POST_RATE && idle_poster) {
        ns_t until = next_post_at - now_ns();
        int ms = until <= 0 ? 0 : (int)((until + 999999) / 1000000);
        if (ms < wait_ms) wait_ms = ms;
    }
    int n = epoll_wait(epfd, evs, 1024, wait_ms);
    if (n < 0 && errno != EINTR) die("epoll_wait: %s", strerror(errno));
    for (int k = 0; k < n; k++) {
        uint64_t tag = evs[k].data.u64 >> 32;
        uint32_t idx = (uint32_t)evs[k].data.u64;
        if (tag == TAG_SUB) sub_event((int)idx, evs[k].events, readbuf, sizeof readbuf);
        else poster_event((int)idx, evs[k].events, readbuf, sizeof readbuf);
    }
    if (post_mode == POST_MAX) schedule_posts(now_ns());
}

static void run_for(double seconds) {
    ns_t until = now_ns() + (ns_t)(seconds * 1e9);
    while (now_ns() < until) {
        ns_t left = until - now_ns();
        loop_once(left > 50000000 ? 50 : (int)(left / 1000000) + 1);
    }
}

/* Waits for late deliveries: until none came for 300 ms, or opt.drain seconds. */
static void drain(void) {
    ns_t start = now_ns(), last_change = start;
    long seen = ndeliveries;
    while (now_ns() - start < (ns_t)(opt.drain * 1e9)) {
        loop_once(20);
        int busy = 0;
        for (int i = 0; i < nposters; i++) busy |= posters[i].state == P_WAITING || posters[i].state == P_WRITING;
        if (ndeliveries != seen) { seen = ndeliveries; last_change = now_ns(); }
        else if (!busy && now_ns() - last_change > 300000000) break;
    }
}

/* ------------------------------------------------------------------ analysis */

struct window {
    int phase;
    ns_t t0, t1;
    struct proc_sample s0, s1;
    double loader0, loader1;
    long long host_busy0, host_total0, host_busy1, host_total1;
    long received;      /* deliveries received inside [t0, t1] */
    long late0;
    int subs_at_start;
};

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static double pct_ms(const int64_t *v, long n, double p) {
    if (n == 0) return -1;
    long idx = (long)(p / 100.0 * (double)n + 0.999999) - 1;
    if (idx < 0) idx = 0;
    if (idx >= n) idx = n - 1;
    return (double)v[idx] / 1e6;
}

/* events sorted by sequence, for looking deliveries up */
static long *by_seq;
static long nby_seq;

static int cmp_ev_seq(const void *a, const void *b) {
    int64_t x = events[*(const long *)a].seq, y = events[*(const long *)b].seq;
    return (x > y) - (x < y);
}

static long find_event(int64_t seq) {
    long lo = 0, hi = nby_seq - 1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        int64_t s = events[by_seq[mid]].seq;
        if (s == seq) return by_seq[mid];
        if (s < seq) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

static long long rss_base_kib = -1, pss_base_kib = -1;

static void report_window(const struct window *w, long *order_violations) {
    double secs = (double)(w->t1 - w->t0) / 1e9;
    long nev = 0, nok = 0;
    for (long e = 0; e < nevents; e++)
        if (events[e].phase == w->phase) { nev++; nok += events[e].ok; }
    /* latencies of deliveries of this window's events */
    long cap = 0;
    for (long d = 0; d < ndeliveries; d++) {
        long e = find_event(deliveries[d].seq);
        if (e >= 0 && events[e].phase == w->phase) cap++;
    }
    int64_t *lat_send = malloc(sizeof(int64_t) * (size_t)(cap + 1));
    int64_t *lat_ack = malloc(sizeof(int64_t) * (size_t)(cap + 1));
    uint64_t *pairs = malloc(sizeof(uint64_t) * (size_t)(cap + 1));
    int64_t *post_lat = malloc(sizeof(int64_t) * (size_t)(nev + 1));
    if (!lat_send || !lat_ack || !pairs || !post_lat) die("out of memory");
    long nl = 0, nack = 0, before_ack = 0;
    for (long d = 0; d < ndeliveries; d++) {
        long e = find_event(deliveries[d].seq);
        if (e < 0 || events[e].phase != w->phase) continue;
        lat_send[nl] = deliveries[d].t - events[e].sent;
        pairs[nl] = ((uint64_t)(uint32_t)deliveries[d].sub << 32) | (uint64_t)(e & 0xffffffff);
        nl++;
        if (events[e].acked) {
            lat_ack[nack++] = deliveries[d].t - events[e].acked;
            if (deliveries[d].t < events[e].acked) before_ack++;
        }
    }
    long npost = 0;
    for (long e = 0; e < nevents; e++)
        if (events[e].phase == w->phase && events[e].acked) post_lat[npost++] = events[e].acked - events[e].sent;
    qsort(lat_send, (size_t)nl, sizeof *lat_send, cmp_i64);
    qsort(lat_ack, (size_t)nack, sizeof *lat_ack, cmp_i64);
    qsort(post_lat, (size_t)npost, sizeof *post_lat, cmp_i64);
    qsort(pairs, (size_t)nl, sizeof *pairs, cmp_u64);
    /* distinct (subscriber, event) pairs: the rest are duplicates; missing per subscriber */
    long distinct = 0, subs_missing = 0;
    for (long k = 0; k < nl; k++)
        if (k == 0 || pairs[k] != pairs[k - 1]) distinct++;
    long duplicates = nl - distinct;
    long expected = (long)w->subs_at_start * nok;
    {
        long k = 0;
        for (int s = 0; s < opt.subscribers; s++) {
            long got = 0;
            while (k < nl && (int)(pairs[k] >> 32) == s) {
                if (k == 0 || pairs[k] != pairs[k - 1]) got++;
                k++;
            }
            if (subs[s].state != S_FAILED && got < nok) subs_missing++;
        }
    }
    long missing = expected - distinct;
    if (missing < 0) missing = 0;
    double cpu_s = -1, cpu_pct = -1, cpu_us_per_delivery = -1;
    long hz = sysconf(_SC_CLK_TCK);
    if (w->s0.ticks >= 0 && w->s1.ticks >= 0) {
        cpu_s = (double)(w->s1.ticks - w->s0.ticks) / (double)hz;
        cpu_pct = 100.0 * cpu_s / secs;
        if (w->received) cpu_us_per_delivery = cpu_s * 1e6 / (double)w->received;
    }
    double rss_per_sub = -1, pss_per_sub = -1;
    int live = w->subs_at_start > 0 ? w->subs_at_start : 1;
    if (w->s1.rss_kib >= 0 && rss_base_kib >= 0) rss_per_sub = (double)(w->s1.rss_kib - rss_base_kib) / live;
    if (w->s1.pss_kib >= 0 && pss_base_kib >= 0) pss_per_sub = (double)(w->s1.pss_kib - pss_base_kib) / live;
    double loader_pct = 100.0 * (w->loader1 - w->loader0) / secs;
    double host_pct = w->host_total1 > w->host_total0
        ? 100.0 * (double)(w->host_busy1 - w->host_busy0) / (double)(w->host_total1 - w->host_total0) : -1;
    double dps = (double)w->received / secs;
    const char *label = opt.label ? opt.label : (opt.mode == MODE_NCHAN ? "nchan" : "lifecycled");
    char rate[32];
    if (w->phase == PH_MAX) snprintf(rate, sizeof rate, "max");
    else snprintf(rate, sizeof rate, "%g", opt.rate);
    printf("sse-result label=%s phase=%s subscribers=%d rate=%s window_s=%.2f events=%ld events_ok=%ld"
           " post_errors=%ld late_posts=%ld deliveries=%ld expected=%ld missing=%ld duplicates=%ld"
           " order_violations=%ld subs_missing=%ld subs_closed=%d deliveries_per_s=%.0f"
           " send_p50_ms=%.2f send_p99_ms=%.2f send_max_ms=%.2f ack_p50_ms=%.2f ack_p99_ms=%.2f ack_max_ms=%.2f"
           " before_ack_pct=%.1f post_p50_ms=%.2f post_p99_ms=%.2f posts_per_s=%.1f"
           " server_cpu_pct=%.1f server_cpu_us_per_delivery=%.3f rss_kib_per_sub=%.2f pss_kib_per_sub=%.2f"
           " rss_kib=%lld loader_cpu_pct=%.1f host_busy_pct=%.1f\n",
           label, phase_name[w->phase], w->subs_at_start,
           rate,
           secs, nev, nok, nev - nok, w->phase == PH_RATE ? late_posts - w->late0 : 0, nl, expected, missing, duplicates,
           order_violations[w->phase], subs_missing, subs_closed, dps,
           pct_ms(lat_send, nl, 50), pct_ms(lat_send, nl, 99), pct_ms(lat_send, nl, 100),
           pct_ms(lat_ack, nack, 50), pct_ms(lat_ack, nack, 99), pct_ms(lat_ack, nack, 100),
           nack ? 100.0 * (double)before_ack / (double)nack : 0.0,
           pct_ms(post_lat, npost, 50), pct_ms(post_lat, npost, 99), (double)npost / secs,
           cpu_pct, cpu_us_per_delivery, rss_per_sub, pss_per_sub, w->s1.rss_kib, loader_pct, host_pct);
    fprintf(stderr,
            "%s %s: %d subscribers, %ld events in %.1f s (%.1f/s), %.0f deliveries/s\n"
            "  latency from POST sent: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n"
            "  latency from POST answered: p50 %.2f ms, p99 %.2f ms, max %.2f ms (%.1f%% delivered before the answer)\n"
            "  POST answered in p50 %.2f ms, p99 %.2f ms\n"
            "  missing %ld, duplicates %ld, out of order %ld, subscribers missing some %ld, closed %d, POST errors %ld\n"
            "  server CPU %.1f%% (%.3f us per delivery), memory %.2f KiB RSS (%.2f KiB PSS) per subscriber;"
            " loader CPU %.1f%%, machine busy %.1f%%\n",
            label, phase_name[w->phase], w->subs_at_start, nev, secs, (double)nev / secs, dps,
            pct_ms(lat_send, nl, 50), pct_ms(lat_send, nl, 99), pct_ms(lat_send, nl, 100),
            pct_ms(lat_ack, nack, 50), pct_ms(lat_ack, nack, 99), pct_ms(lat_ack, nack, 100),
            nack ? 100.0 * (double)before_ack / (double)nack : 0.0,
            pct_ms(post_lat, npost, 50), pct_ms(post_lat, npost, 99),
            missing, duplicates, order_violations[w->phase], subs_missing, subs_closed, nev - nok,
            cpu_pct, cpu_us_per_delivery, rss_per_sub, pss_per_sub, loader_pct, host_pct);
    free(lat_send); free(lat_ack); free(pairs); free(post_lat);
}

static void window_begin(struct window *w, int phase) {
    memset(w, 0, sizeof *w);
    w->phase = phase;
    w->subs_at_start = subs_live;
    w->late0 = late_posts;
    w->s0 = sample_server();
    w->loader0 = loader_cpu_s();
    host_jiffies(&w->host_busy0, &w->host_total0);
    w->t0 = now_ns();
}

static void window_end(struct window *w) {
    w->t1 = now_ns();
    w->s1 = sample_server();
    w->loader1 = loader_cpu_s();
    host_jiffies(&w->host_busy1, &w->host_total1);
}

static long count_received(ns_t t0, ns_t t1) {
    long n = 0;
    for (long d = 0; d < ndeliveries; d++) n += deliveries[d].t >= t0 && deliveries[d].t <= t1;
    return n;
}

/* ------------------------------------------------------------------ self-test */

struct st_ctx { int64_t got[64]; int n; int nonseq; int overflow; };
static void st_event(void *ctx, int has_seq, int64_t seq, const char *event, size_t event_len) {
    struct st_ctx *c = ctx;
    if (event_len == 8 && memcmp(event, "overflow", 8) == 0) c->overflow++;
    if (!has_seq) { c->nonseq++; return; }
    if (c->n < 64) c->got[c->n++] = seq;
}
struct st_body { struct sse s; struct st_ctx c; };
static void st_body_fn(void *ctx, const char *p, size_t n) {
    struct st_body *b = ctx;
    sse_feed(&b->s, p, n, st_event, &b->c);
}

static int self_test(void) {
    const char *sse_text =
        ": hi\n\n"
        "retry: 2000\n"
        "id: 41\nevent: record\ndata: {\"sequence\":41,\"instance\":\"a\",\"hooks\":[\"x\"]}\n\n"
        "event: ping\n\n"
        "id: 42\r\nevent: record\r\ndata: {\"version\":3,\"seq\":\"\\\"sequence\",\"sequence\":42}\r\n\r\n"
        ":heartbeat\r\r"
        "data:{\"sequence\": 43,\"record\":{\"sequence\":99}}\r\r"
        "data: {\"a\":1,\n"
        "data: \"sequence\":44}\n"
        "\n"
        "data\n\n"
        "event: overflow\ndata: {\"reason\":\"slow\"}\n\n"
        "id: 45\ndata: {\"instance\":\"\"sequence\":45}\n\n"      /* the key right after a quote */
        "data: {\"a\":1,\r\ndata: \"b\",\r\ndata: \"sequence\":46}\r\n\r\n" /* CRLF inside one event */
        "data: \"sequence\":47\n\n"                              /* digits end the line */
        "data: {\"sequence\":48}\n";   /* not dispatched: no blank line yet */
    const int64_t want[] = {41, 42, 43, 44, 45, 46, 47};
    const int nwant = 7, want_nonseq = 2, want_overflow = 1;
    /* the same stream three ways: raw (no length), chunked in pieces of 7 bytes, chunked in
       one piece with an extension and a trailer */
    static char streams[3][8192];
    size_t lens[3];
    const char *head_raw = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nConnection: keep-alive\r\n\r\n";
    const char *head_chunked = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    size_t sl = strlen(sse_text);
    lens[0] = (size_t)snprintf(streams[0], sizeof streams[0], "%s%s", head_raw, sse_text);
    size_t k = (size_t)snprintf(streams[1], sizeof streams[1], "%s", head_chunked);
    for (size_t off = 0; off < sl; off += 7) {
        size_t c = sl - off < 7 ? sl - off : 7;
        k += (size_t)snprintf(streams[1] + k, sizeof streams[1] - k, "%zx\r\n%.*s\r\n", c, (int)c, sse_text + off);
    }
    lens[1] = k;
    lens[2] = (size_t)snprintf(streams[2], sizeof streams[2], "%s%zX;ext=1\r\n%s\r\n0\r\nX-T: 1\r\n\r\n", head_chunked, sl, sse_text);
    int passed = 0, failed = 0;
    uint32_t rng = 12345; /* seeded: the same splits every run */
    for (int s = 0; s < 3; s++) {
        for (int mode = 0; mode < 3; mode++) {
            size_t splits = mode == 0 ? lens[s] : mode == 1 ? 1 : 200;
            for (size_t cut = 0; cut < splits; cut++) {
                struct http_resp r;
                memset(&r, 0, sizeof r);
                r.state = RP_HEAD;
                struct st_body b;
                memset(&b, 0, sizeof b);
                int rc = RESP_MORE;
                size_t pos = 0;
                while (pos < lens[s] && rc == RESP_MORE) {
                    size_t step;
                    if (mode == 0) step = pos < cut ? cut - pos : lens[s] - pos;     /* two pieces */
                    else if (mode == 1) step = 1;                                   /* byte by byte */
                    else { rng = rng * 1103515245u + 12345u; step = 1 + (rng >> 16) % 40; } /* random */
                    if (step > lens[s] - pos) step = lens[s] - pos;
                    size_t used;
                    rc = resp_feed(&r, streams[s] + pos, step, &used, NULL, st_body_fn, &b);
                    pos += used;
                }
                int ok = rc != RESP_ERR && r.status == 200 && r.event_stream && b.c.n == nwant &&
                         b.c.nonseq == want_nonseq && b.c.overflow == want_overflow &&
                         (s == 2 ? rc == RESP_DONE : rc == RESP_MORE);
                for (int i = 0; ok && i < nwant; i++) ok = b.c.got[i] == want[i];
                if (ok) passed++;
                else if (failed++ < 5)
                    fprintf(stderr, "self-test: stream %d mode %d cut %zu: rc %d status %d events %d nonseq %d overflow %d\n",
                            s, mode, cut, rc, r.status, b.c.n, b.c.nonseq, b.c.overflow);
                free(r.head);
            }
        }
    }
    /* a poster's answer: Content-Length body, then a chunked one; sequence found the same way */
    const char *answers[2] = {
        "HTTP/1.1 409 Conflict\r\nContent-Type: application/problem+json\r\nContent-Length: 60\r\n\r\n"
        "{\"type\":\"x\",\"record\":{\"version\":2,\"sequence\":1234,\"to\":\"a\"}}",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"seq\r\n12\r\nuence\":77,\"a\":\"b\"}\r\n0\r\n\r\n",
    };
    const int64_t answer_seq[2] = {1234, 77};
    for (int a = 0; a < 2; a++) {
        size_t len = strlen(answers[a]);
        for (size_t cut = 1; cut < len; cut++) {
            struct poster p;
            memset(&p, 0, sizeof p);
            p.r.state = RP_HEAD;
            size_t used1 = 0, used2 = 0;
            int rc = resp_feed(&p.r, answers[a], cut, &used1, NULL, poster_body, &p);
            if (rc == RESP_MORE) rc = resp_feed(&p.r, answers[a] + cut, len - cut, &used2, NULL, poster_body, &p);
            int ok = rc == RESP_DONE && used1 + used2 == len && find_sequence(p.body, (size_t)p.body_len) == answer_seq[a];
            if (ok) passed++;
            else if (failed++ < 5) fprintf(stderr, "self-test: answer %d cut %zu: rc %d body %s\n", a, cut, rc, p.body);
            free(p.r.head);
        }
    }
    /* the nchan message carries its sequence, is the size asked for, and is one line */
    {
        char m[4096];
        size_t len;
        opt.message_bytes = 350;
        make_nchan_message(m, sizeof m, 987654, &len);
        int ok = len == 350 && find_sequence(m, len) == 987654 && !memchr(m, '\n', len);
        if (ok) passed++; else { failed++; fprintf(stderr, "self-test: nchan message (%zu bytes) %s\n", len, m); }
    }
    printf("self-test: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* ------------------------------------------------------------------ main */

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "sse-load: deadline passed, exiting\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

static void add_pids(const char *list) {
    char *copy = strdup(list), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (opt.npids >= 64) die("too many pids");
        int pid = atoi(t);
        if (pid <= 0) die("bad pid %s", t);
        opt.pids[opt.npids++] = pid;
    }
    free(copy);
}

static void *reserve(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) die("mmap of %zu bytes: %s", bytes, strerror(errno));
    return p;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED() do { if (!v) usage(); i++; } while (0)
        if (!strcmp(a, "--self-test")) return self_test();
        else if (!strcmp(a, "--port")) { NEED(); opt.port = atoi(v); }
        else if (!strcmp(a, "--sub-port")) { NEED(); opt.sub_port = atoi(v); }
        else if (!strcmp(a, "--host")) { NEED(); opt.host = v; }
        else if (!strcmp(a, "--mode")) {
            NEED();
            if (!strcmp(v, "nchan")) opt.mode = MODE_NCHAN;
            else if (!strcmp(v, "lifecycled")) opt.mode = MODE_LIFECYCLED;
            else usage();
        }
        else if (!strcmp(a, "--sub-path")) { NEED(); opt.sub_path = v; }
        else if (!strcmp(a, "--pub-path")) { NEED(); opt.pub_path = v; }
        else if (!strcmp(a, "--instance-prefix")) { NEED(); opt.instance_prefix = v; }
        else if (!strcmp(a, "--label")) { NEED(); opt.label = v; }
        else if (!strcmp(a, "--subscribers")) { NEED(); opt.subscribers = atoi(v); }
        else if (!strcmp(a, "--rate")) { NEED(); opt.rate = !strcmp(v, "max") ? 0 : atof(v); if (opt.rate < 0) usage(); }
        else if (!strcmp(a, "--seconds")) { NEED(); opt.seconds = atof(v); }
        else if (!strcmp(a, "--warmup")) { NEED(); opt.warmup = atof(v); }
        else if (!strcmp(a, "--max-seconds")) { NEED(); opt.max_seconds = atof(v); }
        else if (!strcmp(a, "--inflight")) { NEED(); opt.inflight = atoi(v); }
        else if (!strcmp(a, "--message-bytes")) { NEED(); opt.message_bytes = atoi(v); }
        else if (!strcmp(a, "--connect-concurrency")) { NEED(); opt.connect_concurrency = atoi(v); }
        else if (!strcmp(a, "--drain")) { NEED(); opt.drain = atof(v); }
        else if (!strcmp(a, "--pid")) { NEED(); add_pids(v); }
        else usage();
#undef NEED
    }
    if (opt.port <= 0 || opt.port > 65535) usage();
    if (opt.sub_port == 0) opt.sub_port = opt.port;
    if (opt.sub_port < 0 || opt.sub_port > 65535) usage();
    if (strcmp(opt.host, "127.0.0.1") != 0 && strcmp(opt.host, "localhost") != 0)
        die("only 127.0.0.1 is a target, not %s", opt.host);
    if (opt.subscribers < 1 || opt.inflight < 1 || opt.seconds <= 0 || opt.connect_concurrency < 1) usage();
    if (opt.message_bytes < 300 || opt.message_bytes > 4000) die("--message-bytes must be 300..4000");
    if (!opt.sub_path) opt.sub_path = opt.mode == MODE_NCHAN ? "/sub" : "/v1/stream";
    if (!opt.pub_path) opt.pub_path = opt.mode == MODE_NCHAN ? "/pub" : "/v1/instances/";
    if (!opt.instance_prefix) opt.instance_prefix = "sse-bench-";

    /* descriptors: one per subscriber and poster, raised to the hard limit */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    nposters = opt.inflight > opt.rate_posters ? opt.inflight : opt.rate_posters;
    if ((rlim_t)(opt.subscribers + nposters + 16) > rl.rlim_cur)
        die("%d subscribers need more descriptors than RLIMIT_NOFILE %llu", opt.subscribers, (unsigned long long)rl.rlim_cur);

    double budget = opt.connect_timeout + opt.warmup + opt.seconds + (opt.max_seconds > 0 ? opt.max_seconds + 1 : 0) + 3 * opt.drain + 60;
    deadline_ns = now_ns() + (ns_t)((budget - 5) * 1e9);
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    alarm((unsigned)budget);

    memset(&target, 0, sizeof target);
    target.sin_family = AF_INET;
    target.sin_port = htons((uint16_t)opt.port);
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sub_target = target;
    sub_target.sin_port = htons((uint16_t)opt.sub_port);

    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1: %s", strerror(errno));
    events = reserve(sizeof(struct event) * (size_t)max_events);
    deliveries = reserve(sizeof(struct delivery) * (size_t)opt.max_deliveries);
    subs = calloc((size_t)opt.subscribers, sizeof *subs);
    retry_queue = calloc((size_t)opt.subscribers, sizeof *retry_queue);
    posters = calloc((size_t)nposters, sizeof *posters);
    if (!subs || !retry_queue || !posters) die("out of memory");
    for (int i = 0; i < opt.subscribers; i++) subs[i].fd = -1;
    const char *label = opt.label ? opt.label : (opt.mode == MODE_NCHAN ? "nchan" : "lifecycled");

    /* posters: connected (and for lifecycled, cold-started instances) before any subscriber */
    for (int i = 0; i < nposters; i++) {
        struct poster *p = &posters[i];
        p->fd = -1;
        p->ev = -1;
        p->state = P_DOWN;
        snprintf(p->inst, sizeof p->inst, "%s%d", opt.instance_prefix, i);
        p->setup_step = opt.mode == MODE_LIFECYCLED ? 0 : 4;
        if (opt.mode == MODE_LIFECYCLED) poster_next_setup(p);
        else poster_connect(p);
    }
    {
        ns_t until = now_ns() + 20000000000LL;
        for (;;) {
            int ready = 1;
            for (int i = 0; i < nposters; i++) {
                struct poster *p = &posters[i];
                if (p->state == P_IDLE && !p->has_request && p->setup_step < 4) poster_next_setup(p);
                if (!(p->state == P_IDLE && p->setup_step >= 4)) ready = 0;
            }
            if (ready) break;
            if (now_ns() > until) die("posters not ready after 20 s");
            loop_once(20);
        }
        if (setup_errors) die("%ld setup requests failed", setup_errors);
    }

    struct proc_sample base = sample_server();
    rss_base_kib = base.rss_kib;
    pss_base_kib = base.pss_kib;

    /* subscribers, opt.connect_concurrency connects in flight at most */
    ns_t c0 = now_ns();
    subs_enabled = 1;
    while (subs_live + subs_failed < opt.subscribers) {
        if (now_ns() - c0 > (ns_t)(opt.connect_timeout * 1e9)) die("only %d of %d subscribers after %.0f s", subs_live, opt.subscribers, opt.connect_timeout);
        loop_once(20);
    }
    double connect_s = (double)(now_ns() - c0) / 1e9;
    struct proc_sample idle = sample_server();
    printf("sse-connect label=%s subscribers=%d live=%d failed=%d retries=%d seconds=%.2f rss_base_kib=%lld"
           " rss_kib_per_sub_idle=%.2f pss_kib_per_sub_idle=%.2f\n",
           label, opt.subscribers, subs_live, subs_failed, connect_retries, connect_s, base.rss_kib,
           idle.rss_kib >= 0 ? (double)(idle.rss_kib - base.rss_kib) / (subs_live ? subs_live : 1) : -1.0,
           idle.pss_kib >= 0 ? (double)(idle.pss_kib - base.pss_kib) / (subs_live ? subs_live : 1) : -1.0);
    fprintf(stderr, "%s: %d of %d subscribers live in %.2f s (%d retries)\n", label, subs_live, opt.subscribers, connect_s, connect_retries);
    if (subs_failed) die("%d subscribers failed", subs_failed);

    struct window windows[2];
    int nwindows = 0;
    long order_violations[PH_COUNT] = {0};

    if (opt.rate > 0) {
        post_mode = POST_RATE;
        post_active_posters = opt.rate_posters;
        post_period = (ns_t)(1e9 / opt.rate);
        next_post_at = now_ns();
        cur_phase = PH_WARMUP;
        run_for(opt.warmup);
        cur_phase = PH_RATE;
        window_begin(&windows[nwindows], PH_RATE);
        run_for(opt.seconds);
        window_end(&windows[nwindows]);
        nwindows++;
        post_mode = POST_OFF;
        cur_phase = PH_NONE;
        drain();
    }
    if (opt.rate == 0 || opt.max_seconds > 0) {
        double secs = opt.rate == 0 ? opt.seconds : opt.max_seconds;
        post_mode = POST_MAX;
        post_active_posters = opt.inflight;
        cur_phase = PH_MAX_WARMUP;
        run_for(opt.rate == 0 ? opt.warmup : 1.0);
        cur_phase = PH_MAX;
        window_begin(&windows[nwindows], PH_MAX);
        run_for(secs);
        window_end(&windows[nwindows]);
        nwindows++;
        post_mode = POST_OFF;
        cur_phase = PH_NONE;
        drain();
    }

    /* analysis: events by sequence, order per subscriber, then each window */
    by_seq = malloc(sizeof(long) * (size_t)(nevents + 1));
    for (long e = 0; e < nevents; e++)
        if (events[e].ok && events[e].seq >= 0) by_seq[nby_seq++] = e;
    qsort(by_seq, (size_t)nby_seq, sizeof *by_seq, cmp_ev_seq);
    long unknown = 0;
    int64_t *last = malloc(sizeof(int64_t) * (size_t)opt.subscribers);
    for (int s = 0; s < opt.subscribers; s++) last[s] = -1;
    for (long d = 0; d < ndeliveries; d++) {
        struct delivery *dv = &deliveries[d];
        long e = find_event(dv->seq);
        if (e < 0) { unknown++; continue; }
        if (dv->seq < last[dv->sub]) {
            /* lifecycled numbers events itself, so its streams must ascend. Here nchan's
               numbers are the loader's: with several POSTs in flight nchan may order them
               otherwise, so only an event sent after a later-numbered one was answered
               must not come after it. */
            long el = find_event(last[dv->sub]);
            if (opt.mode == MODE_LIFECYCLED || (el >= 0 && events[e].sent > events[el].acked))
                order_violations[events[e].phase]++;
        }
        if (dv->seq > last[dv->sub]) last[dv->sub] = dv->seq;
    }
    for (int k = 0; k < nwindows; k++) {
        windows[k].received = count_received(windows[k].t0, windows[k].t1);
        report_window(&windows[k], order_violations);
    }
    int reconnects = 0;
    for (int i = 0; i < nposters; i++) reconnects += posters[i].reconnects;
    printf("sse-totals label=%s events=%ld deliveries=%ld unknown_sequence=%ld events_without_sequence=%ld"
           " overflow_events=%ld bad_streams=%ld dropped_deliveries=%ld subs_closed=%d poster_reconnects=%d\n",
           label, nevents, ndeliveries, unknown, nonseq_events, overflow_events, bad_streams, dropped_deliveries,
           subs_closed, reconnects);

    for (int i = 0; i < opt.subscribers; i++) if (subs[i].fd >= 0) close_rst(subs[i].fd);
    for (int i = 0; i < nposters; i++) if (posters[i].fd >= 0) close(posters[i].fd);
    return 0;
}
