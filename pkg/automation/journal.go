package automation

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The step journal appends: each entry an attempt journals is the list of
// changes to the run's results since its previous entry (StepPatch), never
// the whole run again, so that a FOR_EACH of n items writes bytes linear in
// n (docs/reliability.md, "Step journal"). The store keeps the entries
// beside the run's document and folds them into the run whenever it reads
// it (ApplyStepPatches); a write of the whole run (ReleaseRun, FinishRun,
// RecordSteps) folds them in for good.

// StepPatch is one change to a run's step results.
type StepPatch struct {
	// Path locates the result changed: the root, "s" (the run's steps) or
	// "e" (its onError steps), then one segment per level, an index into a
	// list of results, or "i<k>" for item k of a FOR_EACH. "s/3" is the
	// fourth step, "s/3/i12/0" the first step of its item 12, "s/2/1" the
	// second step of the branch a SWITCH at "s/2" took, "s/3/i12" item 12
	// itself.
	Path string `json:"path"`
	// Steps replaces the whole list at a root path.
	Steps []StepResult `json:"steps,omitempty"`
	// Step replaces the result at Path; Iteration replaces the item there.
	Step      *StepResult `json:"step,omitempty"`
	Iteration *Iteration  `json:"iteration,omitempty"`
	// Own says that Step or Iteration carries its own fields only: the
	// nested results already stored stay.
	Own bool `json:"own,omitempty"`
}

// Roots of StepPatch.Path.
const (
	PatchRootSteps   = "s"
	PatchRootOnError = "e"
)

// DiffSteps is the patches that turn the results old into now under root
// (PatchRootSteps or PatchRootOnError): a result whose nested lists kept
// their shape is patched field by field, level by level; one whose shape
// changed (a SWITCH that chose its branch, a FOR_EACH that began its
// items) is replaced whole, once. Outputs are compared by identity first:
// the engine's snapshots share the bytes of results that did not change,
// so a diff costs a walk of the tree, not a read of every output.
func DiffSteps(root string, old, now []StepResult) []StepPatch {
	var out []StepPatch
	if len(old) != len(now) {
		return []StepPatch{{Path: root, Steps: orEmpty(now)}}
	}
	diffList(root, old, now, &out)
	return out
}

func orEmpty(s []StepResult) []StepResult {
	if s == nil {
		return []StepResult{}
	}
	return s
}

func diffList(path string, old, now []StepResult, out *[]StepPatch) {
	for i := range now {
		diffStep(path+"/"+strconv.Itoa(i), old[i], now[i], out)
	}
}

func diffStep(p string, o, n StepResult, out *[]StepPatch) {
	if o.Name != n.Name || o.Type != n.Type || len(o.Steps) != len(n.Steps) || len(o.Iterations) != len(n.Iterations) {
		whole := n
		*out = append(*out, StepPatch{Path: p, Step: &whole})
		return
	}
	if !sameOwn(o, n) {
		own := n
		own.Steps, own.Iterations = nil, nil
		*out = append(*out, StepPatch{Path: p, Step: &own, Own: true})
	}
	diffList(p, o.Steps, n.Steps, out)
	for k := range n.Iterations {
		ip := p + "/i" + strconv.Itoa(k)
		oi, ni := o.Iterations[k], n.Iterations[k]
		if len(oi.Steps) != len(ni.Steps) {
			whole := ni
			*out = append(*out, StepPatch{Path: ip, Iteration: &whole})
			continue
		}
		if oi.Index != ni.Index || oi.Status != ni.Status || oi.Error != ni.Error {
			own := ni
			own.Steps = nil
			*out = append(*out, StepPatch{Path: ip, Iteration: &own, Own: true})
		}
		diffList(ip, oi.Steps, ni.Steps, out)
	}
}

// sameOwn reports whether two results have the same own fields (nested
// results aside).
func sameOwn(o, n StepResult) bool {
	return o.Status == n.Status && o.Error == n.Error && o.DurationMs == n.DurationMs && o.Attempts == n.Attempts &&
		sameTime(o.StartedAt, n.StartedAt) && sameTime(o.FinishedAt, n.FinishedAt) &&
		sameBytes(o.Output, n.Output) && sameLogs(o.Logs, n.Logs) && sameItems(o.ItemsJournal, n.ItemsJournal)
}

func sameTime(a, b *time.Time) bool {
	return a == b || a != nil && b != nil && a.Equal(*b)
}

func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || bytes.Equal(a, b)
}

func sameLogs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || slices.Equal(a, b)
}

func sameItems(a, b *ItemsJournal) bool {
	return a == b || a != nil && b != nil && a.Count == b.Count && a.SHA256 == b.SHA256 && sameBytes(a.Items, b.Items)
}

// ApplyStepPatches folds journal entries into r, in the order they were
// appended. A patch whose path does not lead to a result (a journal that
// does not belong to this document) is an error.
func ApplyStepPatches(r *Run, patches []StepPatch) error {
	for _, p := range patches {
		if err := applyPatch(r, p); err != nil {
			return fmt.Errorf("journal entry %s: %w", p.Path, err)
		}
	}
	return nil
}

func applyPatch(r *Run, p StepPatch) error {
	segs := strings.Split(p.Path, "/")
	var list *[]StepResult
	switch segs[0] {
	case PatchRootSteps:
		list = &r.Steps
	case PatchRootOnError:
		list = &r.OnErrorSteps
	default:
		return fmt.Errorf("unknown root %q", segs[0])
	}
	if len(segs) == 1 {
		*list = orEmpty(p.Steps)
		return nil
	}
	var (
		step *StepResult
		it   *Iteration
	)
	for _, seg := range segs[1:] {
		if k, ok := strings.CutPrefix(seg, "i"); ok {
			i, err := strconv.Atoi(k)
			if err != nil || step == nil || i < 0 || i >= len(step.Iterations) {
				return fmt.Errorf("no item %q", seg)
			}
			it, list = &step.Iterations[i], &step.Iterations[i].Steps
			step = nil
			continue
		}
		i, err := strconv.Atoi(seg)
		if err != nil || list == nil || i < 0 || i >= len(*list) {
			return fmt.Errorf("no step %q", seg)
		}
		step, it = &(*list)[i], nil
		list = &step.Steps
	}
	switch {
	case step != nil && p.Step != nil:
		n := *p.Step
		if p.Own {
			n.Steps, n.Iterations = step.Steps, step.Iterations
		}
		*step = n
	case it != nil && p.Iteration != nil:
		n := *p.Iteration
		if p.Own {
			n.Steps = it.Steps
		}
		*it = n
	default:
		return fmt.Errorf("patch does not fit what its path leads to")
	}
	return nil
}

// journaler appends the entries of one attempt's journal: the changes
// since the results it journaled last (or those the attempt was claimed
// with), under root.
type journaler struct {
	runs RunStore
	root string
	base []StepResult
	n    int // entries the run's journal holds (Run.JournalLen)
}

// append journals the change from the results last journaled to steps,
// for the claimed run r (its LeaseToken fences the write).
func (j *journaler) append(ctx context.Context, r Run, steps []StepResult) error {
	patches := DiffSteps(j.root, j.base, steps)
	if len(patches) == 0 {
		return nil
	}
	r.JournalLen = j.n
	if err := j.runs.AppendSteps(ctx, r, patches); err != nil {
		return err
	}
	j.base, j.n = steps, j.n+1
	return nil
}
