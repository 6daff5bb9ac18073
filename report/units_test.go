package report

import "testing"

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0B", 1023: "1023B", 1024: "1KiB", 1536: "1.5KiB", 8 << 20: "8MiB", 3 << 30: "3GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]uint64{"1KiB": 1024, "4k": 4096, "2MB": 2 << 20, "512": 512, " 1.5kib ": 1536, "1g": 1 << 30, "64B": 64} {
		got, err := ParseBytes(s)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "k", "-1", "1x", "abc"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", bad)
		}
	}
}
