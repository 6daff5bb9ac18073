package profiler

import (
	"fmt"
	"os"

	"github.com/djx-bpf/djx-bpf/loader"
)

// Event names accepted by --event.
const (
	EventAuto       = "auto"
	EventDecode     = "decode"
	EventPageFaults = "page-faults"
)

// hwSampling lists the PMUs that expose data-address sampling, by the sysfs
// path that reveals them.
var hwSampling = []struct{ path, name string }{
	{"/sys/bus/event_source/devices/cpu/events/mem-loads", "Intel PEBS (mem-loads)"},
	{"/sys/bus/event_source/devices/cpu_core/events/mem-loads", "Intel PEBS (mem-loads)"},
	{"/sys/bus/event_source/devices/ibs_op", "AMD IBS (ibs_op)"},
	{"/sys/bus/event_source/devices/arm_spe_0", "ARM SPE (arm_spe_0)"},
}

// chooseSource maps --event to a sample source and says why, for auto.
func chooseSource(event string, root string) (loader.Source, string, error) {
	switch event {
	case EventDecode:
		return loader.Decode, "", nil
	case EventPageFaults:
		return loader.PageFaults, "", nil
	case "", EventAuto:
		for _, hw := range hwSampling {
			if _, err := os.Stat(root + hw.path); err == nil {
				return loader.Decode, fmt.Sprintf("event auto: %s found, but hardware address sampling is not implemented yet; using decode", hw.name), nil
			}
		}
		return loader.Decode, "event auto: no hardware address-sampling PMU (Intel PEBS, AMD IBS, ARM SPE) on this machine; using decode (software timer + instruction decoding)", nil
	}
	return "", "", fmt.Errorf("unknown event %q: use auto, decode or page-faults", event)
}
