FROM golang:1.23 AS build
WORKDIR /src
COPY scripts/pipeline.go .
RUN CGO_ENABLED=0 go build -o /pipeline pipeline.go
FROM alpine
COPY --from=build /pipeline /usr/bin/pipeline
ADD resources /resources
ENTRYPOINT ["/usr/bin/pipeline"]
