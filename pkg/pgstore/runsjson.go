package pgstore

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
// document: the column's count is written into it (withAttempts), which
// checks that the column is JSON, so that a damaged row fails its page as
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
	if !r.old && !bytes.Contains(r.doc, []byte(`\ufffd`)) {
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

// withAttempts is summary with the number of its own "attempts" member
// (not a nested object's, such as a step's) set to n, or false if summary
// is not a JSON object (objectMember) or has no such member holding a
// number. summary is returned as it is when it holds n already.
func withAttempts(summary []byte, n int) ([]byte, bool) {
	start, end, found, valid := objectMember(summary, "attempts")
	if !valid || !found {
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
