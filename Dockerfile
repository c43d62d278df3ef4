# webhookd as a minimal container image: a static binary on distroless.
# Docker is not available in this project's CI: this file is not built
# there (docs/development.md).
#
#   docker build -t webhookd .

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so that a code change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/webhookd ./cmd/webhookd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/webhookd /usr/local/bin/webhookd
# In a container the listeners must leave loopback to be reached.
ENV WEBHOOKD_LISTEN=0.0.0.0:8080 \
    WEBHOOKD_INTERNAL_LISTEN=0.0.0.0:8081
EXPOSE 8080 8081
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/webhookd"]
CMD ["serve"]
