package cache

// DropFromViewsForTest deletes the object of key from every store of l's
// views and from its pending set, telling no handler: an object lost the
// way a bug of the cache would lose it, which the self-check must find. It
// returns how many stores held it.
func DropFromViewsForTest(l *Labelled, key string) int {
	n := 0
	l.segs.mu.Lock()
	for _, seg := range l.segs.segments {
		if obj, ok, _ := seg.inf.GetStore().GetByKey(key); ok && seg.inf.GetStore().Delete(obj) == nil {
			n++
		}
	}
	l.segs.mu.Unlock()
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
