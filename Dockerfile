# The ClaimTrail image the manifests in deploy/ run: `make image` builds it.
#
# Two stages: the first builds a wheel of this project and of every dependency; the second
# installs those wheels, offline, into a clean copy of the same base, so the image holds the
# installed package only (no sources, tests or build tools) and runs as an unprivileged user.
# The base is pinned to an exact Python and Debian release; pin it by digest as well
# (python:3.11.11-slim-bookworm@sha256:…) when your registry policy asks for it.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN python -m pip install --no-cache-dir --upgrade "pip>=24" "setuptools>=68" "wheel>=0.42"
COPY pyproject.toml README.md ./
COPY audit ./audit
COPY ingest ./ingest
COPY dashboards ./dashboards
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE} AS runtime
# uid 10001 matches runAsUser in deploy/; the embedded store and the writer's spool live in
# /var/lib/claimtrail, the one writable path (the manifests mount a volume there).
RUN groupadd --system --gid 10001 claimtrail \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/claimtrail --shell /usr/sbin/nologin claimtrail \
 && install -d -o 10001 -g 10001 /var/lib/claimtrail
COPY --from=build /wheels /tmp/wheels
RUN python -m pip install --no-cache-dir --no-index --find-links /tmp/wheels claimtrail \
 && rm -rf /tmp/wheels
ENV CLAIMTRAIL_DATA_DIR=/var/lib/claimtrail \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /var/lib/claimtrail
USER 10001:10001
EXPOSE 8080 8501
ENTRYPOINT ["claimtrail"]
CMD ["--help"]
