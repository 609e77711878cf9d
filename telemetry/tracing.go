package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Tracing is an OpenTelemetry tracer provider that sends spans with OTLP over
// HTTP, batched by a goroutine of the SDK's that Shutdown stops (after sending
// what is left).
type Tracing struct {
	*sdktrace.TracerProvider
	Endpoint string // where spans go, for messages
}

// envEndpoint is the standard variable that turns tracing on without a config
// entry (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the traces-only one, is also read).
const envEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// NewTracing starts tracing to endpoint (the collector's base URL, as the config's
// tracing.endpoint; spans go to its /v1/traces), or, when endpoint is "", to the
// endpoint the standard OTEL_EXPORTER_OTLP_ENDPOINT variables name. It returns nil
// when neither is set: tracing is off unless configured.
func NewTracing(ctx context.Context, endpoint, version string) (*Tracing, error) {
	var opts []otlptracehttp.Option
	where := endpoint
	switch {
	case endpoint != "":
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, fmt.Errorf("tracing endpoint %q: %w", endpoint, err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		where = u.String()
		opts = append(opts, otlptracehttp.WithEndpointURL(where))
	case os.Getenv(envEndpoint) != "":
		where = os.Getenv(envEndpoint)
	case os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		where = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	default:
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, append(opts, otlptracehttp.WithTimeout(10*time.Second))...)
	if err != nil {
		return nil, fmt.Errorf("tracing to %s: %w", where, err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "nexus"), attribute.String("service.version", version))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{TracerProvider: tp, Endpoint: where}, nil
}
