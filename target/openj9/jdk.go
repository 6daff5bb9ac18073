package openj9

import (
	"os/exec"
	"path/filepath"
)

// Launches says whether the java command java (a path, or a name looked up
// in PATH) belongs to an OpenJ9 JDK: its lib/ holds libj9vm.
func Launches(java string) bool {
	path, err := exec.LookPath(java)
	if err != nil {
		return false
	}
	if path, err = filepath.EvalSymlinks(path); err != nil {
		return false
	}
	home := filepath.Dir(filepath.Dir(path))
	for _, pat := range []string{"lib/*/libj9vm*.so", "jre/lib/*/*/libj9vm*.so"} {
		if m, _ := filepath.Glob(filepath.Join(home, pat)); len(m) > 0 {
			return true
		}
	}
	return false
}
