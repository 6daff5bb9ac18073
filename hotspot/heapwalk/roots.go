package heapwalk

// classMirrors walks the class loaders' lists of classes, as HotSpot
// keeps them without any agent (ClassLoaderDataGraph::_head, then each
// ClassLoaderData's _next; its _klasses, then each Klass's _next_link),
// and returns the java.lang.Class instance of every valid class: the
// walk's first roots, whose statics it follows. The lists change while
// the JVM loads classes: a cycle or an endless list stops at its cap.
func (w *walker) classMirrors() []uint64 {
	o := &w.l.off
	var mirrors []uint64
	seenCLD := make(map[uint64]bool)
	seenKlass := make(map[uint64]bool)
	cld, ok := w.r.u64(w.l.cldHead)
	if !ok {
		return nil
	}
	for cld != 0 {
		if seenCLD[cld] || len(seenCLD) >= w.cfg.MaxCLDs {
			w.stats.ClassesCapped = true
			break
		}
		seenCLD[cld] = true
		w.stats.CLDs++
		k, ok := w.r.u64(cld + o.cldKlasses)
		for ok && k != 0 {
			if seenKlass[k] || len(seenKlass) >= w.cfg.MaxClasses {
				w.stats.ClassesCapped = true
				break
			}
			seenKlass[k] = true
			w.stats.Classes++
			if kl := w.klassAt(k); kl != nil {
				mirrors = append(mirrors, kl.mirror)
			}
			k, ok = w.r.u64(k + o.klassNextLink)
		}
		if cld, ok = w.r.u64(cld + o.cldNext); !ok {
			break
		}
	}
	return mirrors
}
