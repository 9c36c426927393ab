//go:build ignore

// gen_openapi writes openapi.json.gz, the compressed copy of openapi.json
// the binaries embed (openapi.go). Run it with `go generate ./pkg/httpapi/`
// after editing openapi.json.
package main

import (
	"bytes"
	"compress/gzip"
	"log"
	"os"
)

func main() {
	doc, err := os.ReadFile("openapi.json")
	if err != nil {
		log.Fatal(err)
	}
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if _, err := zw.Write(doc); err != nil {
		log.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("openapi.json.gz", out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
