package sqlitestore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"flowservice/pkg/automation"
)

// ListRunsJSON is ListRuns with each summary as the JSON the API returns
// for it, read from the summary column as it is (summaryJSON).
func (s *Store) ListRunsJSON(ctx context.Context, project, flowID string, q automation.ListQuery) (automation.Page[json.RawMessage], error) {
	limit, query, args, err := listRunsQuery(project, flowID, q)
	if err != nil {
		return automation.Page[json.RawMessage]{}, err
	}
	return summaryPage(ctx, s, limit, false, summaryJSON, query, args...)
}

// SearchRunsJSON is SearchRuns with each summary as the JSON the API
// returns for it, as ListRunsJSON.
func (s *Store) SearchRunsJSON(ctx context.Context, project string, q automation.RunQuery) (automation.Page[json.RawMessage], error) {
	query, args, byCreated, err := searchSQL(project, q)
	if err != nil {
		return automation.Page[json.RawMessage]{}, err
	}
	return summaryPage(ctx, s, max(q.Limit, 1), byCreated, summaryJSON, query, args...)
}

// summaryJSON is the JSON of the summary of a row of summaryColumns and
// its size. The summary column is that JSON already
// (encodeSummary: json.Marshal of Run.Summary, written with the run), but
// for attempts, which a claim counts in its column without writing the
// document: the column's count is written into it (withAttempts). The
// column is checked to be JSON, so that one damaged row fails its page as
// its decoding would, rather than breaking the page's JSON.
//
// The API's bytes are those of the summary decoded into a Run and encoded
// again, which gives back what encodeSummary wrote, but for one escape:
// encoding/json writes a byte of invalid UTF-8 as \ufffd, which decodes
// to U+FFFD, written back as the character itself. A summary with that
// escape (a header of raw bytes, say), a row without the column (written
// before it), or a summary not of the form above is decoded as ListRuns
// reads it and encoded again.
func summaryJSON(r *summaryRow) (json.RawMessage, int, error) {
	if !r.old && !bytes.Contains(r.doc, []byte(`\ufffd`)) && json.Valid(r.doc) {
		if b, ok := withAttempts(r.doc, r.attempts); ok {
			return b, len(r.doc), nil
		}
	}
	run, size, err := summaryRun(r)
	if err != nil {
		return nil, 0, err
	}
	b, err := json.Marshal(run)
	if err != nil {
		return nil, 0, fmt.Errorf("encode run %s: %w", run.ID, err)
	}
	return b, size, nil
}

// withAttempts is summary, a JSON object as encoding/json writes it, with
// the number of its own "attempts" member (not a nested object's, such as
// a step's) set to n; false if it has no such member holding a number.
// summary is returned as it is when it holds n already.
func withAttempts(summary []byte, n int) ([]byte, bool) {
	start, end, ok := numberMember(summary, "attempts")
	if !ok {
		return nil, false
	}
	var digits [20]byte
	num := strconv.AppendInt(digits[:0], int64(n), 10)
	if bytes.Equal(summary[start:end], num) {
		return summary, true
	}
	out := make([]byte, 0, len(summary)-(end-start)+len(num))
	out = append(append(append(out, summary[:start]...), num...), summary[end:]...)
	return out, true
}

// numberMember is where the value of doc's member key is, when it is a
// number: doc[start:end]. doc is a valid JSON object without whitespace
// between its tokens (as encoding/json writes it), so a string at depth 1
// followed by a colon is one of its keys; keys inside strings are passed
// over whole, and the members of nested objects are deeper.
func numberMember(doc []byte, key string) (start, end int, ok bool) {
	depth := 0
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			j := stringEnd(doc, i)
			if depth == 1 && j < len(doc) && doc[j] == ':' && string(doc[i+1:j-1]) == key {
				end = j + 1
				for end < len(doc) && (doc[end] == '-' || '0' <= doc[end] && doc[end] <= '9') {
					end++
				}
				return j + 1, end, end > j+1
			}
			i = j - 1
		}
	}
	return 0, 0, false
}

// stringEnd is the index just past the JSON string that starts with the
// quote at doc[i].
func stringEnd(doc []byte, i int) int {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(doc)
}
