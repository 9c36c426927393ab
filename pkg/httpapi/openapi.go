package httpapi

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"io"
	"net/http"
	"sync"
)

// openAPICompressed is the OpenAPI 3.1 description of the management API,
// written by hand in openapi.json and kept true by the tests, which
// validate every exchange they make against it. The binaries embed it
// gzipped (openapi.json.gz, made by `go generate ./pkg/httpapi/`, checked
// against openapi.json by TestOpenAPICompressedIsCurrent): 24 KB instead of
// 230 KB in a Lambda bootstrap, whose size is a cold-start budget
// (docs/benchmarks.md, figure h).
//
//go:generate go run gen_openapi.go
//go:embed openapi.json.gz
var openAPICompressed []byte

// openAPIDocument is the document, decompressed once when first asked for.
// A function, not a variable set at init, so that binaries that serve no
// API (the receivers, the runner) link neither it nor its bytes.
func openAPIDocument() []byte {
	openAPIOnce.Do(func() {
		zr, err := gzip.NewReader(bytes.NewReader(openAPICompressed))
		if err != nil {
			panic("httpapi: the embedded OpenAPI document is not gzip: " + err.Error())
		}
		if openAPIOnce.doc, err = io.ReadAll(zr); err != nil {
			panic("httpapi: the embedded OpenAPI document does not decompress: " + err.Error())
		}
	})
	return openAPIOnce.doc
}

var openAPIOnce struct {
	sync.Once
	doc []byte
}

// OpenAPIDocument returns a copy of the management API's OpenAPI 3.1
// document, for tools and for the dashboard.
func OpenAPIDocument() []byte { return append([]byte(nil), openAPIDocument()...) }

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument())
}
