# syntax=docker/dockerfile:1
# gangkeeper: one image for every component (`gangkeeper webhook`, `gangkeeper controller`,
# `gangkeeper certs install`); deploy/ picks the subcommand with the container's args.

# Builder: turn the project and its dependencies into wheels. Every dependency ships manylinux
# wheels, so the builder needs no compiler either; it exists to keep pip's build tooling,
# the source tree and its caches out of the final image.
FROM python:3.11.14-slim-bookworm AS builder
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Final: the interpreter and installed wheels only. No dev or test extras, no compilers,
# no shell customisation; runs as an unprivileged numeric user that Kubernetes can check
# against runAsNonRoot without reading /etc/passwd.
FROM python:3.11.14-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The wheels are bind-mounted from the builder (BuildKit), so they never become a layer.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/gangkeeper-*.whl
USER 65532:65532
EXPOSE 9443
ENTRYPOINT ["gangkeeper"]
CMD ["webhook"]
