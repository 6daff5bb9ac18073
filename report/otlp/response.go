package otlp

import "encoding/binary"

// partialSuccess reads an ExportProfilesServiceResponse: its
// partial_success (field 1) holds rejected_profiles (1, int64) and
// error_message (2, string). Read by hand: pprofileotlp's decoder would
// bring the gRPC packages into the binary. An unreadable reply counts as
// no rejection: the status said the request was taken.
func partialSuccess(b []byte) (rejected int64, msg string) {
	for len(b) > 0 {
		num, typ, v, rest, ok := field(b)
		if !ok {
			return 0, ""
		}
		b = rest
		if num != 1 || typ != 2 {
			continue
		}
		for ps := v; len(ps) > 0; {
			n, t, pv, prest, ok := field(ps)
			if !ok {
				return rejected, msg
			}
			ps = prest
			switch {
			case n == 1 && t == 0:
				x, _ := binary.Uvarint(pv)
				rejected = int64(x)
			case n == 2 && t == 2:
				msg = string(pv)
			}
		}
	}
	return rejected, msg
}

// field splits one protobuf field off b: its number, wire type, value
// (a varint's bytes, or a length-delimited field's payload) and the rest.
func field(b []byte) (num uint64, typ int, v, rest []byte, ok bool) {
	key, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, nil, false
	}
	b = b[n:]
	num, typ = key>>3, int(key&7)
	switch typ {
	case 0:
		_, m := binary.Uvarint(b)
		if m <= 0 {
			return 0, 0, nil, nil, false
		}
		return num, typ, b[:m], b[m:], true
	case 1:
		if len(b) < 8 {
			return 0, 0, nil, nil, false
		}
		return num, typ, b[:8], b[8:], true
	case 2:
		l, m := binary.Uvarint(b)
		if m <= 0 || uint64(len(b)-m) < l {
			return 0, 0, nil, nil, false
		}
		return num, typ, b[m : m+int(l)], b[m+int(l):], true
	case 5:
		if len(b) < 4 {
			return 0, 0, nil, nil, false
		}
		return num, typ, b[:4], b[4:], true
	}
	return 0, 0, nil, nil, false
}
