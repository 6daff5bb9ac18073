// Package pmu describes the perf event sources that can sample data
// addresses on this machine: which exist, why the others do not, and the
// exact perf_event_attr each would be opened with.
//
// Detection reads only files below an injectable root (/proc/cpuinfo,
// /sys/bus/event_source/devices/*, /proc/sys/kernel/perf_event_paranoid,
// /proc/sys/kernel/osrelease), so fixture trees of real machines can be
// tested anywhere. Whether the kernel accepts an attr is asked separately
// through a Prober.
package pmu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Vendor is the CPU vendor as named in /proc/cpuinfo.
type Vendor string

// Vendors recognized by the catalog.
const (
	VendorIntel   Vendor = "GenuineIntel"
	VendorAMD     Vendor = "AuthenticAMD"
	VendorARM     Vendor = "ARM" // arm64: CPU implementer 0x41
	VendorUnknown Vendor = ""
)

// CPUInfo is what the catalog needs from /proc/cpuinfo (first processor).
type CPUInfo struct {
	Vendor    Vendor
	Family    int // x86 "cpu family"
	Model     int // x86 "model"
	ModelName string
	// Implementer and Part identify arm64 cores (e.g. 0x41/0xd0c Neoverse N1).
	Implementer int
	Part        int
	// Hypervisor: the "hypervisor" flag, set by every x86 hypervisor in
	// CPUID.1:ECX[31]. Guests usually lack PEBS/IBS passthrough.
	Hypervisor bool
	// IBS: the "ibs" flag (CPUID 0x80000001 ECX[10]); a guest may hide it.
	IBS   bool
	Flags map[string]bool
}

// Format is one sysfs format field such as "config1:0-15": the value of a
// term is scattered into these bit ranges of one config word.
type Format struct {
	Name   string
	Config int // 0 config, 1 config1, 2 config2, 3 config3
	Ranges [][2]int
}

// Bits returns the width of the field in bits.
func (f Format) Bits() int {
	n := 0
	for _, r := range f.Ranges {
		n += r[1] - r[0] + 1
	}
	return n
}

func (f Format) String() string {
	var parts []string
	for _, r := range f.Ranges {
		if r[0] == r[1] {
			parts = append(parts, strconv.Itoa(r[0]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
	}
	return configName(f.Config) + ":" + strings.Join(parts, ",")
}

func configName(i int) string {
	if i == 0 {
		return "config"
	}
	return "config" + strconv.Itoa(i)
}

// PMU is one directory of /sys/bus/event_source/devices.
type PMU struct {
	Name    string
	Type    uint32
	Formats map[string]Format
	Caps    map[string]string
	Events  map[string]string // alias → terms, e.g. mem-loads → event=0xcd,umask=0x1,ldlat=3
	CPUs    string            // "cpus" or "cpumask" file, when present
}

// FormatNames returns the sorted format field names.
func (p *PMU) FormatNames() []string {
	names := make([]string, 0, len(p.Formats))
	for n := range p.Formats {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Machine is the detected state of one machine (or fixture tree).
type Machine struct {
	Root string
	CPU  CPUInfo
	PMUs map[string]*PMU
	// Paranoid is kernel.perf_event_paranoid; ParanoidKnown is false when
	// the file is missing.
	Paranoid      int
	ParanoidKnown bool
	// Kernel is /proc/sys/kernel/osrelease ("6.18.0-..."); KernelMajor and
	// KernelMinor are 0 when it could not be read.
	Kernel                   string
	KernelMajor, KernelMinor int
	// Privileged: root, CAP_PERFMON or CAP_SYS_ADMIN in the effective set.
	// Detect reads it from /proc/self/status of the caller (not the root
	// tree); fixtures set it explicitly.
	Privileged bool
	// Prober, when set, is asked whether each otherwise available entry
	// actually opens; nil skips live probing (fixtures, dry runs).
	Prober Prober
}

// PMUNames returns the sorted names of the PMUs found.
func (m *Machine) PMUNames() []string {
	names := make([]string, 0, len(m.PMUs))
	for n := range m.PMUs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

const devicesDir = "sys/bus/event_source/devices"

// Detect reads the CPU, PMUs, paranoid level and kernel release below root
// ("/" for the running machine). It fails only if the event_source
// directory cannot be listed; other missing files leave zero values.
func Detect(root string) (*Machine, error) {
	if root == "" {
		root = "/"
	}
	m := &Machine{Root: root, PMUs: map[string]*PMU{}}
	if b, err := os.ReadFile(filepath.Join(root, "proc/cpuinfo")); err == nil {
		m.CPU = parseCPUInfo(b)
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/perf_event_paranoid")); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			m.Paranoid, m.ParanoidKnown = v, true
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/osrelease")); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
		m.KernelMajor, m.KernelMinor = parseRelease(m.Kernel)
	}
	m.Privileged = selfPrivileged()
	dir := filepath.Join(root, devicesDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list perf event sources in %s: %w", dir, err)
	}
	for _, e := range ents {
		p, err := readPMU(filepath.Join(dir, e.Name()), e.Name())
		if err != nil {
			return nil, err
		}
		if p != nil {
			m.PMUs[p.Name] = p
		}
	}
	return m, nil
}

func readPMU(dir, name string) (*PMU, error) {
	b, err := os.ReadFile(filepath.Join(dir, "type"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // not a PMU
	}
	if err != nil {
		return nil, fmt.Errorf("read type of pmu %s: %w", name, err)
	}
	t, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("parse type of pmu %s: %w", name, err)
	}
	p := &PMU{Name: name, Type: uint32(t), Formats: map[string]Format{}, Caps: map[string]string{}, Events: map[string]string{}}
	for n, v := range readDir(filepath.Join(dir, "format")) {
		f, err := ParseFormat(n, v)
		if err != nil {
			return nil, fmt.Errorf("pmu %s: %w", name, err)
		}
		p.Formats[n] = f
	}
	p.Caps = readDir(filepath.Join(dir, "caps"))
	for n, v := range readDir(filepath.Join(dir, "events")) {
		// .scale/.unit/.snapshot/.per-pkg describe counting, not events.
		if !strings.Contains(n, ".") {
			p.Events[n] = v
		}
	}
	for _, f := range []string{"cpus", "cpumask"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			p.CPUs = strings.TrimSpace(string(b))
			break
		}
	}
	return p, nil
}

// readDir returns name → trimmed contents of the regular files of dir.
func readDir(dir string) map[string]string {
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // unreadable attribute: treat as absent
		}
		out[e.Name()] = strings.TrimSpace(string(b))
	}
	return out
}

// ParseFormat parses a sysfs format value such as "config:0-7,32-35",
// "config1:0-15" or "config:19".
func ParseFormat(name, s string) (Format, error) {
	f := Format{Name: name}
	word, bits, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return f, fmt.Errorf("format %s: %q lacks a config word", name, s)
	}
	switch word {
	case "config":
		f.Config = 0
	case "config1", "config2", "config3":
		f.Config = int(word[6] - '0')
	default:
		return f, fmt.Errorf("format %s: unknown config word %q", name, word)
	}
	for _, r := range strings.Split(bits, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return f, fmt.Errorf("format %s: bad bit %q: %w", name, r, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return f, fmt.Errorf("format %s: bad bit range %q: %w", name, r, err)
			}
		}
		if a < 0 || b > 63 || b < a {
			return f, fmt.Errorf("format %s: bit range %q outside 0-63", name, r)
		}
		f.Ranges = append(f.Ranges, [2]int{a, b})
	}
	return f, nil
}

func parseCPUInfo(b []byte) CPUInfo {
	var c CPUInfo
	c.Flags = map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if c.Vendor != "" {
				break // first processor is enough
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "vendor_id":
			c.Vendor = Vendor(v)
		case "cpu family":
			c.Family, _ = strconv.Atoi(v)
		case "model":
			c.Model, _ = strconv.Atoi(v)
		case "model name":
			c.ModelName = v
		case "flags", "Features":
			for _, f := range strings.Fields(v) {
				c.Flags[f] = true
			}
		case "CPU implementer":
			n, _ := strconv.ParseInt(v, 0, 32)
			c.Implementer = int(n)
			if n == 0x41 && c.Vendor == "" {
				c.Vendor = VendorARM
			}
		case "CPU part":
			n, _ := strconv.ParseInt(v, 0, 32)
			c.Part = int(n)
		}
	}
	c.Hypervisor = c.Flags["hypervisor"]
	c.IBS = c.Flags["ibs"]
	return c
}

func parseRelease(s string) (int, int) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return 0, 0
	}
	maj, err1 := strconv.Atoi(parts[0])
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	mn, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return maj, mn
}

// kernelAtLeast reports whether the detected kernel is at least maj.min;
// an unknown kernel is given the benefit of the doubt.
func (m *Machine) kernelAtLeast(maj, min int) bool {
	if m.KernelMajor == 0 {
		return true
	}
	return m.KernelMajor > maj || m.KernelMajor == maj && m.KernelMinor >= min
}

// Capability bits in CapEff (include/uapi/linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
)

func selfPrivileged() bool {
	if os.Geteuid() == 0 {
		return true
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<capSysAdmin|1<<capPerfmon) != 0
		}
	}
	return false
}
