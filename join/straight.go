package join

import (
	"github.com/djx-bpf/djx-bpf/sources/decode"
	"github.com/djx-bpf/djx-bpf/sources/sample"
)

// maxStraightMethod bounds the compiled methods read whole for
// decode.Code.Straight, and maxStraightBytes the bytes the join keeps.
const (
	maxStraightMethod = 64 << 10
	maxStraightBytes  = 8 << 20
)

// straightCache holds the compiled methods read for Straight, by start,
// and by the ips sampled in them: a sample at a known ip whose bytes the
// method still holds needs no lookup in the code cache.
type straightCache struct {
	byStart map[uint64]*decode.Code
	byIP    map[uint64]*decode.Code
	bytes   int
}

// maxStraightIPs bounds straightCache.byIP.
const maxStraightIPs = 1 << 16

// straight gives a decode sample with no address the last load before ip
// in its compiled method's straight-line code. The method is read from
// the JVM once, and used only while it holds the bytes the sample saw.
func (j *JVM) straight(s *sample.Sample, before, at []byte) decode.Result {
	if j.codeMap == nil || j.codeMem == nil {
		return decode.Result{}
	}
	ip := s.IP()
	sc := &j.straightCode
	if c := sc.byIP[ip]; c != nil && c.Holds(ip, before, at) {
		return c.Straight(&j.regs)
	}
	hit, ok := j.codeMap.Lookup(ip)
	if !ok || hit.Stub != "" || hit.Size == 0 || hit.Size > maxStraightMethod {
		return decode.Result{}
	}
	c := sc.byStart[hit.Start]
	if c == nil || uint64(len(c.Bytes)) != hit.Size || !c.Holds(ip, before, at) {
		buf := make([]byte, hit.Size)
		if m, err := j.codeMem.ReadAt(buf, int64(hit.Start)); err != nil || m != len(buf) {
			return decode.Result{}
		}
		c = decode.NewCode(hit.Start, buf)
		if !c.Holds(ip, before, at) {
			return decode.Result{} // the code changed since the sample
		}
		if sc.byStart == nil || sc.bytes+len(buf) > maxStraightBytes {
			sc.byStart, sc.byIP, sc.bytes = make(map[uint64]*decode.Code), nil, 0
		}
		sc.byStart[hit.Start] = c
		sc.bytes += len(buf)
	}
	if sc.byIP == nil || len(sc.byIP) >= maxStraightIPs {
		sc.byIP = make(map[uint64]*decode.Code)
	}
	sc.byIP[ip] = c
	return c.Straight(&j.regs)
}
