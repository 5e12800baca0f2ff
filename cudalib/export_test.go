package cudalib

// ContextsForTest returns the number of contexts that have a value of their own.
func (s *Setting[T]) ContextsForTest() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.vals)
}
