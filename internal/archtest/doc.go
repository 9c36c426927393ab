// Package archtest holds the test that keeps docs/architecture.md true: its
// package table names every package of the module, the domain imports what
// the page says, adapters import no other adapter, and every direct
// dependency in go.mod is justified in its Dependencies table.
package archtest
