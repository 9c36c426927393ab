package automation

import "unicode/utf8"

// JSONPosition turns a byte offset into a JSON text (encoding/json's
// SyntaxError.Offset, the count of bytes read when the error was found)
// into the 1-based line and column a person looks for in an editor:
// columns count characters, not bytes, and the offending character is the
// one at the offset's last byte read.
func JSONPosition(text []byte, offset int64) (line, col int) {
	end := int(min(max(offset, 1), int64(len(text))))
	line, col = 1, 0
	for i := 0; i < end; {
		r, size := utf8.DecodeRune(text[i:])
		i += size
		if r == '\n' {
			line, col = line+1, 0
			continue
		}
		col++
	}
	return line, max(col, 1)
}
