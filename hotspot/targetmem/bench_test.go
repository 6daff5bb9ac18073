package targetmem

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkRead compares a read through the executor with a direct
// process_vm_readv on this thread, for a small, a page-sized, a 1 MiB
// read and a vector of 1024 small spans (the heap walk's batches).
func BenchmarkRead(b *testing.B) {
	src := make([]byte, 1<<20)
	for i := range src {
		src[i] = byte(i)
	}
	pid := os.Getpid()
	for _, size := range []int{8, 4096, 1 << 20} {
		dst := make([]byte, size)
		b.Run("direct/"+itoa(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				local := []unix.Iovec{{Base: &dst[0]}}
				local[0].SetLen(size)
				remote := []unix.RemoteIovec{{Base: uintptr(addr(src)), Len: size}}
				if n, err := unix.ProcessVMReadv(pid, local, remote, 0); n != size || err != nil {
					b.Fatal(n, err)
				}
			}
		})
		b.Run("executor/"+itoa(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			r := Open(pid)
			for b.Loop() {
				if n, err := r.ReadAt(dst, int64(addr(src))); n != size || err != nil {
					b.Fatal(n, err)
				}
			}
		})
	}
	spans := make([]Span, 1024)
	for i := range spans {
		spans[i] = Span{addr(src) + uint64(i*997%(1<<20-64)), 64}
	}
	dst := make([]byte, 64*len(spans))
	b.Run("direct/vector1024x64", func(b *testing.B) {
		remote := make([]unix.RemoteIovec, len(spans))
		for i, s := range spans {
			remote[i] = unix.RemoteIovec{Base: uintptr(s.Addr), Len: s.Len}
		}
		for b.Loop() {
			local := []unix.Iovec{{Base: &dst[0]}}
			local[0].SetLen(len(dst))
			if n, err := unix.ProcessVMReadv(pid, local, remote, 0); n != len(dst) || err != nil {
				b.Fatal(n, err)
			}
		}
	})
	b.Run("executor/vector1024x64", func(b *testing.B) {
		r := Open(pid)
		for b.Loop() {
			if n, err := r.ReadVector(dst, spans); n != len(dst) || err != nil {
				b.Fatal(n, err)
			}
		}
	})
}

func itoa(n int) string {
	switch {
	case n >= 1<<20:
		return string(rune('0'+n>>20)) + "MiB"
	case n >= 1024:
		return string(rune('0'+n>>12)) + "page"
	}
	return "8B"
}
