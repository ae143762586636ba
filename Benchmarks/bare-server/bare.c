/* The baseline for `make bench`: a bare libmicrohttpd server with the same threading
   flags as lifecycled (internal epoll thread pool, one thread per core, suspend/resume
   allowed) that answers every request with one fixed JSON body. It queues its response
   on the second call of the access handler, as lifecycled does, so keep-alive holds.

   usage: bare-server PORT BODY_FILE [THREADS] */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *body;
static size_t body_size;

static enum MHD_Result answer(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls) {
    static int first_call_marker;
    (void)cls; (void)url; (void)method; (void)version; (void)upload_data;
    if (*req_cls == NULL) {
        *req_cls = &first_call_marker;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *response = MHD_create_response_from_buffer(body_size, body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(response, "Content-Type", "application/json");
    enum MHD_Result result = MHD_queue_response(connection, MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return result;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PORT BODY_FILE [THREADS]\n", argv[0]);
        return 2;
    }
    FILE *file = fopen(argv[2], "rb");
    if (!file) { perror(argv[2]); return 1; }
    fseek(file, 0, SEEK_END);
    body_size = (size_t)ftell(file);
    fseek(file, 0, SEEK_SET);
    body = malloc(body_size ? body_size : 1);
    if (fread(body, 1, body_size, file) != body_size) { perror("read"); return 1; }
    fclose(file);
    unsigned int threads = argc > 3 ? (unsigned int)atoi(argv[3]) : (unsigned int)sysconf(_SC_NPROCESSORS_ONLN);

    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, (uint16_t)atoi(argv[1]),
        NULL, NULL, answer, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int)10000,
        MHD_OPTION_THREAD_POOL_SIZE, threads > 1 ? threads : 1,
        MHD_OPTION_END);
    if (!daemon) { fprintf(stderr, "cannot start\n"); return 1; }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sig;
    sigwait(&set, &sig);
    MHD_stop_daemon(daemon);
    free(body);
    return 0;
}
