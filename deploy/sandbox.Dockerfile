# The image students' programs run in with SANDBOX=docker (SANDBOX_IMAGE).
#
# It holds an interpreter and the libraries the course uses, nothing else:
# the server starts the launcher in it with the image's own python3, as the
# student's uid, with no network and a read-only root (see
# server/runs/sandbox_docker.py). No user, entrypoint or command is needed.
#
# Build and push it with the server's release (tag it with the release and
# point SANDBOX_IMAGE at that tag), then pull it on every host that runs
# sandboxes:
#
#   docker build -f deploy/sandbox.Dockerfile -t REGISTRY/pyclassroom-sandbox:VERSION deploy
#   docker push REGISTRY/pyclassroom-sandbox:VERSION
#
# Where no registry can be reached (tests, development machines),
# scripts/build-sandbox-image builds the equivalent image offline from the
# Debian mirror apt uses; keep the two package lists the same.
FROM debian:bookworm-slim

# python3-munkres: satisfies python3-fonttools' "python3-scipy | python3-munkres"
# so that apt does not bring scipy, pythran, gcc and boost (about 700 MB).
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-numpy python3-matplotlib python3-munkres fonts-dejavu-core \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /usr/share/doc/* /usr/share/man/*

# matplotlib's font list, built once here: the launcher copies it into each
# sandbox's /tmp, so a run's first plot does not spend seconds building it.
RUN MPLCONFIGDIR=/opt/pyclassroom/matplotlib python3 -c "import matplotlib.font_manager" \
 && chmod -R a+rX /opt/pyclassroom \
 && mkdir -p /home/student

ENV LANG=C.UTF-8
WORKDIR /home/student
