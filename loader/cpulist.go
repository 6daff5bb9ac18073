package loader

import (
	"fmt"
	"strconv"
	"strings"
)

// parseCPUList parses the kernel's cpu list format ("0-3,5,7-8").
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("bad cpu %q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("bad cpu range %q: %w", part, err)
			}
		}
		if b < a {
			return nil, fmt.Errorf("bad cpu range %q", part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("empty cpu list %q", s)
	}
	return cpus, nil
}
