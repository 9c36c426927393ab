package flowdef

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClipIDKeepsRunesWhole(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short", "refund", "refund"},
		{"exactly 64 bytes", strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{"ascii", strings.Repeat("a", 70), strings.Repeat("a", 64) + "…"},
		// 63 ASCII bytes then "é" (2 bytes) straddles byte 64: the rune goes whole.
		{"rune across the cut", strings.Repeat("a", 63) + "ééé", strings.Repeat("a", 63) + "…"},
		{"three-byte runes", strings.Repeat("€", 30), strings.Repeat("€", 21) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClipID(tc.in)
			if got != tc.want {
				t.Errorf("ClipID(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("ClipID(%q) = %q is not valid UTF-8", tc.in, got)
			}
		})
	}
}
