/* libFuzzer target for the HTTP framing in front of the engine: the input is
 * sent as raw bytes (request line, headers, body; several pipelined requests
 * if it likes) to a server listening on a loopback port, then the client
 * half-closes and reads whatever comes back. The server has no engine (it
 * stays "loading"), so what runs is libmicrohttpd's parser under our options
 * and everything of ours before the engine: the deadlines, the framing, Host
 * and content-type checks, the %00 unescaping, routing, auth, body limits and
 * error responses. Any crash or sanitizer report is a bug.
 *
 *   make fuzz && build-fuzz/fuzz/fuzz_http -dict=fuzz/http.dict fuzz/corpus-http fuzz/corpus/http
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/http.h"

static int port(void) {
    static int p;
    if (!p) {
        signal(SIGPIPE, SIG_IGN);
        static srv_config cfg = {.host = "127.0.0.1",
                                 .api_key = "k",
                                 .max_body = 4096,
                                 .timeout_s = 2,
                                 .max_conns = 64,
                                 .header_timeout_s = 1};
        srv_http *h;
        inf_err err;
        if (srv_http_start(&h, &cfg, &err)) abort();
        p = srv_http_port(h); /* kept for the whole run */
    }
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port())};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {0, 300000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        size_t off = 0;
        while (off < size) {
            ssize_t n = send(fd, data + off, size - off, MSG_NOSIGNAL);
            if (n <= 0) break;
            off += (size_t)n;
        }
        shutdown(fd, SHUT_WR);
        char buf[4096];
        while (read(fd, buf, sizeof buf) > 0) {
        }
    }
    close(fd);
    return 0;
}
