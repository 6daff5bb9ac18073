// Command otelcol is the smallest OpenTelemetry Collector that the
// continuous-profiling tests need: the OTLP receiver and dumpexporter,
// which writes every profile it receives to a file as JSON lines. The
// tests build it from the module proxy (cmd/djx-bpf's collector helper), so
// that what djx-bpf sends is read by the Collector's own OTLP decoder.
package main

import (
	"fmt"
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	factories := func() (otelcol.Factories, error) {
		return otelcol.Factories{
			Receivers: map[component.Type]receiver.Factory{otlpreceiver.NewFactory().Type(): otlpreceiver.NewFactory()},
			Exporters: map[component.Type]exporter.Factory{dumpType: newDumpFactory()},
			Telemetry: otelconftelemetry.NewFactory(),
		}, nil
	}
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "djx-bpf test collector", Version: "test"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
			DefaultScheme:     "file",
		}},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
