# lifecycled in a container.
#
#   docker build -t lifecycled .
#   docker run -p 127.0.0.1:8080:8080 -v lifecycled-data:/data lifecycled
#
# Inside, lifecycled listens on every address (LIFECYCLED_HOST=0.0.0.0 below), and without a
# token anyone who reaches the port can write: publish it on loopback as above, as
# compose.yaml does, or give it a token (-e LIFECYCLED_TOKEN=… or LIFECYCLED_TOKEN_FILE) before
# publishing it beyond (-p 8080:8080).
#
# Every setting is also an environment variable (LIFECYCLED_*; see docs/CONFIGURATION.md), so
# `docker run -e LIFECYCLED_LOG_FORMAT=json …` needs no flags. `make container-test` builds
# and runs this file with podman (Tests/container/run.sh).

# ---- build: the official Swift image, the C libraries' -dev packages, a static Swift stdlib
FROM swift:6.3-bookworm AS build

# Before any source is copied, so that a change in Sources/ reuses this layer.
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get -q update \
 && apt-get -q install -y --no-install-recommends libmicrohttpd-dev libsqlite3-dev libpq-dev libgraphviz-dev pkg-config graphviz \
 && rm -rf /var/lib/apt/lists/*

# The part of Graphviz that draws SVG: its core libraries, the dot layout and the core
# (SVG) renderer, with a plugin list naming only those two (`dot -c` writes it for the
# plugins it finds). Debian's libgvc6 package would bring cairo, pango, X11 and libgd's image
# codecs (63 MB) for renderers lifecycled never uses; without pango, Graphviz sizes labels
# from its built-in font metrics.
RUN set -e; lib=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch); \
    out=/graphviz$lib; mkdir -p $out/graphviz; \
    cp -a $lib/libgvc.so.6* $lib/libcgraph.so.6* $lib/libcdt.so.5* $lib/libpathplan.so.4* $out/; \
    cp -a $lib/graphviz/libgvplugin_core.so.6* $lib/graphviz/libgvplugin_dot_layout.so.6* $out/graphviz/; \
    GVBINDIR=$out/graphviz dot -c; test -s $out/graphviz/config6a

WORKDIR /src
# SwiftPM checks that every target's folder exists, tests and benchmark included, even to
# build one product; the package has no dependencies to resolve, so there is no resolve layer.
COPY Package.swift ./
COPY Sources Sources
COPY Tests Tests
COPY Benchmarks/lifecycle-bench Benchmarks/lifecycle-bench
COPY Benchmarks/http-layer Benchmarks/http-layer
COPY Benchmarks/own-loop Benchmarks/own-loop
COPY Benchmarks/own-loop-epoll Benchmarks/own-loop-epoll
COPY Benchmarks/reporter-bench Benchmarks/reporter-bench
# .build in a cache mount: after a change in Sources/ only the modules affected are compiled
# again. The binary is copied out of it in the same step, since the mount is not in the layer,
# and stripped (-s): its symbol table is 13 MB. (Of the 60 MB left, 34 are the ICU data that
# Foundation links in; FoundationEssentials alone would not.)
RUN --mount=type=cache,target=/src/.build \
    swift build -c release --static-swift-stdlib --product lifecycled \
 && install -D -s -m 0755 "$(swift build -c release --show-bin-path)/lifecycled" /out/lifecycled

# ---- root: Debian slim with only the C libraries lifecycled links, and its user
FROM debian:bookworm-slim AS root

# libmicrohttpd, SQLite, libpq (the PostgreSQL store), and what Graphviz's core libraries
# link (libltdl, expat; zlib is in the base), and libcurl, which Foundation's URLSession
# runs on for the command-line client (`lifecycled post`, `tail`…). No ca-certificates: the
# service's only outgoing connection is to PostgreSQL, whose TLS checks libpq's own root
# certificate file.
# Then what a service never reads: documentation, translations, iconv's charset modules (glibc converts
# UTF-8 itself), and the backups dpkg and debconf keep.
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get -q update \
 && apt-get -q install -y --no-install-recommends libmicrohttpd12 libsqlite3-0 libpq5 libltdl7 libexpat1 libcurl4 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* /var/cache/debconf/*-old /var/lib/dpkg/*-old \
      /usr/share/doc/* /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/lib/x86_64-linux-gnu/gconv
COPY --from=build /graphviz/ /
RUN ldconfig

# A fixed uid and gid, so that a volume or bind mount can be given to it ahead of time.
# /data is made before VOLUME, so that a new named volume starts out owned by it.
RUN groupadd --system --gid 10001 lifecycled \
 && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin lifecycled \
 && install -d -o 10001 -g 10001 -m 0750 /data

# ---- run: that root as one layer. libpq brings OpenSSL, Kerberos and LDAP (9 MB); the
# files deleted above are gone from the image only when no layer below still holds them.
FROM scratch
COPY --from=root / /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

COPY Public /usr/local/share/lifecycled/Public
COPY --from=build /out/lifecycled /usr/local/bin/lifecycled

ENV LIFECYCLED_HOST=0.0.0.0 \
    LIFECYCLED_PORT=8080 \
    LIFECYCLED_DATA_DIR=/data \
    LIFECYCLED_PUBLIC_DIR=/usr/local/share/lifecycled/Public
VOLUME /data
EXPOSE 8080
USER 10001:10001
WORKDIR /data

# The probe reads the same variables as the service, so it asks the port the service listens on.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD ["lifecycled", "healthcheck"]

# Exec form: lifecycled is PID 1 and gets SIGTERM itself (a clean stop, exit 0).
ENTRYPOINT ["lifecycled"]

# Last, so that another version changes this step only. The repository names no licence
# yet: NOASSERTION (SPDX for "not stated") until it does. The project has no public home
# of its own yet, so the source label is empty unless the build names the repository
# (--build-arg SOURCE=<its URL>); it never names a domain the project does not own.
ARG VERSION=dev
ARG SOURCE=
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="lifecycled" \
      org.opencontainers.image.description="App-lifecycle state machines over HTTP" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="${LICENSES}"
