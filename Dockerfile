# IntelliScale recommender: a slim image that runs as the non-root uid 10001.
#   docker build -t intelliscale-recommender .
#   docker run -p 50051:50051 -e RECOMMENDER_DATABASE_URL=postgresql+psycopg://... intelliscale-recommender
# Kubernetes: deploy/kubernetes/ (kustomize base and overlays).

# --- build: the project and its dependencies into a virtualenv -----------------------------
# No compiler is needed: grpcio, grpcio-tools, psycopg[binary], numpy, scipy and scikit-learn
# all ship manylinux wheels for CPython 3.11 on amd64 and arm64.
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
# pyproject.toml names README.md as the readme: the build fails without it.
COPY pyproject.toml setup.py README.md ./
COPY proto ./proto
COPY recommender ./recommender
COPY migrations ./migrations
# setup.py generates the protobuf/gRPC modules from proto/ with grpcio-tools (a build
# requirement in pyproject.toml) while the package is built; pip compiles the .pyc files here,
# so the read-only root filesystem at run time costs nothing. The import check runs with -P:
# from /src, plain `python -c` would import the source tree (no recommender.migrations there)
# instead of what was installed.
RUN /opt/venv/bin/pip install . \
 && /opt/venv/bin/python -P -c "import recommender._proto.intelliscale.recommender.v1.recommender_pb2_grpc, recommender.migrations"

# --- run -----------------------------------------------------------------------------------
FROM python:3.11-slim-bookworm
RUN groupadd --gid 10001 recommender \
 && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin recommender
# Only the installed virtualenv comes over: no wheels, sources or build tools in any layer.
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    RECOMMENDER_PORT=50051 \
    RECOMMENDER_DATABASE_URL=sqlite:////home/recommender/recommender.db
# Numeric, so that Kubernetes can check runAsNonRoot without a runAsUser.
USER 10001:10001
WORKDIR /home/recommender
# gRPC, and Prometheus /metrics (--metrics-port).
EXPOSE 50051 9464
# Docker only (Kubernetes ignores HEALTHCHECK and uses its own grpc probes): the standard
# grpc.health.v1 service must say SERVING. It speaks plaintext: with --tls-cert, override it
# (docker run --health-cmd ...) or turn it off (--no-healthcheck).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD python -c "import grpc,os;from grpc_health.v1 import health_pb2 as h,health_pb2_grpc as g;c=grpc.insecure_channel('127.0.0.1:'+os.environ.get('RECOMMENDER_PORT','50051'));s=g.HealthStub(c).Check(h.HealthCheckRequest(),timeout=3).status;raise SystemExit(0 if s==h.HealthCheckResponse.SERVING else 1)"
ENTRYPOINT ["recommender"]
CMD ["serve"]
