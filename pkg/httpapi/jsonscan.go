package httpapi

// jsonStrings follows a byte-by-byte scan of JSON text in and out of its
// strings, so that the scanners of request bodies (jsonDepthExceeds,
// checkNumbers) see only the structure and the numbers: a bracket or a
// digit inside a string is text.
type jsonStrings struct{ in, escaped bool }

// skip reports whether c belongs to a string, its quotes included, and
// moves past it.
func (s *jsonStrings) skip(c byte) bool {
	if s.in {
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.in = false
		}
		return true
	}
	if c == '"' {
		s.in = true
		return true
	}
	return false
}
