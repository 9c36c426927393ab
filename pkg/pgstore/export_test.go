package pgstore

// ChangesSeen counts the change notifications the store's listener has
// applied, so that a test waits on the event, not on the clock.
func (s *Store) ChangesSeen() uint64 { return s.wake.seen.Load() }

// Listening reports whether the listener is connected and listening.
func (s *Store) Listening() bool { return s.wake.up.Load() }
