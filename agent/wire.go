// Package agent holds the thin C JVMTI agent (src/, embedded by Library) and
// the Go side of its wire format: the Reader that decodes the agent's stream
// and an Encoder that writes the same format for tests and fakes.
//
// The stream is a sequence of batches, all integers little-endian:
//
//	batch  = u32 magic "DXJB" (0x424A5844), u16 version (1), u16 flags (0),
//	         u32 payload_len, u32 nrecords, u64 watermark, payload
//	record = u32 body_len, u16 type, u16 reserved (0), body
//	string = u32 len, bytes (no NUL)
//
// The watermark is CLOCK_MONOTONIC in ns when the batch was cut: every record
// stamped at or before it has been sent by the end of the batch, and records
// within the stream are in timestamp order. Readers skip unknown record types
// (returned as Unknown) and ignore trailing bytes in known bodies, so fields
// can be appended without a version bump.
package agent

import "fmt"

// Wire constants.
const (
	Magic        = 0x424A5844 // "DXJB" as little-endian bytes
	Version      = 1          // batch format version
	ProtoVersion = 1          // HELLO proto_version
	HeaderLen    = 24         // batch header size
	RecHeaderLen = 8          // record header size

	// MaxPayload bounds one batch so that a corrupt peer cannot make the
	// reader allocate gigabytes. The agent's batches are at most 4 MiB.
	MaxPayload = 64 << 20
)

// RecordType is the type field of a record header.
type RecordType uint16

// Record types.
const (
	TypeHello  RecordType = 1
	TypeMethod RecordType = 2
	TypeAlloc  RecordType = 3
	TypeStats  RecordType = 4
	TypeBye    RecordType = 5
	TypeError  RecordType = 6
	// TypeInterval: the agent raised the heap sampling interval to stay
	// within its callback budget; allocations after Time use it.
	TypeInterval RecordType = 7
)

func (t RecordType) String() string {
	switch t {
	case TypeHello:
		return "HELLO"
	case TypeMethod:
		return "METHOD"
	case TypeAlloc:
		return "ALLOC"
	case TypeStats:
		return "STATS"
	case TypeBye:
		return "BYE"
	case TypeError:
		return "ERROR"
	case TypeInterval:
		return "INTERVAL"
	}
	return fmt.Sprintf("type %d", uint16(t))
}

// Record is one decoded record: *Hello, *Method, *Alloc, *Stats, *Bye,
// *ErrorRec, *Interval or *Unknown.
type Record interface {
	Type() RecordType
}

// Batch is one batch of the stream.
type Batch struct {
	// Watermark is CLOCK_MONOTONIC ns at the cut: no later batch holds a
	// record stamped at or before it.
	Watermark uint64
	Records   []Record
}

// Hello is the first record of a stream.
type Hello struct {
	ProtoVersion uint32
	PID          uint32 // in the JVM's own pid namespace
	Interval     uint64 // heap sampling interval, bytes
	MinSize      uint64 // smaller sampled objects are only counted
	Monotonic    uint64 // CLOCK_MONOTONIC ns when the session started
	VMName       string // java.vm.name
	VMVersion    string // java.vm.version
	Mode         string // "attach" or "launch"
}

// Method describes a jmethodID, sent before the first ALLOC that uses it.
type Method struct {
	ID         uint64 // jmethodID
	ClassSig   string // JVM form, "Ljava/util/HashMap;"
	Name       string
	Sig        string // "(I)V"
	SourceFile string // "" when absent
	Lines      []LineEntry
}

// LineEntry maps bytecode indices from Start onwards to a source line.
type LineEntry struct {
	Start int64
	Line  int32
}

// Alloc is one sampled allocation of at least MinSize bytes.
type Alloc struct {
	Time    uint64 // CLOCK_MONOTONIC ns when recorded (Addr was read then)
	Addr    uint64 // object address at Time
	Size    uint64 // bytes, header included
	TID     uint32 // kernel thread id
	TypeSig string // JVM form, "[J"
	Frames  []Frame
}

// Frame is one stack frame, innermost first.
type Frame struct {
	Method uint64 // jmethodID, described by an earlier METHOD record
	BCI    int64  // bytecode index; -1 for native methods
}

// Stats carries the agent's cumulative counters; one ends every batch.
type Stats struct {
	Callbacks    uint64 // SampledObjectAlloc callbacks
	BelowMinSize uint64
	Dropped      uint64 // records dropped because the buffer was full
	StackErrors  uint64 // GetStackTrace failures (the ALLOC has no frames)
	AllocsSent   uint64
}

// Bye is the last record of a stream.
type Bye struct {
	Reason string // "detach" or "vmdeath"
}

// Interval says that from Time on the heap sampling interval is Interval
// bytes (body: u64 time, u64 interval).
type Interval struct {
	Time     uint64
	Interval uint64
}

// ErrorRec reports a non-fatal problem inside the agent.
type ErrorRec struct {
	Message string
}

// Unknown is a record of a type this package does not know.
type Unknown struct {
	RecType RecordType
	Body    []byte
}

func (*Hello) Type() RecordType     { return TypeHello }
func (*Method) Type() RecordType    { return TypeMethod }
func (*Alloc) Type() RecordType     { return TypeAlloc }
func (*Stats) Type() RecordType     { return TypeStats }
func (*Bye) Type() RecordType       { return TypeBye }
func (*ErrorRec) Type() RecordType  { return TypeError }
func (*Interval) Type() RecordType  { return TypeInterval }
func (u *Unknown) Type() RecordType { return u.RecType }
