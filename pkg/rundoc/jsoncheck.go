package rundoc

import "bytes"

// ObjectMember checks that doc is one JSON object, by the grammar
// encoding/json's Valid accepts (RFC 8259), and finds the value of its own
// member key (not a nested object's) when it is a number: doc[start:end],
// found false otherwise (for duplicate keys, the last). It is one pass
// over doc where json.Valid and a search for the member took two, at over
// twice json.Valid's speed (BenchmarkObjectMember): json.Valid was about
// 40% of the store's cost of a page of run summaries read as JSON
// (summaryJSON). A key is compared as written: one spelled with escapes
// is not key. Objects and arrays nested deeper than MaxCheckDepth are
// refused (a summary nests a few levels; json.Valid allows 10,000).
func ObjectMember(doc []byte, key string) (start, end int, found, valid bool) {
	c := jsonCheck{b: doc, key: key}
	c.space()
	if c.i >= len(c.b) || c.b[c.i] != '{' || !c.value(0) {
		return 0, 0, false, false
	}
	c.space()
	if c.i != len(c.b) {
		return 0, 0, false, false
	}
	return c.start, c.end, c.found, true
}

const MaxCheckDepth = 64

// jsonCheck is a recursive descent over JSON text: each method reads one
// production from b[i], advancing i past it, and reports whether it was
// well formed.
type jsonCheck struct {
	b          []byte
	i          int
	key        string // the top-level member ObjectMember looks for
	start, end int
	found      bool
}

func (c *jsonCheck) space() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *jsonCheck) value(depth int) bool {
	if c.i >= len(c.b) {
		return false
	}
	switch ch := c.b[c.i]; {
	case ch == '{':
		return depth < MaxCheckDepth && c.object(depth+1)
	case ch == '[':
		return depth < MaxCheckDepth && c.array(depth+1)
	case ch == '"':
		return c.string()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	case ch == '-' || '0' <= ch && ch <= '9':
		return c.number()
	}
	return false
}

// object reads an object at depth (1 for doc itself), noting the value of
// member key at depth 1 when it is a number.
func (c *jsonCheck) object(depth int) bool {
	c.i++ // {
	c.space()
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return true
	}
	for {
		keyStart := c.i
		if c.i >= len(c.b) || c.b[c.i] != '"' || !c.string() {
			return false
		}
		name := c.b[keyStart+1 : c.i-1]
		c.space()
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return false
		}
		c.i++
		c.space()
		valueStart := c.i
		if !c.value(depth) {
			return false
		}
		if depth == 1 && string(name) == c.key {
			c.found = c.b[valueStart] == '-' || '0' <= c.b[valueStart] && c.b[valueStart] <= '9'
			c.start, c.end = valueStart, c.i
		}
		if more, ok := c.separator('}'); !more {
			return ok
		}
	}
}

func (c *jsonCheck) array(depth int) bool {
	c.i++ // [
	c.space()
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return true
	}
	for {
		if !c.value(depth) {
			return false
		}
		if more, ok := c.separator(']'); !more {
			return ok
		}
	}
}

// string reads a string: no control characters, only JSON's escapes.
// Like json.Valid, it does not check that the text is UTF-8. (It walks a
// local index: most of a summary's bytes are in strings.)
func (c *jsonCheck) string() bool {
	b := c.b
	for i := c.i + 1; i < len(b); i++ {
		switch ch := b[i]; {
		case ch == '"':
			c.i = i + 1
			return true
		case ch < 0x20:
			return false
		case ch == '\\':
			i++
			if i >= len(b) {
				return false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return false
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *jsonCheck) number() bool {
	if c.b[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(c.b) && c.b[c.i] == '0':
		c.i++
	case c.i < len(c.b) && '1' <= c.b[c.i] && c.b[c.i] <= '9':
		c.digits()
	default:
		return false
	}
	if c.i < len(c.b) && c.b[c.i] == '.' {
		c.i++
		if c.digits() == 0 {
			return false
		}
	}
	if c.i < len(c.b) && (c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		c.i++
		if c.i < len(c.b) && (c.b[c.i] == '+' || c.b[c.i] == '-') {
			c.i++
		}
		if c.digits() == 0 {
			return false
		}
	}
	return true
}

// digits reads [0-9]* and says how many.
func (c *jsonCheck) digits() int {
	from := c.i
	for c.i < len(c.b) && '0' <= c.b[c.i] && c.b[c.i] <= '9' {
		c.i++
	}
	return c.i - from
}

func (c *jsonCheck) literal(lit string) bool {
	if !bytes.HasPrefix(c.b[c.i:], []byte(lit)) {
		return false
	}
	c.i += len(lit)
	return true
}

// separator reads what follows a member or element: a comma (more to
// come) or the closing bracket (the container ended, well formed).
func (c *jsonCheck) separator(closing byte) (more, ok bool) {
	c.space()
	if c.i >= len(c.b) {
		return false, false
	}
	switch c.b[c.i] {
	case ',':
		c.i++
		c.space()
		return true, true
	case closing:
		c.i++
		return false, true
	}
	return false, false
}
