# IntelliScale recommender: a slim image that runs as a non-root user.
#   docker build -t intelliscale-recommender .
#   docker run -p 50051:50051 -e RECOMMENDER_DATABASE_URL=postgresql+psycopg://... intelliscale-recommender
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY proto ./proto
COPY recommender ./recommender
COPY migrations ./migrations
# The protobuf/gRPC modules are generated from proto/ while the wheel is built.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --create-home --uid 10001 recommender
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER recommender
WORKDIR /home/recommender
ENV RECOMMENDER_PORT=50051 \
    RECOMMENDER_DATABASE_URL=sqlite:////home/recommender/recommender.db \
    PYTHONUNBUFFERED=1
EXPOSE 50051
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import grpc,os;from grpc_health.v1 import health_pb2 as h,health_pb2_grpc as g;c=grpc.insecure_channel('127.0.0.1:'+os.environ['RECOMMENDER_PORT']);s=g.HealthStub(c).Check(h.HealthCheckRequest(),timeout=2).status;raise SystemExit(0 if s==h.HealthCheckResponse.SERVING else 1)"
ENTRYPOINT ["recommender"]
CMD ["serve"]
