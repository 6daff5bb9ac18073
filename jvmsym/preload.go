package jvmsym

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/djx-bpf/djx-bpf/safety/elfsafe"
)

// LibJVM is the libjvm.so of the java launcher at path (symbolic links
// followed, as /usr/bin/java is): JAVA_HOME/lib/server, or
// JAVA_HOME/jre/lib/amd64/server for JDK 8 layouts.
func LibJVM(java string) (string, error) {
	real, err := filepath.EvalSymlinks(java)
	if err != nil {
		return "", fmt.Errorf("find libjvm.so: %w", err)
	}
	home := filepath.Dir(filepath.Dir(real))
	for _, rel := range []string{"lib/server/libjvm.so", "jre/lib/amd64/server/libjvm.so"} {
		p := filepath.Join(home, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("find libjvm.so: none under %s", home)
}

// Preloaded holds a library's symbols in the cache the Natives share for
// as long as it is referenced.
type Preloaded struct{ es *elfSyms }

// Preload reads the symbols of the ELF file at path into that cache. Launch
// mode reads libjvm's (57k symbols, about 0.1 s of CPU) before the JVM
// starts, not while its start-up needs both CPUs.
func Preload(path string) (*Preloaded, error) {
	// Through elfsafe too: the JDK's directory need not be root's.
	ef, err := elfsafe.OpenPath(path)
	if err != nil {
		return nil, fmt.Errorf("preload symbols: %w", err)
	}
	defer ef.Close()
	es, err := cachedELFSyms(ef)
	if err != nil {
		return nil, fmt.Errorf("preload symbols of %s: %w", path, err)
	}
	return &Preloaded{es: es}, nil
}
