package jvmsym

import "strings"

// maxArrayDims is the JVM's limit on array dimensions (JVMS §4.3.2).
const maxArrayDims = 255

// MethodSignature converts a JVM method descriptor to Java type names:
// "(I[Ljava/lang/String;[[D)V" gives ["int", "java.lang.String[]",
// "double[][]"] and "void". Malformed descriptors give ok=false rather than
// a half-parsed, possibly wrong, name.
func MethodSignature(sig string) (params []string, ret string, ok bool) {
	if len(sig) < 3 || sig[0] != '(' {
		return nil, "", false
	}
	rest := sig[1:]
	for {
		if rest == "" {
			return nil, "", false
		}
		if rest[0] == ')' {
			rest = rest[1:]
			break
		}
		n := fieldDescriptorLen(rest)
		if n == 0 || rest[n-1] == 'V' {
			return nil, "", false
		}
		params = append(params, TypeName(rest[:n]))
		rest = rest[n:]
	}
	if rest == "V" {
		return params, "void", true
	}
	if n := fieldDescriptorLen(rest); n == 0 || n != len(rest) || rest[n-1] == 'V' {
		return nil, "", false
	}
	return params, TypeName(rest), true
}

// fieldDescriptorLen is the length of the field descriptor at the start of
// s, or 0 when there is none. 'V' is accepted as a base type so that the
// caller decides where void is legal.
func fieldDescriptorLen(s string) int {
	dims := 0
	for dims < len(s) && s[dims] == '[' {
		dims++
	}
	if dims > maxArrayDims || dims == len(s) {
		return 0
	}
	switch c := s[dims]; {
	case c == 'V' && dims > 0:
		return 0
	case primitives[c] != "":
		return dims + 1
	case c == 'L':
		end := strings.IndexByte(s[dims:], ';')
		if end < 0 || !validInternalName(s[dims+1:dims+end]) {
			return 0
		}
		return dims + end + 1
	}
	return 0
}

// validInternalName checks a binary class name in internal form
// ("java/util/HashMap$Node"): non-empty identifiers separated by '/', none
// containing the characters the JVM forbids in them (JVMS §4.2).
func validInternalName(s string) bool {
	if s == "" {
		return false
	}
	for part := range strings.SplitSeq(s, "/") {
		if part == "" || strings.ContainsAny(part, ".;[<>") {
			return false
		}
	}
	return true
}
