package flowdef

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Limits of SQL steps (docs/reliability.md).
const (
	DefaultSQLMaxRows = 1000
	MaxSQLRows        = 10000
	DefaultSQLTimeout = 10 * time.Second
	MaxSQLTimeout     = 60 * time.Second
	MaxSQLBytes       = 64 << 10 // a statement's text
	MaxSQLParams      = 100
)

func init() {
	register(Rules{
		Type:        StepSQL,
		Fields:      []string{"connection", "query", "params", "maxRows", "timeout", "retry"},
		SideEffects: true,
		Check:       checkSQL,
	})
}

// checkSQL checks a SQL step: values reach the database only as
// parameters, never as text spliced into the statement.
func checkSQL(c Checks, st *Step, at string) error {
	if err := CheckText(at+".connection", st.Connection, 200); err != nil {
		return Invalid(`%s (the name of a POSTGRES or MYSQL connection, e.g. "db")`, err.(*Error).Message)
	}
	q := st.Query.SQL
	if strings.TrimSpace(q) == "" {
		return Invalid(`%s.query is required for SQL: a statement with $1, $2 (POSTGRES) or ? (MYSQL) placeholders, e.g. "select id from users where created > $1"`, at)
	}
	if len(q) > MaxSQLBytes {
		return Invalid("%s.query is %d bytes; at most %d are allowed", at, len(q), MaxSQLBytes)
	}
	if strings.Contains(q, "{{") || strings.Contains(q, "}}") {
		return Invalid(`%s.query holds a {{ template }}: values go in params, never into the statement's text (use $1 or ? and "params": ["{{ … }}"])`, at)
	}
	if len(st.Params) > 0 {
		var params []json.RawMessage
		if err := json.Unmarshal(st.Params, &params); err != nil {
			return Invalid(`%s.params must be an array of values or templates, e.g. ["{{ state.lastSeen }}", 10]`, at)
		}
		if len(params) > MaxSQLParams {
			return Invalid("%s.params has %d values; at most %d are allowed", at, len(params), MaxSQLParams)
		}
		for i, p := range params {
			if err := CheckTemplates(c, fmt.Sprintf("%s.params[%d]", at, i), p); err != nil {
				return err
			}
		}
	}
	if st.MaxRows == 0 {
		st.MaxRows = DefaultSQLMaxRows
	}
	if st.MaxRows < 1 || st.MaxRows > MaxSQLRows {
		return Invalid("%s.maxRows %d: use 1 to %d", at, st.MaxRows, MaxSQLRows)
	}
	if _, err := st.SQLTimeout(); err != nil {
		return Invalid("%s.%v", at, err)
	}
	return nil
}

// SQLTimeout is a SQL step's time limit: its timeout, or
// DefaultSQLTimeout when unset.
func (s Step) SQLTimeout() (time.Duration, error) {
	if s.Timeout == "" {
		return DefaultSQLTimeout, nil
	}
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d <= 0 || d > MaxSQLTimeout {
		return 0, fmt.Errorf("timeout %q: use a duration above 0 and at most %s, such as \"10s\"", s.Timeout, MaxSQLTimeout)
	}
	return d, nil
}
