package vmcode

import "container/list"

// lru is a cache bounded by the bytes its values hold, least recently
// used out first. Not safe for concurrent use.
type lru[K comparable, V any] struct {
	max, used int
	size      func(V) int
	ll        *list.List
	m         map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	k K
	v V
	n int
}

func newLRU[K comparable, V any](maxBytes int, size func(V) int) *lru[K, V] {
	return &lru[K, V]{max: maxBytes, size: size, ll: list.New(), m: make(map[K]*list.Element)}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	if e, ok := c.m[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*lruEntry[K, V]).v, true
	}
	var zero V
	return zero, false
}

func (c *lru[K, V]) put(k K, v V) {
	c.remove(k)
	n := c.size(v)
	c.m[k] = c.ll.PushFront(&lruEntry[K, V]{k, v, n})
	c.used += n
	for c.used > c.max && c.ll.Len() > 1 {
		c.remove(c.ll.Back().Value.(*lruEntry[K, V]).k)
	}
}

// grow accounts n more bytes held by k's value (a cache inside it grew),
// and drops the least recently used others past the budget.
func (c *lru[K, V]) grow(k K, n int) {
	e, ok := c.m[k]
	if !ok {
		return
	}
	e.Value.(*lruEntry[K, V]).n += n
	c.used += n
	c.ll.MoveToFront(e)
	for c.used > c.max && c.ll.Len() > 1 {
		c.remove(c.ll.Back().Value.(*lruEntry[K, V]).k)
	}
}

// bytes is what the values held, as counted.
func (c *lru[K, V]) bytes() int { return c.used }

func (c *lru[K, V]) remove(k K) {
	if e, ok := c.m[k]; ok {
		c.used -= e.Value.(*lruEntry[K, V]).n
		c.ll.Remove(e)
		delete(c.m, k)
	}
}

func (c *lru[K, V]) len() int { return c.ll.Len() }

func (c *lru[K, V]) clear() {
	c.ll.Init()
	clear(c.m)
	c.used = 0
}
