package openj9

import "testing"

// FuzzParseProperties: attachInfo files and every reply of an OpenJ9
// target are Java properties texts the target writes.
func FuzzParseProperties(f *testing.F) {
	f.Add([]byte("version=0.1\nvmId=1\nprocessId=1\ndisplayName=a\\ b\nuserUid=0\n"))
	f.Add([]byte("a\\\n b=\\u00e9\\"))
	f.Add([]byte(storeProperties(map[string]string{"openj9_diagnostics.string_result": "Dump written to /tmp/x"})))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseAttachInfo(data)
		loadResult(string(data))
	})
}
