package pgtest_test

import (
	"context"
	"testing"

	"flowservice/pkg/pgstore/pgtest"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSchemas: two schemas of the one cluster are apart, and each URL
// connects into its own.
func TestSchemas(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.URL(t), pgtest.URL(t)
	for i, u := range []string{a, b} {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE TABLE x (n int)`); err != nil {
			t.Fatalf("schema %d: %v", i, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO x VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
		var n, count int
		if err := conn.QueryRow(ctx, `SELECT max(n), count(*) FROM x`).Scan(&n, &count); err != nil || n != i || count != 1 {
			t.Fatalf("schema %d: max %d count %d, %v", i, n, count, err)
		}
	}
}
