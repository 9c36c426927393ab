package httpapi

import (
	"bytes"
	"os"
	"testing"
)

// TestOpenAPICompressedIsCurrent: the document the binaries embed is
// openapi.json as it is in the repository.
func TestOpenAPICompressedIsCurrent(t *testing.T) {
	src, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(openAPIDocument(), src) {
		t.Fatal("openapi.json.gz is not openapi.json compressed: run `go generate ./pkg/httpapi/`")
	}
}
