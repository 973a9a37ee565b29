package labelled

// DropForTest deletes the object of key from every store of l's views and
// from its pending set, telling no handler: an object lost the way a bug of
// the cache would lose it, which the self-check must find. It returns how
// many stores held it. For tests (shard/cache's self-check test) only.
func (l *Labelled) DropForTest(key string) int {
	n := l.segs.DropForTest(key)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.unlabelled {
		if obj, ok, _ := v.inf.GetStore().GetByKey(key); ok && v.inf.GetStore().Delete(obj) == nil {
			n++
		}
	}
	delete(l.pending, key)
	return n
}
